"""mxrec extract FILE.rec OUT_DIR: the images back out, one folder per label, plus a .lst to pack them again.

Each record's image bytes go unchanged to OUT_DIR/LABEL/ID.EXT (with --flat:
OUT_DIR/ID.EXT), and OUT_DIR/NAME.lst lists them all, last; mxrec pack
--pass-through packs them again into the same records. With --labels the
label folders get the class names. Nothing is written outside OUT_DIR.
Records that cannot be read are skipped and listed, and the exit code is
then 1; an interrupted extraction says what it left.
"""

from __future__ import annotations

import argparse
import os
import sys

from mxrec.cli import EXIT_DAMAGED, EXIT_OK
from mxrec.cli.options import add_dataset, add_label_names, key_type, label_names
from mxrec.errors import MxrecError
from mxrec.packing.extract import dataset_stem, extract_records
from mxrec.storage.filesystem import shown

HELP = "write the images of a .rec back to files"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset(p)
    p.add_argument("out_dir", help="folder or URL to write into (made if missing); nothing is written outside it")
    p.add_argument("--flat", action="store_true", help="all files directly in OUT_DIR (labels only in the .lst)")
    add_label_names(p, beside=False)


def run(args: argparse.Namespace) -> int:
    names = label_names(args, beside=False)
    done = [0, 0]

    def progress(records: int, total: int) -> None:
        done[:] = records, total

    lst = os.path.join(args.out_dir, dataset_stem(args.rec) + ".lst")
    try:
        result = extract_records(args.rec, args.out_dir, idx_path=args.idx, key_type=key_type(args), flat=args.flat,
                                 label_names=names, progress=progress)
    except (KeyboardInterrupt, MxrecError, OSError):
        if done[0] or done[1]:  # (a failure before the first record wrote nothing: the error says it all)
            print(f"extracted {done[0]} of {done[1]} records into {args.out_dir} before stopping; their files "
                  f"stay there, {lst} was not written: run again to extract everything", file=sys.stderr)
        raise
    for position, key, reason in result.skipped:
        print(f"skipped record {position} (key {key!r}): {reason}", file=sys.stderr)
    if result.damage is not None:
        print(f"damage stepped over: {result.damage}", file=sys.stderr)
    print(f"wrote {result.files} files and {shown(result.lst_path)}; {len(result.skipped)} skipped")
    return EXIT_OK if result.complete else EXIT_DAMAGED
