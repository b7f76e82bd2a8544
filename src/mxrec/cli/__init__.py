"""The ``mxrec`` command line: one module per subcommand, each a thin layer over a public function.

A subcommand module defines ``register(subparsers)``, which adds its parser and
sets ``run`` (a function ``args -> exit code``) as its default. Add a module's
name to :data:`SUBCOMMANDS` to make it appear.

Exit codes: 0 success; 1 the command ran and found faults (``verify``);
2 bad usage or an input mxrec could not process (the message names it).
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
        importlib.import_module(f"mxrec.cli.{name}").register(subparsers)
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
