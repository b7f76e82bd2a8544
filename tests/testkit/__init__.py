"""Shared helpers for mxrec's tests; importable as `testkit` (pyproject puts `tests/` on pythonpath).

- ``testkit.servers``: real S3 (moto), HTTP (with Range) and WebHDFS servers on 127.0.0.1 with request logs and
  fault knobs, so remote-dataset tests can count the requests a reader makes.
- ``testkit.fixtures``: the pytest plugin that starts and stops them (``pytest_plugins = ["testkit.fixtures"]``).
- ``testkit.ranks``: launching real ``torch.distributed`` gloo ranks as separate processes bound to loopback.
"""
