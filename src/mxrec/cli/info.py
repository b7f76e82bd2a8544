"""``mxrec info FILE.rec``: records, bytes, multi-part records, labels, index status."""

from __future__ import annotations

import argparse
import json

from mxrec.cli.options import add_dataset
from mxrec.doctor.sets import info as dataset_info

HELP = "summarise a .rec file or a shard set (per shard and in total)"

def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset(p, keys=False)
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    info = dataset_info(args.rec, args.idx)
    print(json.dumps(info.to_dict(), indent=2) if args.json else info.format_text())
    return 0
