"""mxrec convert SRC DST: a dataset from RecordIO to WebDataset, Parquet (Hugging Face), TFRecord or ArrayRecord,
and back (every format of the registry, :mod:`mxrec.interop.formats`).

Formats are taken from the names (a .rec is RecordIO; a registered format's
files, folders of them or their NAME.convert.json are that format; a folder of
images is an image folder), or from --from/--to. A foreign output is a folder
(at least 16 shards NAME_00000.tar ... named after the source by default, and
.mxrec/NAME.convert.json, written last) or FOLDER/NAME.tar (that one file).

Records are carried exactly: image bytes untouched (unless --resize or
--quality), keys, IRHeader id/id2/flag and scalar or array labels; a .rec
converted to any format and back gives the same .rec and .idx bytes.
InsightFace sets keep their header and identity records (--insightface all,
the default) or give only their faces (--insightface faces). Records whose
payload is no image, or a broken one, are carried and listed; the exit code
is 1 when an image is broken. The output appears whole or not at all: an
error, Ctrl-C or SIGTERM leaves nothing that looks finished.
"""

from __future__ import annotations

import argparse
import sys

from mxrec.cli import EXIT_DAMAGED, EXIT_OK
from mxrec.cli.options import add_engine, add_no_progress, add_workers, check_engine, checked
from mxrec.cli.progress import Progress
from mxrec.interop import convert
from mxrec.interop.formats import format_names, formats
from mxrec.interop.job import DEFAULT_SHARDS, INSIGHTFACE_MODES
from mxrec.io.lists import read_label_names
from mxrec.io.shards import parse_shard_size
from mxrec.packing.prepare import ImageTransform
from mxrec.storage.filesystem import shown

HELP = "convert between RecordIO and " + ", ".join(f.title for f in formats()) + ", exactly"
SHOWN_PROBLEMS = 20


def add_arguments(p: argparse.ArgumentParser) -> None:
    suffixes = ", ".join(f.suffix for f in formats())
    known = "; ".join(f"{f.name}: {f.title}, {'/'.join(f.suffixes)} (mxrec[{f.extra}])" for f in formats())
    p.description = f"Formats: recordio (.rec); {known}; folder (a folder of images)."
    p.add_argument("src", help=f"the dataset to convert: a .rec or shard set, a {suffixes} file, folder, "
                              "glob or NAME.convert.json, local or a URL")
    p.add_argument("dst", help=f"where to write: a .rec, or a folder (or FOLDER/NAME with one of {suffixes}: "
                              "that one file)")
    p.add_argument("--from", dest="source_format", choices=format_names(),
                   help="the format of SRC (default: from its name)")
    p.add_argument("--to", dest="target_format", choices=format_names(),
                   help="the format of DST (default: from its name)")
    p.add_argument("--shard-size", type=checked(parse_shard_size), metavar="N|SIZE",
                   help=f"records (10000) or bytes (512MB, 1GiB) per output shard (a folder: {DEFAULT_SHARDS} shards "
                        "of at most 1GiB by default; a .rec or FOLDER/NAME.tar is one file unless given)")
    add_workers(p, "worker processes", default=1, default_text="1")
    add_engine(p, "convert (ray: each Ray task converts a range of the .idx)")
    p.add_argument("--insightface", choices=INSIGHTFACE_MODES, default="all",
                   help="an InsightFace set: all records, header and identity records included (all, the default: "
                        "converts back byte for byte), or only the faces with their identity labels (faces)")
    p.add_argument("--labels", metavar="FILE", help="a .labels file naming the classes (default: NAME.labels beside "
                                                    "NAME.rec, or the names a converted set keeps)")
    p.add_argument("--resize", type=int, default=0, help="re-encode images, shorter side resized to this many pixels "
                                                         "(default: bytes carried untouched)")
    p.add_argument("--quality", type=int, default=None, help="re-encode images as JPEG of this quality 1-100")
    add_no_progress(p)


def run(args: argparse.Namespace) -> int:
    check_engine(args)
    transform = None
    if args.resize or args.quality is not None:
        transform = ImageTransform(resize=args.resize, quality=args.quality)
    names = read_label_names(args.labels) if args.labels else None
    with Progress(label="convert ", unit="rec", enabled=args.progress) as bar:
        result = convert(args.src, args.dst, source_format=args.source_format, target_format=args.target_format,
                         shard_size=args.shard_size, workers=args.workers, engine=args.engine, address=args.address,
                         insightface=args.insightface, class_names=names, transform=transform, progress=bar)
    report = result.report
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    for key, reason in report.problems[:SHOWN_PROBLEMS]:
        print(f"record {key}: {reason} (carried as it is)", file=sys.stderr)
    if report.problem_count > SHOWN_PROBLEMS:
        print(f"... and {report.problem_count - SHOWN_PROBLEMS} more records that are no sound image",
              file=sys.stderr)
    kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(report.kinds.items()))
    where = shown(result.manifest) if result.manifest else ", ".join(shown(f) for f in result.files[:2])
    print(f"converted {report.records} records {result.source_format} -> {result.target_format} into "
          f"{len(result.files)} file(s), {where}" + (f" ({kinds})" if kinds else ""))
    return EXIT_DAMAGED if report.broken else EXIT_OK
