"""Options several commands share, defined once so that they mean the same everywhere."""

from __future__ import annotations

import argparse
import os

from mxrec.format.idx import KeyType


def add_prefix_root(parser: argparse.ArgumentParser, prefix_help: str, root_help: str) -> None:
    """The ``PREFIX ROOT`` arguments of the commands that follow im2rec's command line."""
    parser.add_argument("prefix", help=prefix_help)
    parser.add_argument("root", help=root_help)


def add_dataset(parser: argparse.ArgumentParser, *, keys: bool = True) -> None:
    """The ``.rec`` argument and ``--idx`` (and, with ``keys``, ``--str-keys``)."""
    parser.add_argument("rec", help="the dataset: a .rec file or URL (s3://, gs://, http(s)://, webhdfs://...), or a "
                                    "shard set (quoted glob 'train-*.rec', brace range 'train-{00000..00015}.rec', "
                                    "NAME.manifest.json, or its folder)")
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


def shown(path: str) -> str:
    """A path as messages show it: relative to the current folder when local, the URL when remote."""
    return path if "://" in path else os.path.relpath(path)
