"""mxrec info FILE.rec: what a .rec holds, read in one pass over its framing and headers.

Prints the record count, bytes, multi-part records, payload kinds, labels
and the state of the .idx; for an InsightFace face set (header record under
key 0) the layout: identities, faces and image size. A damaged file is
summarised up to and around the damage, and the exit code is then 1
(mxrec verify gives the full diagnosis).
"""

from __future__ import annotations

import argparse
import json

from mxrec.cli import EXIT_DAMAGED, EXIT_OK
from mxrec.cli.options import add_dataset, key_type
from mxrec.doctor.sets import info as dataset_info

HELP = "summarise a .rec file or a shard set (per shard and in total)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset(p)
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    info = dataset_info(args.rec, args.idx, key_type(args))
    print(json.dumps(info.to_dict(), indent=2) if args.json else info.format_text())
    return EXIT_DAMAGED if info.damaged else EXIT_OK
