"""``tests/torch`` mirrors :mod:`mxrec.torch`. On the path (``tests/`` is), this folder would import as an empty
namespace package ``torch`` where PyTorch is not installed: its tests are then not collected."""

import importlib.util

_spec = importlib.util.find_spec("torch")
collect_ignore_glob = [] if _spec is not None and _spec.origin not in (None, "namespace") else ["test_*.py"]
