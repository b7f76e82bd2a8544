"""The ``mxrec`` command line: one module per subcommand, each a thin layer over a public function.

A subcommand module defines ``HELP`` (one line for ``mxrec --help``), its
docstring (the command's description, shown by ``mxrec COMMAND --help``, so
plain text), ``add_arguments(parser)`` and ``run(args) -> exit code``. Add a
module's name to :data:`SUBCOMMANDS` to make it appear. Options several
commands share are defined once, in :mod:`mxrec.cli.options`.

Exit codes (:data:`EXIT_OK`, ...): 0 success; 1 the command ran but its input
is damaged or faulty (it printed what it could; ``verify`` found a fault);
2 bad usage, or an input or output mxrec could not process (one line on
stderr names it); 130 / 143 interrupted by SIGINT (Ctrl-C) / SIGTERM, after
removing any unfinished output; 141 the reader of standard output went away
(``mxrec verify ... | head``), quietly, as Unix tools do.

:func:`main` handles all of that in one place: SIGTERM is raised as
:class:`Terminated`, a ``KeyboardInterrupt``, so every cleanup that runs on
Ctrl-C runs on it too; errors become one line; no traceback reaches the user
unless ``MXREC_TRACEBACK=1`` is set.

Only this room prints and draws progress (:mod:`mxrec.cli.progress`); the
library reports through callbacks. May import: anything in mxrec (it is the
top floor; nothing imports it).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Iterator, Sequence

from mxrec import __version__
from mxrec.errors import MxrecError

SUBCOMMANDS = ["info", "index", "verify", "list", "pack", "im2rec", "extract", "preview", "stats", "probe"]
EXIT_OK, EXIT_DAMAGED, EXIT_ERROR = 0, 1, 2
EXIT_BROKEN_PIPE = 128 + getattr(signal, "SIGPIPE", 13)


class Terminated(KeyboardInterrupt):
    """SIGTERM (what schedulers and ``kill`` send), raised where Ctrl-C would raise ``KeyboardInterrupt``."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (then the old handler returns)."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
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
        sub.set_defaults(run=command.run, command=name)
    return parser


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's final flush cannot fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    name = f"mxrec {args.command}"
    try:
        with sigterm_as_interrupt():
            code = args.run(args)
            sys.stdout.flush()  # a closed pipe shows up here, not in the interpreter's exit
        return code
    except BrokenPipeError as exc:
        if exc.filename is not None:  # an output file that is a pipe: a real error
            print(f"{name}: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except (MxrecError, OSError) as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        print(f"{name}: {'terminated (SIGTERM)' if signum == signal.SIGTERM else 'interrupted'}", file=sys.stderr)
        return 128 + signum
    except Exception as exc:  # a bug or an error of a library underneath: one line, the traceback on request
        if os.environ.get("MXREC_TRACEBACK"):
            raise
        print(f"{name}: error: {type(exc).__name__}: {exc} (MXREC_TRACEBACK=1 shows where)", file=sys.stderr)
        return EXIT_ERROR
