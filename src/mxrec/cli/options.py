"""Options several commands share, defined once so that they mean the same everywhere."""

from __future__ import annotations

import argparse

from mxrec.errors import OptionError
from mxrec.format.idx import KeyType


def add_prefix_root(parser: argparse.ArgumentParser, prefix_help: str, root_help: str) -> None:
    """The ``PREFIX ROOT`` arguments of the commands that follow im2rec's command line."""
    parser.add_argument("prefix", help=prefix_help)
    parser.add_argument("root", help=root_help)


def add_dataset(parser: argparse.ArgumentParser, *, keys: bool = True) -> None:
    """The ``.rec`` argument and ``--idx`` (and, with ``keys``, ``--str-keys``)."""
    parser.add_argument("rec", help="the .rec file")
    parser.add_argument("--idx", help="the .idx file (default: beside the .rec, if present)")
    if keys:
        parser.add_argument("--str-keys", action="store_true", help="the .idx keys are strings, not integers")


def key_type(args: argparse.Namespace) -> KeyType:
    """The ``key_type`` that ``--str-keys`` asks for."""
    return str if getattr(args, "str_keys", False) else int


def add_workers(parser: argparse.ArgumentParser, what: str = "threads", default_text: str = "all cores") -> None:
    """``--workers N``."""
    parser.add_argument("--workers", type=int, default=None, help=f"{what} (default: {default_text})")


def add_no_progress(parser: argparse.ArgumentParser) -> None:
    """``--no-progress`` (``args.progress`` is then false)."""
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress display")


ENGINES = ("local", "ray")


def add_engine(parser: argparse.ArgumentParser, what: str) -> None:
    """``--engine local|ray`` and ``--address`` (the Ray cluster)."""
    parser.add_argument("--engine", choices=ENGINES, default="local",
                        help=f"where to {what}: this machine (local, the default) or a Ray cluster (ray; needs "
                             "pip install 'mxrec[ray]')")
    parser.add_argument("--address", metavar="HOST:PORT",
                        help="the Ray cluster for --engine ray (default: RAY_ADDRESS, else a cluster started on "
                             "this machine, else a new single-machine Ray)")


def check_engine(args: argparse.Namespace) -> None:
    """Refuse ``--address`` without ``--engine ray`` (it would be ignored)."""
    if args.address is not None and args.engine != "ray":
        raise OptionError(f"--address {args.address} needs --engine ray")
