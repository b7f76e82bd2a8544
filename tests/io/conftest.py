"""Bridge until the top-level conftest registers testkit: puts ``tests/`` on ``sys.path`` and loads the plugin.

Delete this file once ``tests/conftest.py`` has ``pytest_plugins = ["testkit.fixtures"]`` and pyproject puts
``tests/`` on pytest's ``pythonpath``; until then it lets ``python -m pytest`` run ``tests/io`` as is. (A
``pytest_plugins`` line is only honoured in the top-level conftest, hence the explicit import here.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("testkit.fixtures"):
        config.pluginmanager.import_plugin("testkit.fixtures")
