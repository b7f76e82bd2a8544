"""mxrec verify DATASET: check a dataset the way a practitioner would; exit 1 on any fault.

DATASET is a .rec file or URL, or a shard set (each shard checked, then the
totals and the manifest), or a mixture file NAME.mix.json (each source
checked). Checks the RecordIO framing and the .idx; for image
datasets the labels, class balance (a warning), images (every one decoded with
--decode, on all cores), image shapes and duplicate images; for an InsightFace
face set its layout (header record, identity ranges, face labels). With --lst
it also checks the image list the .rec was packed from, with --against another
dataset for shared images (train/val leakage).

--html FILE also writes a self-contained page: the checks, thumbnails of the
records each failed check names, samples of each class (class names from
--labels FILE, or NAME.labels beside NAME.rec), the class histogram and every
image's size.

--repair OUT writes a clean copy of every intact record plus a fresh .idx to
OUT and reports what was dropped; the input is never changed.

A WebDataset, Parquet or TFRecord set (mxrec convert's or another tool's)
is read whole: tar checksums and TFRecord CRCs, each payload's image headers,
and the record count against its manifest.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from mxrec.cli.info import describe_text
from mxrec.cli.options import (
    add_dataset,
    add_engine,
    add_label_names,
    add_no_progress,
    add_workers,
    check_engine,
    key_type,
    label_names,
)
from mxrec.cli.progress import Progress
from mxrec.datasets.opening import is_mixture
from mxrec.doctor.check_labels import LABEL_KINDS
from mxrec.doctor.contents import available_cores
from mxrec.doctor.html import write_page
from mxrec.doctor.repair import repair_dataset
from mxrec.doctor.sets import verify as verify_dataset
from mxrec.doctor.verify_dataset import DATASET_KINDS
from mxrec.doctor.verify_page import verify_page
from mxrec.errors import ParameterError
from mxrec.format.insightface import LAYOUTS
from mxrec.interop import describe_set
from mxrec.interop.sets import foreign_format

HELP = "check a dataset (.rec, .idx, labels, images, .lst; or a WebDataset/Parquet/TFRecord set); exit 1 on a fault"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset(p)
    p.add_argument("--lst", help="the .lst image list the .rec was packed from")
    p.add_argument("--root", help="folder the .lst image paths are relative to (default: the .lst's folder)")
    p.add_argument("--against", metavar="OTHER", help="another .rec (e.g. the validation set): report shared images")
    p.add_argument("--decode", action="store_true", help="decode every image (parallel, on all cores)")
    add_workers(p, "threads for reading and decoding", default_text=f"all {available_cores()} cores")
    p.add_argument("--kind", choices=DATASET_KINDS, default="auto",
                   help="'image' always runs the label/image checks, 'raw' never (default: decide from the records)")
    p.add_argument("--layout", choices=LAYOUTS, default="auto",
                   help="'insightface': a face set (header record under key 0, identity records); 'plain': "
                        "every record a sample (default: insightface when key 0 holds such a header)")
    p.add_argument("--label-kind", choices=LABEL_KINDS, default="auto",
                   help="'class': labels are class ids; 'value': real values (default: decide from the labels)")
    p.add_argument("--num-classes", type=int, help="class ids must be below this")
    p.add_argument("--min-class-samples", type=int, default=5, help="warn about classes with fewer records")
    p.add_argument("--max-imbalance", type=float, default=10.0,
                   help="warn when the largest class has more than this many times the records of the smallest")
    p.add_argument("--repair", metavar="OUT", help="write a clean copy of every intact record to OUT (+ .idx)")
    p.add_argument("--strict", action="store_true", help="warnings fail too (exit 1)")
    p.add_argument("--json", action="store_true", help="print JSON (every problem listed)")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page (thumbnails of offending "
                                                  "records, samples of each class, class histogram, image sizes)")
    add_label_names(p)
    p.add_argument("--max-problems", type=int, default=10, help="problems listed per check in text output")
    add_engine(p, "read and decode the records (ray: the per-record checks as Ray tasks; same report)")
    add_no_progress(p)


def run(args: argparse.Namespace) -> int:
    check_engine(args)
    fmt = foreign_format(args.rec)
    if fmt is not None:
        return check_foreign(args, fmt)
    if args.engine == "ray":
        from mxrec.ray.session import ray_session  # imported here: everything else works without Ray
        from mxrec.ray.verify_tasks import verify_dataset_ray

        with ray_session(args.address):  # connected (or told why not) before any work
            return check(args, verify_dataset_ray)
    return check(args, verify_dataset)


def check_foreign(args: argparse.Namespace, fmt: str) -> int:
    """A WebDataset, Parquet or TFRecord set: every record read (framing checksums), every payload's image headers
    looked at, the count compared with the manifest; exit 1 on a broken image or a count that differs."""
    found = describe_set(args.rec, fmt, check=True)
    promised = found["manifest_records"]
    mismatch = promised is not None and promised != found["records"]
    if args.json:
        print(json.dumps(found, indent=2))
    else:
        print(describe_text(found))
        for key, reason in found["problem_list"][:args.max_problems]:
            print(f"  record {key}: {reason}")
        if mismatch:
            print(f"the manifest says {promised} records, the files hold {found['records']}")
    return 1 if found["broken"] or mismatch else 0


def check(args: argparse.Namespace, verify: Callable[..., Any]) -> int:
    """Run the checks with ``verify`` (:func:`mxrec.doctor.sets.verify` or the Ray engine's) and print the report."""
    keys_are = key_type(args)
    if is_mixture(args.rec) and (args.html or args.repair):
        raise ParameterError(f"{args.rec}: --html and --repair take one dataset: give them a source of the mixture "
                             "(its checks are each source's)")
    names = label_names(args) if args.html else None  # a bad --labels fails before the long checks
    # Repair first: a bad OUT is reported before the long checks, and the copy does not depend on them.
    repair = repair_dataset(args.rec, args.repair, args.idx, keys_are) if args.repair else None
    with Progress(label="decoding: " if args.decode else "reading: ", unit="rec",
                  enabled=args.progress) as bar:
        report = verify(
            args.rec, args.idx, keys_are, dataset_kind=args.kind, layout=args.layout, decode=args.decode,
            lst=args.lst, root=args.root, against=args.against, num_classes=args.num_classes,
            label_kind=args.label_kind, min_class_samples=args.min_class_samples, max_imbalance=args.max_imbalance,
            workers=args.workers, progress=bar)
    if args.html:
        write_page(args.html, verify_page(report, args.rec, args.idx, label_names=names))
    if args.json:
        out = report.to_dict()
        if repair is not None:
            out["repair"] = repair.to_dict()
        print(json.dumps(out, indent=2, default=str))  # keys of unusual key types print as text
    else:
        print(report.format_text(args.max_problems))
        if repair is not None:
            print(repair.format_text(args.max_problems))
    passed = report.clean if args.strict else report.ok
    return 0 if passed else 1
