"""The ``mxrec`` command line: one module per subcommand, each a thin layer over a public function.

A subcommand module defines ``HELP`` (one line for ``mxrec --help``), its
docstring (the command's description), ``add_arguments(parser)`` and ``run(args)
-> exit code``. Add a module's name to :data:`SUBCOMMANDS` to make it appear.
Options several commands share are defined once, in :mod:`mxrec.cli.options`.

Exit codes: 0 success; 1 the command ran and found faults (``verify``);
2 bad usage or an input mxrec could not process (the message names it).

Only this room prints and draws progress (:mod:`mxrec.cli.progress`); the
library reports through callbacks. May import: anything in mxrec (it is the
top floor; nothing imports it).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from mxrec import __version__
from mxrec.errors import MxrecError

SUBCOMMANDS = ["info", "index", "verify", "list", "pack", "im2rec", "extract", "preview", "stats"]


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.run(args)
    except (MxrecError, OSError) as exc:
        print(f"mxrec {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"mxrec {args.command}: interrupted", file=sys.stderr)
        return 130
