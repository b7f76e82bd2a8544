"""Ray fixtures for the tests in this folder: ``ray_cluster`` (session), ``ray_driver``, ``ray_local``.

They live in ``testkit.ray_cluster`` so that other folders can import them the same way. Importing the fixture
functions into a conftest registers them; ``pytest_configure`` registers the ``slow`` marker. (A non-root
conftest may not set ``pytest_plugins``, hence the import.)
"""

from __future__ import annotations

from testkit.ray_cluster import pytest_configure, ray_cluster, ray_driver, ray_local

__all__ = ["pytest_configure", "ray_cluster", "ray_driver", "ray_local"]
