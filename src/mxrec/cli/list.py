"""mxrec list PREFIX ROOT: write .lst image lists from a folder (im2rec --list) or from a CSV.

Without --recursive only the images directly in ROOT are listed, all with
label 0; with it every folder holding images becomes a class, and the class
names go to PREFIX.labels. Finding no image at all is an error that says
why (sub-folders without --recursive, other file extensions).
"""

from __future__ import annotations

import argparse

from mxrec.cli.options import add_prefix_root
from mxrec.packing.make_lists import DEFAULT_EXTS, DEFAULT_SEED, make_lists, read_labelled_csv, write_lists
from mxrec.storage.filesystem import shown

HELP = "write .lst image lists from a folder or a CSV (im2rec --list)"


def add_list_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of im2rec's list mode (shared with ``mxrec im2rec``)."""
    parser.add_argument("--exts", nargs="+", default=list(DEFAULT_EXTS),
                        help="image file extensions, case-insensitive (default: %(default)s)")
    parser.add_argument("--chunks", type=int, default=1, help="split the list into this many chunks")
    parser.add_argument("--train-ratio", type=float, default=1.0, help="fraction of each chunk for _train")
    parser.add_argument("--test-ratio", type=float, default=0.0, help="fraction of each chunk for _test")
    parser.add_argument("--recursive", action="store_true",
                        help="walk sub-folders; each folder holding images gets its own label")
    parser.add_argument("--no-shuffle", dest="shuffle", action="store_false", help="keep the walk order")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_prefix_root(p, "output prefix: writes PREFIX[_N][_train|_val|_test].lst and PREFIX.labels",
                    "the image folder (with --csv: the folder the CSV paths are relative to)")
    add_list_arguments(p)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="shuffle seed (default: %(default)s, as im2rec)")
    p.add_argument("--csv", metavar="FILE",
                   help="list the rows of FILE (path,label; tab-separated for .tsv) instead of walking ROOT; "
                        "class-name labels become 0, 1, ... in sorted order")


def run(args: argparse.Namespace) -> int:
    options = dict(chunks=args.chunks, train_ratio=args.train_ratio, test_ratio=args.test_ratio,
                   shuffle=args.shuffle, seed=args.seed)
    if args.csv:
        written = write_lists(args.prefix, read_labelled_csv(args.csv, args.root), **options)
    else:
        written = make_lists(args.prefix, args.root, recursive=args.recursive, exts=args.exts, **options)
    for path in written:
        print(f"wrote {shown(path)}")
    return 0
