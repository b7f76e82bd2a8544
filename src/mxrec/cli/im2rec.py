"""mxrec im2rec PREFIX ROOT [options]: the command line of MXNet's tools/im2rec.py, both modes.

With --list it makes image lists (as mxrec list, with im2rec's fixed seed);
otherwise every PREFIX*.lst is packed (as mxrec pack, with --num-thread
defaulting to 1 as in im2rec). Existing scripts only change the program
name. Output differs from im2rec's only where im2rec misbehaves: records
always in .lst order, bad images skipped and reported (exit code 1), output
renamed into place when done, an empty list or a wrong ROOT an error.
"""

from __future__ import annotations

import argparse

from mxrec.cli.list import add_list_arguments
from mxrec.cli.options import add_prefix_root, add_workers
from mxrec.cli.pack import add_transform_arguments, pack_with_progress, report, transform_from_args
from mxrec.io.lists import label_names_path, read_label_names
from mxrec.packing.make_lists import make_lists

HELP = "drop-in for MXNet's tools/im2rec.py (same arguments)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_prefix_root(p, "prefix of the .lst files to write (--list) or to pack", "the image folder")
    p.add_argument("--list", action="store_true", help="make image lists instead of packing")
    add_list_arguments(p)
    add_transform_arguments(p)
    add_workers(p, "worker threads", default=1, default_text="1, as im2rec", im2rec_name=True)


def run(args: argparse.Namespace) -> int:
    if args.list:
        make_lists(args.prefix, args.root, recursive=args.recursive, exts=args.exts, chunks=args.chunks,
                   train_ratio=args.train_ratio, test_ratio=args.test_ratio, shuffle=args.shuffle)
        if args.recursive:  # im2rec prints the folder of each label
            for label, name in read_label_names(label_names_path(args.prefix)).items():
                print(name, label)
        return 0
    return report(pack_with_progress(args.prefix, args.root, transform_from_args(args), workers=args.workers,
                                     pack_label=args.pack_label))
