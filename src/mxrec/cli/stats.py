"""mxrec stats DATASET.rec [-o stats.png]: label counts and image sizes as text, and plotted with -o.

Reads every record's header and image header once (no decoding). Class
names come from --labels FILE, or from NAME.labels beside NAME.rec. Damaged
framing or an unreadable .idx is stepped over, listed, and the exit code is
then 1. Plotting needs matplotlib (pip install 'mxrec[plot]').
"""

from __future__ import annotations

import argparse
import json

from mxrec.cli import EXIT_DAMAGED, EXIT_OK
from mxrec.cli.options import add_dataset, add_label_names, add_no_progress, add_workers, key_type, label_names
from mxrec.cli.progress import Progress
from mxrec.doctor.check_labels import LABEL_KINDS
from mxrec.doctor.stats import dataset_stats, plot_format, plot_stats

HELP = "label counts and image sizes (text; plots with -o)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset(p)
    p.add_argument("-o", "--output", help="also plot into this image (.png, .pdf, .svg, ...; needs matplotlib)")
    p.add_argument("--label-kind", choices=LABEL_KINDS, default="auto",
                   help="'class': labels are class ids; 'value': real values (default: decide from the labels)")
    add_label_names(p)
    add_workers(p, "reading threads")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_no_progress(p)


def run(args: argparse.Namespace) -> int:
    if args.output:
        plot_format(args.output)  # fail before the long read: no matplotlib, or a format it cannot write
    with Progress(label="reading: ", unit="rec", enabled=args.progress) as bar:
        stats = dataset_stats(args.rec, args.idx, key_type(args), label_kind=args.label_kind, workers=args.workers,
                              label_names=label_names(args), progress=bar)
    print(json.dumps(stats.to_dict(), indent=2) if args.json else stats.format_text())
    if args.output:
        plot_stats(stats, args.output)
    return EXIT_DAMAGED if stats.damage else EXIT_OK
