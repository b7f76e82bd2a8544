"""``mxrec stats DATASET.rec [-o stats.png]``: label counts and image sizes as text, and plotted with -o."""

from __future__ import annotations

import argparse
import json

from mxrec.cli.options import add_dataset, add_no_progress, add_workers
from mxrec.cli.progress import Progress
from mxrec.doctor.check_labels import LABEL_KINDS
from mxrec.doctor.stats import dataset_stats, plot_stats, pyplot

HELP = "label counts and image sizes (text; plots with -o)"

def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset(p, keys=False)
    p.add_argument("-o", "--output", help="also plot into this image (needs matplotlib: pip install 'mxrec[plot]')")
    p.add_argument("--labels", choices=LABEL_KINDS, default="auto",
                   help="'class': labels are class ids; 'value': real values (default: decide from the labels)")
    add_workers(p, "reading threads")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_no_progress(p)


def run(args: argparse.Namespace) -> int:
    if args.output:
        pyplot()  # fail before the long read when the plotting extra is missing
    with Progress(label="reading: ", unit="rec", enabled=args.progress) as bar:
        stats = dataset_stats(args.rec, args.idx, label_kind=args.labels, workers=args.workers, progress=bar)
    print(json.dumps(stats.to_dict(), indent=2) if args.json else stats.format_text())
    if args.output:
        plot_stats(stats, args.output)
    return 0
