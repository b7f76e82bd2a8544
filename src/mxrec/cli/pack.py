"""mxrec pack PREFIX ROOT: pack every PREFIX*.lst into a .rec and .idx beside it (im2rec's pack mode, faster).

Image paths in the .lst are relative to ROOT. Records come out in .lst order
whatever the number of workers; an image that cannot be read or decoded is
skipped and reported, and the exit code is then 1. Output is written under
NAME.rec.partial and renamed into place when complete; Ctrl-C or SIGTERM
removes it. Packing nothing at all (an empty .lst, a wrong ROOT) is an error
that names the first missing file.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from mxrec.cli import EXIT_DAMAGED, EXIT_OK
from mxrec.cli.options import add_engine, add_no_progress, add_prefix_root, add_workers, check_engine, checked
from mxrec.cli.progress import Progress
from mxrec.io.shards import parse_shard_size
from mxrec.packing.job import PackResult, find_prefix_lists, pack_list
from mxrec.packing.prepare import COLOR_MODES, ENCODINGS, ImageTransform
from mxrec.storage.filesystem import shown

HELP = "pack .lst image lists into .rec/.idx (im2rec pack mode)"


def add_transform_arguments(parser: argparse.ArgumentParser) -> None:
    """The image options of im2rec's pack mode (shared with ``mxrec im2rec``)."""
    parser.add_argument("--pass-through", action="store_true", help="store the image files' bytes unchanged")
    parser.add_argument("--resize", type=int, default=0, help="resize the shorter side to this many pixels")
    parser.add_argument("--center-crop", action="store_true", help="crop the central square first")
    parser.add_argument("--quality", type=int, default=None,
                        help="JPEG quality 1-100 (default 95), or PNG compression level 0-9 (default 9)")
    parser.add_argument("--color", type=int, default=1, choices=COLOR_MODES,
                        help="1: colour (BGR), 0: greyscale, -1: as stored, alpha included (default: 1)")
    parser.add_argument("--encoding", default=".jpg", choices=ENCODINGS, help="format to encode images in")
    parser.add_argument("--pack-label", action="store_true",
                        help="store all labels of multi-label .lst lines as a label array")


def transform_from_args(args: argparse.Namespace) -> ImageTransform:
    return ImageTransform(resize=args.resize, center_crop=args.center_crop, color=args.color,
                          encoding=args.encoding, quality=args.quality, pass_through=args.pass_through,
                          fast=getattr(args, "fast", False))


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_prefix_root(p, "every .lst whose path starts with PREFIX is packed into a .rec beside it",
                    "the folder the .lst paths are relative to")
    add_transform_arguments(p)
    add_workers(p, "worker threads", default_text=f"the number of CPUs, {os.cpu_count() or 1}", im2rec_name=True)
    p.add_argument("--fast", "--reduced-decode", action="store_true", dest="fast",
                   help="decode JPEGs with libjpeg-turbo's fast IDCT and upsampling, and at 1/2, 1/4 or 1/8 "
                        "scale when at least twice the --resize target: faster, but pixels differ slightly "
                        "from im2rec's (off by default)")
    p.add_argument("--strict", action="store_true",
                   help="stop with an error (and no output) on any image that is skipped or is no image")
    p.add_argument("--shard-size", type=checked(parse_shard_size), metavar="N|SIZE",
                   help="split the output into NAME_00000.rec/.idx, ... of N records or SIZE bytes (512MB, 2GiB)")
    add_engine(p, "pack (ray: a shard set with a manifest, records identical to a local pack)")
    add_no_progress(p)


def report(results: list[PackResult]) -> int:
    """Print what each job wrote, every image it skipped or kept with a warning; the exit code."""
    code = EXIT_OK
    for result in results:
        names = ", ".join(shown(rec) for rec, _ in result.outputs)
        if result.manifest is not None:
            names += f" (manifest {shown(result.manifest)})"
        extra = f", {len(result.not_images)} not images" if result.not_images else ""
        print(f"{shown(result.lst_path)} -> {names}: {result.records} records, "
              f"{len(result.skipped)} skipped{extra}")
        for note in result.skipped:
            print(f"  skipped index {note.index}: {note.reason}", file=sys.stderr)
        for note in result.not_images:
            print(f"  stored index {note.index} unchanged: {note.reason}", file=sys.stderr)
        hint = result.root_hint()
        if hint is not None:
            print(f"  {hint}", file=sys.stderr)
        if result.skipped or result.not_images:
            code = EXIT_DAMAGED
    return code


def pack_with_progress(prefix: str, root: str, transform: ImageTransform, *, show: bool = True,
                       pack: Callable[..., PackResult] = pack_list, **options: object) -> list[PackResult]:
    """:func:`mxrec.packing.job.pack_prefix` (or with ``pack``, another engine's ``pack_list``), with a progress
    display per ``.lst`` and each skipped image on stderr."""
    results = []
    for lst in find_prefix_lists(prefix):
        label = os.path.basename(os.path.splitext(lst)[0]) + ".rec: "
        with Progress(label=label, enabled=show) as bar:
            on_skip = (lambda s, bar=bar: bar.message(f"skipped index {s.index}: {s.reason}")) if show else None
            results.append(pack(lst, root, None, transform, progress=bar, on_skip=on_skip, **options))
    return results


def run(args: argparse.Namespace) -> int:
    check_engine(args)
    options = {"pack_label": args.pack_label, "strict": args.strict, "shard_limit": args.shard_size}
    transform = transform_from_args(args)
    if args.engine == "ray":
        from mxrec.ray.pack import pack_list_ray  # imported here: everything else works without Ray
        from mxrec.ray.session import ray_session

        with ray_session(args.address):
            return report(pack_with_progress(args.prefix, args.root, transform, show=args.progress,
                                             pack=pack_list_ray, **options))
    return report(pack_with_progress(args.prefix, args.root, transform, show=args.progress,
                                     workers=args.workers or os.cpu_count() or 1, **options))
