"""mxrec preview DATASET.rec -o sheet.png: a contact sheet of sampled (or given) records, key and label on each.

Looking at it shows at a glance whether images and labels belong together.
Class names come from --labels FILE, or from NAME.labels beside NAME.rec. A
record that cannot be read or decoded gets a tile saying why, is listed on
stderr, and the exit code is then 1.
"""

from __future__ import annotations

import argparse
import sys

from mxrec.cli import EXIT_DAMAGED, EXIT_OK
from mxrec.cli.options import add_dataset, add_label_names, key_type, label_names, positive_int
from mxrec.doctor.preview import contact_sheet, image_output_format, write_image
from mxrec.errors import MxrecError

HELP = "contact sheet of records with key and label drawn on each"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset(p)
    p.add_argument("-o", "--output", required=True, help="the image to write (.png, or .jpg)")
    p.add_argument("-n", "--count", type=positive_int, default=16, help="records to sample (default 16)")
    p.add_argument("--keys", help="comma-separated keys to show instead of a sample")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--tile", type=positive_int, default=160, help="tile size in pixels")
    p.add_argument("--columns", type=positive_int, help="tiles per row (default: a near-square grid)")
    add_label_names(p)


def run(args: argparse.Namespace) -> int:
    image_output_format(args.output)  # a name OpenCV cannot write fails before the work
    keys_are = key_type(args)
    keys = None
    if args.keys:
        try:
            keys = [keys_are(k.strip()) for k in args.keys.split(",") if k.strip()]
        except ValueError:
            raise MxrecError(f"--keys {args.keys!r}: keys are integers (use --str-keys for string keys)") from None
    faults = []

    def on_fault(where: object, reason: str) -> None:
        faults.append(where)
        print(f"{args.rec}: {where}: {reason}", file=sys.stderr)

    sheet, shown = contact_sheet(args.rec, args.idx, keys=keys, count=args.count, seed=args.seed, tile=args.tile,
                                 columns=args.columns, key_type=keys_are, label_names=label_names(args),
                                 on_fault=on_fault)
    write_image(args.output, sheet)
    print(f"{args.output}: {len(shown)} record(s): keys {', '.join(map(str, shown))}")
    return EXIT_DAMAGED if faults else EXIT_OK
