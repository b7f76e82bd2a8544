"""``mxrec preview DATASET.rec -o sheet.png``: a contact sheet of sampled (or given) records, key and label on each."""

from __future__ import annotations

import argparse

from mxrec.cli.options import add_dataset, key_type
from mxrec.doctor.preview import contact_sheet, write_image
from mxrec.errors import MxrecError

HELP = "contact sheet of records with key and label drawn on each"

def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset(p)
    p.add_argument("-o", "--output", required=True, help="the image to write (.png, or .jpg)")
    p.add_argument("-n", "--count", type=int, default=16, help="records to sample (default 16)")
    p.add_argument("--keys", help="comma-separated keys to show instead of a sample")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--tile", type=int, default=160, help="tile size in pixels")
    p.add_argument("--columns", type=int, help="tiles per row (default: a near-square grid)")


def run(args: argparse.Namespace) -> int:
    keys_are = key_type(args)
    keys = None
    if args.keys:
        try:
            keys = [keys_are(k.strip()) for k in args.keys.split(",") if k.strip()]
        except ValueError:
            raise MxrecError(f"--keys {args.keys!r}: keys are integers (use --str-keys for string keys)") from None
    sheet, shown = contact_sheet(args.rec, args.idx, keys=keys, count=args.count, seed=args.seed, tile=args.tile,
                                 columns=args.columns, key_type=keys_are)
    write_image(args.output, sheet)
    print(f"{args.output}: {len(shown)} record(s): keys {', '.join(map(str, shown))}")
    return 0
