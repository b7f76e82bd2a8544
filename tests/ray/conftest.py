"""Fixtures of the ``mxrec.ray`` tests: one driver connection per test module, Ray Data keeping rows in order.

Why one connection per module: Ray starts worker processes per driver (job), and on this 2-core machine
starting them (Python, Ray, pyarrow, mxrec) costs seconds; a module's tests share its workers.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from testkit.ray_cluster import LocalRayCluster, connect


@pytest.fixture(scope="module")
def ray_module(ray_cluster: LocalRayCluster) -> Iterator[ModuleType]:
    """This process connected to the session's test cluster for one test module. Yields ``ray``."""
    with connect(ray_cluster) as ray:
        yield ray


@pytest.fixture
def mray(ray_module: ModuleType) -> Iterator[ModuleType]:
    """``mxrec.ray``, connected, with Ray Data handing out rows in dataset order; the Ray Data settings a
    test changes are put back afterwards."""
    import mxrec.ray

    context = ray_module.data.DataContext.get_current()
    saved = context.execution_options.preserve_order, context.target_max_block_size
    context.execution_options.preserve_order = True  # without it blocks come out as their tasks finish
    yield mxrec.ray
    context.execution_options.preserve_order, context.target_max_block_size = saved
