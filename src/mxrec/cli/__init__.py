"""The ``mxrec`` command line: one module per subcommand, each a thin layer over a public function.

A subcommand module defines ``HELP`` (one line for ``mxrec --help``), its
docstring (the command's description, shown by ``mxrec COMMAND --help``, so
plain text), ``add_arguments(parser)`` and ``run(args) -> exit code``. Add a
module's name to :data:`SUBCOMMANDS` to make it appear. Options several
commands share are defined once, in :mod:`mxrec.cli.options`.

The subcommands: :mod:`~mxrec.cli.info`, :mod:`~mxrec.cli.index`, :mod:`~mxrec.cli.verify`,
:mod:`~mxrec.cli.list`, :mod:`~mxrec.cli.pack`, :mod:`~mxrec.cli.im2rec`, :mod:`~mxrec.cli.extract`,
:mod:`~mxrec.cli.preview`, :mod:`~mxrec.cli.stats`, :mod:`~mxrec.cli.convert`, :mod:`~mxrec.cli.probe`; beside
them :mod:`~mxrec.cli.options` (the shared options) and :mod:`~mxrec.cli.progress` (the progress display).

Exit codes (:data:`EXIT_OK`, ...): 0 success; 1 the command ran but its input
is damaged or faulty (it printed what it could; ``verify`` found a fault);
2 bad usage, or an input or output mxrec could not process (one line on
stderr names it); 130 / 143 interrupted by SIGINT (Ctrl-C) / SIGTERM, after
removing any unfinished output; 141 the reader of standard output went away
(``mxrec verify ... | head``), quietly, as Unix tools do.

:func:`main` handles all of that in one place: SIGTERM is raised as
:class:`Terminated`, a ``KeyboardInterrupt``, so every cleanup that runs on
Ctrl-C runs on it too; errors become one line (then their notes: what a
cleanup could not remove); no traceback reaches the user unless
``MXREC_TRACEBACK=1`` is set. ``--requests``, ``--cache-dir`` and
``--cache-size`` are every command's (:func:`mxrec.cli.options.add_storage`).

Only this subpackage prints and draws progress (:mod:`mxrec.cli.progress`); the
library reports through callbacks. May import: anything in mxrec (it is the
top floor; nothing imports it).
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence

from mxrec import __version__
from mxrec.cli.options import add_storage, storage_environment
from mxrec.errors import MxrecError

SUBCOMMANDS = ["info", "index", "verify", "list", "pack", "im2rec", "extract", "preview", "stats", "convert", "probe"]
EXIT_OK, EXIT_DAMAGED, EXIT_ERROR = 0, 1, 2
EXIT_BROKEN_PIPE = 128 + getattr(signal, "SIGPIPE", 13)


class Terminated(KeyboardInterrupt):
    """SIGTERM (what schedulers and ``kill`` send), raised where Ctrl-C would raise ``KeyboardInterrupt``."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self.signum = signum


#: The signal that interrupted the command, once one has (kept even if the exception it raised was lost).
RECEIVED: list[int] = []


def _raise_terminated(signum: int, frame: object) -> None:
    RECEIVED.append(signum)
    raise Terminated(signum)


def _raise_interrupt(signum: int, frame: object) -> None:
    RECEIVED.append(signum)
    raise KeyboardInterrupt


def _interrupt_main_soon(signum: int) -> None:
    time.sleep(0.01)
    _thread.interrupt_main(signum)


class _RedeliverLostInterrupts:
    """``sys.unraisablehook`` that raises again, in the main thread's own code, an interrupt that was lost.

    Python runs a signal handler between any two bytecodes of the main thread, finalizers included: when SIGTERM
    arrives while the garbage collector runs some library's ``__del__`` (or a weakref callback), the exception is
    raised there, printed as "Exception ignored in ... Terminated: 15", and the job would go on to finish with
    exit 0. This hook sees that exception and has the signal delivered once more a moment later, outside the
    finalizer (again and again should it land in another one).
    """

    def __init__(self, previous: object) -> None:
        self.previous = previous

    def __call__(self, unraisable: object) -> None:
        exc_type = getattr(unraisable, "exc_type", None)
        if isinstance(exc_type, type) and issubclass(exc_type, KeyboardInterrupt):
            signum = getattr(getattr(unraisable, "exc_value", None), "signum", signal.SIGINT)
            # from another thread, a moment later, once this hook and the finalizer are done (a thread started
            # without waiting for it: waiting here could take the signal again, inside this hook, and lose it)
            _thread.start_new_thread(_interrupt_main_soon, (signum,))
            return
        self.previous(unraisable)  # type: ignore[operator]


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (then the old handler returns).

    An interrupt (SIGTERM or Ctrl-C) raised inside a finalizer, where Python would print it and go on, is raised
    again outside it (:class:`_RedeliverLostInterrupts`); :data:`RECEIVED` keeps the signals received.
    """
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    RECEIVED.clear()
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:
        signal.signal(signal.SIGINT, _raise_interrupt)
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _RedeliverLostInterrupts(previous_hook)
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mxrec", description="MXNet RecordIO (.rec/.idx) datasets without MXNet.")
    parser.add_argument("--version", action="version", version=f"mxrec {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name in SUBCOMMANDS:
        command = importlib.import_module(f"mxrec.cli.{name}")
        sub = subparsers.add_parser(name, help=command.HELP, description=command.__doc__,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        command.add_arguments(sub)
        add_storage(sub)
        sub.set_defaults(run=command.run, command=name)
    return parser


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's final flush cannot fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _quiet_library_logs() -> None:
    """Keep the log records of the libraries underneath (gcsfs, google-auth, botocore...) off stderr.

    Without a handler, Python prints every warning a library logs, tracebacks included (gcsfs without a network:
    ~100 lines for one failed request); the error mxrec reports names the URL and the real cause in one line.
    ``MXREC_TRACEBACK=1`` shows them again.
    """
    root = logging.getLogger()
    if not root.handlers and not os.environ.get("MXREC_TRACEBACK"):
        root.addHandler(logging.NullHandler())


def main(argv: Sequence[str] | None = None) -> int:
    _quiet_library_logs()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    name = f"mxrec {args.command}"
    try:
        with sigterm_as_interrupt(), storage_environment(args):
            code = args.run(args)
            sys.stdout.flush()  # a closed pipe shows up here, not in the interpreter's exit
            if RECEIVED:  # an interrupt whose exception was lost (and not yet raised again): never exit 0
                raise Terminated(RECEIVED[-1]) if RECEIVED[-1] == signal.SIGTERM else KeyboardInterrupt
        return code
    except BrokenPipeError as exc:
        if exc.filename is not None:  # an output file that is a pipe: a real error
            print(f"{name}: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except (MxrecError, OSError) as exc:
        _print_error(name, exc, str(exc))
        return EXIT_ERROR
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        print(f"{name}: {'terminated (SIGTERM)' if signum == signal.SIGTERM else 'interrupted'}", file=sys.stderr)
        return 128 + signum
    except Exception as exc:  # a bug or an error of a library underneath: one line, the traceback on request
        if os.environ.get("MXREC_TRACEBACK"):
            raise
        _print_error(name, exc, f"{type(exc).__name__}: {exc} (MXREC_TRACEBACK=1 shows where)")
        return EXIT_ERROR


def _print_error(name: str, exc: BaseException, text: str) -> None:
    """The error in one line, then each note on it (what went wrong after it: a cleanup's leftovers), indented."""
    print(f"{name}: error: {text}", file=sys.stderr)
    for note in getattr(exc, "__notes__", ()):
        print(f"  {note}", file=sys.stderr)
