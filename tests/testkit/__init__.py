"""Shared helpers for mxrec's tests, importable as ``testkit`` (pyproject puts ``tests/`` on the path).

* :mod:`testkit.cli`: run the ``mxrec`` command line in this interpreter, or in a fresh one as a user would.
* :mod:`testkit.waiting`: :func:`~testkit.waiting.wait_for` a condition, bounded (no fixed sleeps).
* :mod:`testkit.datasets`: small generated image datasets, clean and with a fault of every kind.
* :mod:`testkit.iterdata`: record files for the iterator tests, rebuilt from the golden photos.
* :mod:`testkit.servers`: real servers on 127.0.0.1 (S3 API via moto, HTTP with ``Range``, WebHDFS), each
  with a request log to count against and fault knobs; :mod:`testkit.fixtures` makes them pytest fixtures.
* :mod:`testkit.proxy`: a fault-injecting HTTP proxy before those servers (5xx storms, resets, truncated bodies
  and heads, stalls, latency, bandwidth caps; deterministic or from seeded random profiles).
* :mod:`testkit.soak`: every operation on remote data under a fault profile, each judged ok / error / wrong /
  hang / unclear (``tests/io/test_soak.py``, ``benchmarks/bench_faults.py``).
* :mod:`testkit.browser`: a real headless chromium for the HTML pages (``browser`` fixture, ``open_page``).
* :mod:`testkit.ranks`: real ``torch.distributed`` (gloo) rank processes on loopback.
* :mod:`testkit.ray_cluster`: a real local Ray cluster on loopback (``ray_cluster``, ``ray_driver``, ``ray_local``
  fixtures), stopped by its own processes. (The Ray tests live in ``tests/ray/``, without ``__init__.py``: with
  Ray installed, ``import ray`` finds the package, which wins over the folder; without it, ``ray_cluster``
  skips, since ``import ray`` then finds only the folder, which has no ``ray.data``.)

:data:`GOLDEN` is ``tests/data/golden``: files written by real MXNet 1.9.1 (see its README).
"""

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
GOLDEN = TESTS / "data" / "golden"
SRC = TESTS.parent / "src"
