"""mxrec info FILE.rec: what a .rec holds, read in one pass over its framing and headers.

Prints the record count, bytes, multi-part records, payload kinds, labels
and the state of the .idx; for an InsightFace face set (header record under
key 0) the layout: identities, faces and image size. A mixture file
(NAME.mix.json) gets a row per source: records, weight, samples per epoch,
passes ("2.4× repeated", "0.75× — full cycle every 2 epochs") and label
offset, then each source's own summary. A WebDataset, Parquet or
TFRecord set (mxrec convert's or another tool's) gets its files, records,
classes and payload kinds. A damaged file is
summarised up to and around the damage, and the exit code is then 1
(mxrec verify gives the full diagnosis).
"""

from __future__ import annotations

import argparse
import json

from mxrec.cli import EXIT_DAMAGED, EXIT_OK
from mxrec.cli.options import add_dataset, key_type
from mxrec.doctor.sets import info as dataset_info
from mxrec.interop import describe_set
from mxrec.interop.sets import foreign_format

HELP = ("summarise a .rec file, a shard set (per shard and in total), a mixture (per source), or a "
        "WebDataset/Parquet/TFRecord set")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset(p)
    p.add_argument("--json", action="store_true", help="print JSON")


def describe_text(info: dict) -> str:
    """``mxrec info``'s text for a WebDataset, Parquet or TFRecord set."""
    lines = [f"{info['format']} set: {info['files']} file(s), {info['records']} records"
             + (f", manifest {info['manifest']}" if info["manifest"] else " (no manifest)")]
    if info["classes"] is not None:
        lines.append(f"classes: {info['classes']}" + (f" (named: {len(info['class_names'])})"
                                                     if info.get("class_names") else ""))
    lines.append("payload kinds: " + ", ".join(f"{kind} {count}" for kind, count in sorted(info["kinds"].items())))
    if info.get("problems"):
        lines.append(f"records that are no sound image: {info['problems']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    fmt = foreign_format(args.rec)
    if fmt is not None:
        described = describe_set(args.rec, fmt)
        print(json.dumps(described, indent=2) if args.json else describe_text(described))
        return EXIT_OK
    info = dataset_info(args.rec, args.idx, key_type(args))
    print(json.dumps(info.to_dict(), indent=2) if args.json else info.format_text())
    return EXIT_DAMAGED if info.damaged else EXIT_OK
