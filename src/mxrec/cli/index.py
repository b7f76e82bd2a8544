"""mxrec index FILE.rec: rebuild the .idx of a .rec by scanning it.

The keys are the records' IRHeader ids when every record has a header and
the ids are unique (as im2rec and InsightFace write them), else positions
0, 1, ... in file order; --key-source chooses. The .idx is written
atomically beside the .rec, or to -o PATH.
"""

from __future__ import annotations

import argparse

from mxrec.format.idx import index_path_for
from mxrec.io.index import KEY_SOURCES, build_index

HELP = "rebuild the .idx of a .rec by scanning it"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rec", help="the .rec file or URL")
    p.add_argument("-o", "--output", help="the .idx to write, a path or URL (default: beside the .rec)")
    p.add_argument("--key-source", choices=KEY_SOURCES, default="auto",
                   help="position: 0..n-1 in file order; id: each record's IRHeader id (as im2rec); "
                        "auto (default): ids when every record has a header and they are unique")
    # The old name, kept working but not shown: --keys elsewhere lists keys (mxrec preview --keys 3,7).
    p.add_argument("--keys", dest="key_source", choices=KEY_SOURCES, default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    output = args.output or index_path_for(args.rec)
    index, source = build_index(args.rec, output, args.key_source)
    print(f"wrote {output}: {len(index)} entries, keyed by record {source}")
    return 0
