"""Options several commands share, defined once so that they mean the same everywhere.

One name for one thing: ``--workers`` (``-j``) is the thread count of every
command (``--num-thread`` is kept where im2rec's command line has it);
``--labels FILE`` is always a ``.labels`` file naming the classes (the
meaning of the labels is ``--label-kind``); ``--str-keys`` says the ``.idx``
keys are strings for every command that reads an ``.idx``; ``--requests``,
``--cache-dir`` and ``--cache-size`` (every command) say how remote data is
reached.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator
from typing import Any

from mxrec.doctor.check_labels import LABEL_KINDS
from mxrec.errors import MxrecError, OptionError
from mxrec.format.idx import KeyType
from mxrec.io.lists import LABELS_SUFFIX, read_label_names
from mxrec.storage.settings import ENV_CACHE_DIR, ENV_CACHE_SIZE, ENV_REQUESTS, RequestPolicy, parse_bytes


def checked(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type`` that reports ``parse``'s own error message (argparse would say only 'invalid value')."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except MxrecError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


def positive_int(text: str) -> int:
    """An integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_prefix_root(parser: argparse.ArgumentParser, prefix_help: str, root_help: str) -> None:
    """The ``PREFIX ROOT`` arguments of the commands that follow im2rec's command line."""
    parser.add_argument("prefix", help=prefix_help)
    parser.add_argument("root", help=root_help)


def add_dataset(parser: argparse.ArgumentParser) -> None:
    """The dataset argument, ``--idx`` and ``--str-keys``."""
    parser.add_argument("rec", help="the dataset: a .rec file or URL (s3://, gs://, http(s)://, webhdfs://...), or a "
                                    "shard set (quoted glob 'train-*.rec', brace range 'train-{00000..00015}.rec', "
                                    "NAME.manifest.json, or its folder), or a mixture file NAME.mix.json")
    parser.add_argument("--idx", help="the .idx file (default: beside the .rec, if present)")
    parser.add_argument("--str-keys", action="store_true", help="the .idx keys are strings, not integers")


def key_type(args: argparse.Namespace) -> KeyType:
    """The ``key_type`` that ``--str-keys`` asks for."""
    return str if args.str_keys else int


def add_label_names(parser: argparse.ArgumentParser, beside: bool = True) -> None:
    """``--labels FILE``: a ``.labels`` file (``label<TAB>name`` lines, as ``mxrec list`` writes) naming the classes."""
    default = " (default: NAME.labels beside NAME.rec, if present)" if beside else ""
    parser.add_argument("--labels", metavar="FILE",
                        help=f"a .labels file (label<TAB>name lines, as mxrec list writes) naming the classes{default}")


def label_names(args: argparse.Namespace, beside: bool = True) -> dict[int, str] | None:
    """The class names ``--labels`` names, or (``beside``) those of the ``.labels`` file beside the ``.rec``."""
    if args.labels:
        if args.labels in LABEL_KINDS and not os.path.exists(args.labels):
            raise MxrecError(f"--labels {args.labels}: --labels names a .labels file now; what the labels are is "
                             f"--label-kind {args.labels}")
        return read_label_names(args.labels)
    candidate = os.path.splitext(args.rec)[0] + LABELS_SUFFIX
    if beside and os.path.isfile(candidate):
        return read_label_names(candidate)
    return None


def add_workers(parser: argparse.ArgumentParser, what: str = "threads", default: int | None = None,
                default_text: str = "all cores", im2rec_name: bool = False) -> None:
    """``-j N`` / ``--workers N`` (and im2rec's ``--num-thread N`` with ``im2rec_name``)."""
    names = ["-j", "--workers"] + (["--num-thread"] if im2rec_name else [])
    parser.add_argument(*names, dest="workers", type=positive_int, default=default, metavar="N",
                        help=f"{what} (default: {default_text})")


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
                        help="the Ray cluster for --engine ray (default: RAY_ADDRESS, else a new single-machine "
                             "Ray on 127.0.0.1 only; 'auto': a cluster started on this machine). A cluster at an "
                             "address is yours to secure")


def check_engine(args: argparse.Namespace) -> None:
    """Refuse ``--address`` without ``--engine ray``, and ``-j`` with it (either would be ignored)."""
    if args.address is not None and args.engine != "ray":
        raise OptionError(f"--address {args.address} needs --engine ray")
    if args.engine == "ray" and getattr(args, "workers", None) is not None:
        raise OptionError(f"-j/--workers {args.workers} sets this machine's threads; with --engine ray the "
                          "cluster's CPUs do the work (Ray tasks: 4 per cluster CPU)")


def _request_spec(text: str) -> str:
    RequestPolicy.parse(text)  # refused here, with its own message, rather than at the first request
    return text


def _size(text: str) -> str:
    return str(parse_bytes(text))


def add_storage(parser: argparse.ArgumentParser) -> None:
    """``--requests SPEC``, ``--cache-dir DIR`` and ``--cache-size SIZE``: how remote data is reached.

    They set, for this command, what ``$MXREC_REQUESTS``, ``$MXREC_CACHE_DIR`` and ``$MXREC_CACHE_SIZE`` would
    (:func:`storage_environment`), so every remote operation the command makes follows them.
    """
    group = parser.add_argument_group("remote data")
    group.add_argument("--requests", metavar="SPEC", type=checked(_request_spec),
                       help="the request policy for remote files, e.g. attempts=4,read_timeout=20,deadline=120 "
                            f"(fields: {', '.join(f.name for f in dataclasses.fields(RequestPolicy))}; "
                            f"default: ${ENV_REQUESTS}, else the defaults)")
    group.add_argument("--cache-dir", metavar="DIR",
                       help=f"keep fetched blocks of remote files in DIR (default: ${ENV_CACHE_DIR}, else no cache)")
    group.add_argument("--cache-size", metavar="SIZE", type=checked(_size),
                       help=f"the most bytes the cache folder holds, e.g. 20GB (default: ${ENV_CACHE_SIZE}, else "
                            "10 GiB)")


@contextlib.contextmanager
def storage_environment(args: argparse.Namespace) -> Iterator[None]:
    """Within the block, the environment says what ``--requests``, ``--cache-dir`` and ``--cache-size`` gave
    (restored afterwards: a command run in-process leaves no trace)."""
    given = {ENV_REQUESTS: getattr(args, "requests", None), ENV_CACHE_DIR: getattr(args, "cache_dir", None),
             ENV_CACHE_SIZE: getattr(args, "cache_size", None)}
    given = {name: value for name, value in given.items() if value is not None}
    before = {name: os.environ.get(name) for name in given}
    os.environ.update(given)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
