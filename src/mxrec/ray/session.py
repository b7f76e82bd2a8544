"""Connecting to Ray, and what every mxrec job on Ray needs around it.

* :func:`require_ray`: the ``ray`` module, or a one-line :class:`~mxrec.errors.MissingExtraError` naming the extra.
* :func:`ray_session`: this process as a driver of the cluster at an address. Ray itself retries an
  unreachable address for minutes; mxrec first opens a TCP connection to it (a few seconds at most) and
  raises :class:`~mxrec.errors.ClusterError` naming the address when nothing answers. A session already
  open in this process (``ray.init`` called by the user) is used as it is. Without an address mxrec starts
  a single-machine Ray that listens on 127.0.0.1 only (:func:`loopback_only`); a cluster at an address is
  its owner's to secure. Ray's own messages (a worker died) are kept off this process's stdout
  (:func:`quiet_driver`).
* :func:`task_errors`: an mxrec error raised inside a Ray task comes out as itself, not wrapped in Ray's
  ``RayTaskError`` with a remote traceback (the command line prints it on one line).
* :func:`run_reporting`: a blocking Ray Data job (``write_datasink``) run while the caller is told how far
  it got, from a counter actor the tasks add to (:class:`ProgressTally`).
* :func:`job_context`: Ray Data set up for mxrec's own jobs (quiet, every CPU used).

Nothing here imports Ray at module level: this module is what tells the user Ray is missing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, TypeVar

from mxrec.errors import ClusterError, MxrecError, import_extra

T = TypeVar("T")

TASKS_PER_CPU = 4  # default tasks of a pack or verify job per cluster CPU: evens out slow and fast tasks
CONNECT_TIMEOUT = 5.0  # seconds to wait for the cluster's address to accept a TCP connection
_POLL_SECONDS = 0.5  # how often run_reporting asks the tally


def require_ray() -> ModuleType:
    """The ``ray`` module with Ray Data, or :class:`~mxrec.errors.MissingExtraError` naming the extra to install."""
    what = "the Ray engine needs Ray Data, which is not installed"
    ray = import_extra("ray", what, "ray")
    import_extra("ray.data", what, "ray")  # a folder named "ray" on sys.path imports as ray, but has no ray.data
    return ray


def cluster_host_port(address: str) -> tuple[str, int]:
    """``(host, port)`` of a Ray address (``HOST:PORT``, ``ray://HOST:PORT``, ``[::1]:PORT``)."""
    rest = address.split("://", 1)[-1].rstrip("/")
    host, colon, port = rest.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise ClusterError(f"Ray cluster address {address!r}: expected HOST:PORT (or ray://HOST:PORT, or auto)")
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Raise :class:`~mxrec.errors.ClusterError` naming ``address`` unless it accepts a TCP connection."""
    host, port = cluster_host_port(address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise ClusterError(f"cannot reach the Ray cluster at {address}: {why} (is it running? `ray start --head` "
                           "starts one; --address or RAY_ADDRESS names it)") from None


@contextlib.contextmanager
def ray_session(address: str | None = None) -> Iterator[ModuleType]:
    """Within the block this process is a Ray driver; yields the ``ray`` module.

    If this process is already connected, that connection is used and left open; a connection made here is
    closed at the end of the block. SIGTERM then ends the process through cleanup code, as Ctrl-C does: the
    caller's own SIGTERM handler if it had one (the command line raises ``KeyboardInterrupt``), else Ray's
    (``SystemExit``).

    Parameters
    ----------
    address
        The cluster (``HOST:PORT``, ``ray://HOST:PORT``, ``auto`` for one started on this machine); ``None`` is
        ``RAY_ADDRESS``, else a new single-machine Ray that mxrec starts for itself and stops at the end of the
        block. That one listens on 127.0.0.1 only (gcs_server, raylet, workers: see :func:`loopback_only`); a
        cluster at an address is its owner's to secure.

    Yields
    ------
    module
        The ``ray`` module.

    Raises
    ------
    ClusterError
        ``address`` is malformed, nothing answers there, or Ray cannot connect to it.
    MissingExtraError
        Ray Data is not installed.
    """
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    target = address or os.environ.get("RAY_ADDRESS") or "local"
    if target not in ("auto", "local"):
        check_reachable(target)
    main_thread = threading.current_thread() is threading.main_thread()
    own_handler = signal.getsignal(signal.SIGTERM) if main_thread else None
    # a Ray mxrec starts for itself listens on loopback only
    with loopback_only() if target == "local" else contextlib.nullcontext({}) as options:
        try:
            # Errors of tasks come back as exceptions; the workers' own output is not streamed to this process.
            ray.init(address=target, logging_level=logging.WARNING, log_to_driver=False, **options)
        except ConnectionError as exc:
            raise ClusterError(f"cannot connect to the Ray cluster at {target}: {exc}") from None
        if callable(own_handler):  # ray.init replaced it with sys.exit: keep the caller's (the command line's)
            signal.signal(signal.SIGTERM, own_handler)
        quiet = quiet_driver()
        try:
            yield ray
        except (KeyboardInterrupt, SystemExit):
            # Ctrl-C or SIGTERM. Ray Data's executor thread of the interrupted job outlives the shutdown below:
            # it would report the shutdown as errors, tracebacks included, and its next Ray call would connect
            # this process to the cluster again (Ray's automatic ray.init). The user asked for the stop.
            logging.getLogger("ray.data").setLevel(logging.CRITICAL)
            with contextlib.suppress(ImportError, AttributeError):
                import ray._private.auto_init_hook as auto_init

                auto_init.enable_auto_connect = False
            raise
        finally:
            ray.shutdown()
            quiet()


def quiet_driver() -> Callable[[], None]:
    """Stop Ray printing the cluster's messages in this driver; returns the function that undoes it.

    With ``log_to_driver=False`` workers' output already stays out, but Ray still prints the raylet's
    messages (a worker died, a task is retried) on this process's *stdout*, coloured: that would break
    ``--json`` output. A task's failure reaches mxrec as an exception all the same.
    """
    from ray._private import worker  # the switch Ray's own debugger uses to silence these

    saved = worker._worker_logs_enabled
    worker._worker_logs_enabled = False

    def restore() -> None:
        worker._worker_logs_enabled = saved

    return restore


#: Environment that keeps a Ray that mxrec starts on 127.0.0.1. On Linux Ray's default (1) makes the node
#: address the outward-facing one, even for 127.0.0.1, and its servers then listen on every interface.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
LOOPBACK = "127.0.0.1"


@contextlib.contextmanager
def loopback_only() -> Iterator[dict[str, Any]]:
    """Within the block a Ray started by this process listens on 127.0.0.1 only; yields ``ray.init`` options.

    gcs_server, raylet, the agents and the workers inherit :data:`LOOPBACK_ENV` from this process's
    environment (the workers through the raylet); this process's Ray read the same setting when it was
    imported, so its copy is set too. Both are put back afterwards.
    """
    from ray._private import ray_constants  # what Ray read from the environment at import

    saved_env = {name: os.environ.get(name) for name in LOOPBACK_ENV}
    saved_flag = ray_constants.ENABLE_RAY_CLUSTER
    os.environ.update(LOOPBACK_ENV)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield {"_node_ip_address": LOOPBACK, "dashboard_host": LOOPBACK}
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def default_tasks() -> int:
    """How many tasks a pack or verify job is cut into by default: :data:`TASKS_PER_CPU` per cluster CPU."""
    return TASKS_PER_CPU * max(1, int(require_ray().cluster_resources().get("CPU", 1)))


@contextlib.contextmanager
def task_errors() -> Iterator[None]:
    """Re-raise an :class:`~mxrec.errors.MxrecError` or ``OSError`` raised by a Ray task as itself.

    (An error raised inside a ``map_batches`` function stays wrapped in Ray's ``UserCodeException``: Ray
    keeps only the text of the original there.)
    """
    ray = require_ray()
    try:
        yield
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, (MxrecError, OSError)):
            raise cause from None
        raise


@contextlib.contextmanager
def job_context() -> Iterator[None]:
    """Ray Data set up for one of mxrec's own jobs (pack, write) within the block, as it was afterwards.

    * No progress bars, no log lines below CRITICAL: mxrec jobs report progress through callbacks (the
      command line draws its own bar), and a failed task's error reaches the caller as an exception,
      which Ray Data would also log with its remote traceback.
    * No per-operator resource reservation: it keeps one stage of a pipeline from starving the next,
      but mxrec's jobs are one stage (the write fuses with its input), and with it Ray Data ran a single
      task at a time on a 2-CPU cluster.
    """
    ctx = require_ray().data.DataContext.get_current()
    logger = logging.getLogger("ray.data")
    saved = ctx.enable_progress_bars, ctx.op_resource_reservation_enabled, logger.level
    ctx.enable_progress_bars = False
    ctx.op_resource_reservation_enabled = False
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        ctx.enable_progress_bars, ctx.op_resource_reservation_enabled = saved[:2]
        logger.setLevel(saved[2])


class ProgressTally:
    """A counter that Ray tasks add to while a job runs (used as an actor: ``ProgressTally.start()``)."""

    def __init__(self) -> None:
        self.done = 0

    def add(self, count: int) -> None:
        self.done += count

    def count(self) -> int:
        return self.done

    @staticmethod
    def start() -> Any:
        """A new tally actor (no CPU reserved: it only counts)."""
        ray = require_ray()
        return ray.remote(num_cpus=0)(ProgressTally).remote()


def run_reporting(job: Callable[[], T], tally: Any, total: int,
                  progress: Callable[[int, int], None] | None) -> T:
    """Run ``job`` (a blocking Ray call) and meanwhile call ``progress(done, total)`` from ``tally``.

    The job runs in the calling thread, so that Ctrl-C or SIGTERM interrupts it where Ray Data expects it: Ray
    Data then stops its own executor thread before the caller's ``ray.shutdown()``. (Run in a thread of its own,
    the job went on after the interrupt, and its next call into the shut-down driver ended the process with exit
    code 1 before the command line could clean up or say why.) The progress reports come from a thread that is
    stopped and joined before this function returns or raises. A retried task counts its work again, so ``done``
    is capped at ``total``.
    """
    if progress is None:
        return job()
    ray = require_ray()
    stop = threading.Event()
    failed: list[BaseException] = []  # the reporter's own error (a closed stderr, a lost tally), raised here

    def report() -> None:
        try:
            while not stop.wait(_POLL_SECONDS):
                try:
                    done = ray.get(tally.count.remote(), timeout=_POLL_SECONDS)
                except ray.exceptions.GetTimeoutError:  # a busy cluster: report at the next tick
                    continue
                if not stop.is_set():
                    progress(min(done, total), total)
        except BaseException as exc:
            failed.append(exc)

    reporter = threading.Thread(target=report, name="mxrec-ray-progress", daemon=True)
    reporter.start()
    try:
        value = job()
    finally:
        stop.set()
        reporter.join()
    if failed:
        raise failed[0]
    progress(total, total)
    return value
