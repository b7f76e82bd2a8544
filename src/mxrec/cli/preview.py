"""``mxrec preview DATASET.rec -o sheet.png``: a contact sheet of sampled (or given) records, key and label on each."""

from __future__ import annotations

import argparse

from mxrec.errors import MxrecError
from mxrec.preview import contact_sheet, write_image


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("preview", help="contact sheet of records with key and label drawn on each",
                              description=__doc__)
    p.add_argument("rec", help="the .rec file")
    p.add_argument("-o", "--output", required=True, help="the image to write (.png, or .jpg)")
    p.add_argument("--idx", help="the .idx file (default: beside the .rec, if present)")
    p.add_argument("-n", "--count", type=int, default=16, help="records to sample (default 16)")
    p.add_argument("--keys", help="comma-separated keys to show instead of a sample")
    p.add_argument("--str-keys", action="store_true", help="the .idx keys are strings, not integers")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--tile", type=int, default=160, help="tile size in pixels")
    p.add_argument("--columns", type=int, help="tiles per row (default: a near-square grid)")
    p.set_defaults(run=run, command="preview")


def run(args: argparse.Namespace) -> int:
    key_type = str if args.str_keys else int
    keys = None
    if args.keys:
        try:
            keys = [key_type(k.strip()) for k in args.keys.split(",") if k.strip()]
        except ValueError:
            raise MxrecError(f"--keys {args.keys!r}: keys are integers (use --str-keys for string keys)") from None
    sheet, shown = contact_sheet(args.rec, args.idx, keys=keys, count=args.count, seed=args.seed, tile=args.tile,
                                 columns=args.columns, key_type=key_type)
    write_image(args.output, sheet)
    print(f"{args.output}: {len(shown)} record(s): keys {', '.join(map(str, shown))}")
    return 0
