"""``mxrec index FILE.rec``: rebuild the ``.idx`` by scanning the ``.rec``."""

from __future__ import annotations

import argparse

from mxrec.format.idx import index_path_for
from mxrec.io.index import KEY_SOURCES, build_index

HELP = "rebuild the .idx of a .rec by scanning it"

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rec", help="the .rec file or URL")
    p.add_argument("-o", "--output", help="the .idx to write, a path or URL (default: beside the .rec)")
    p.add_argument("--keys", choices=KEY_SOURCES, default="auto",
                   help="position: 0..n-1 in file order; id: each record's IRHeader id (as im2rec); "
                        "auto (default): ids when every record has a header and they are unique")


def run(args: argparse.Namespace) -> int:
    output = args.output or index_path_for(args.rec)
    index, source = build_index(args.rec, output, args.keys)
    print(f"wrote {output}: {len(index)} entries, keyed by record {source}")
    return 0
