"""``mxrec extract FILE.rec OUT_DIR``: the images back out, one folder per label, plus a ``.lst`` to repack them."""

from __future__ import annotations

import argparse
import sys

from mxrec.cli.options import add_dataset, shown
from mxrec.io.lists import read_label_names
from mxrec.pack.extract import extract_records

HELP = "write the images of a .rec back to files"

def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset(p, keys=False)
    p.add_argument("out_dir", help="folder or URL to write into (made if missing); nothing is written outside it")
    p.add_argument("--flat", action="store_true", help="all files directly in OUT_DIR (labels only in the .lst)")
    p.add_argument("--labels", metavar="FILE",
                   help="a .labels file (label<TAB>name lines, as mxrec list writes) to name the label folders")


def run(args: argparse.Namespace) -> int:
    names = read_label_names(args.labels) if args.labels else None
    result = extract_records(args.rec, args.out_dir, idx_path=args.idx, flat=args.flat, label_names=names)
    for position, key, reason in result.skipped:
        print(f"skipped record {position} (key {key!r}): {reason}", file=sys.stderr)
    print(f"wrote {result.files} files and {shown(result.lst_path)}; {len(result.skipped)} skipped")
    return 0
