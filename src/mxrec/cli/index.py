"""mxrec index FILE.rec: rebuild the .idx of a .rec by scanning it, and write its checksums.

The keys are the records' IRHeader ids when every record has a header and
the ids are unique (as im2rec and InsightFace write them), else positions
0, 1, ... in file order; --key-source chooses. The .idx is written
atomically beside the .rec, or to -o PATH; the checksums
(NAME.checksums, which readers check as they read) beside the .rec, from the
same pass. --checksums-only adds the checksums to an existing file (MXNet's)
and leaves its .idx alone; given a shard set's manifest, it adds every shard's
checksums beside each shard and says so in the manifest.
"""

from __future__ import annotations

import argparse

from mxrec.format.checksums import checksums_path
from mxrec.format.idx import index_path_for
from mxrec.format.manifest import MANIFEST_SUFFIX
from mxrec.io.checksummed import write_checksums
from mxrec.io.index import KEY_SOURCES, build_index
from mxrec.io.shards import add_manifest_checksums

HELP = "rebuild the .idx of a .rec by scanning it (and write its checksums)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rec", help="the .rec file or URL (or, with --checksums-only, a shard set's manifest)")
    p.add_argument("-o", "--output", help="the .idx to write, a path or URL (default: beside the .rec)")
    p.add_argument("--key-source", choices=KEY_SOURCES, default="auto",
                   help="position: 0..n-1 in file order; id: each record's IRHeader id (as im2rec); "
                        "auto (default): ids when every record has a header and they are unique")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--checksums-only", action="store_true",
                       help="only write the checksums (NAME.checksums; for a manifest: beside each shard), "
                            "keep the .idx")
    which.add_argument("--no-checksums", action="store_true", help="only write the .idx")
    # The old name, kept working but not shown: --keys elsewhere lists keys (mxrec preview --keys 3,7).
    p.add_argument("--keys", dest="key_source", choices=KEY_SOURCES, default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.checksums_only:
        if args.rec.endswith(MANIFEST_SUFFIX):
            manifest = add_manifest_checksums(args.rec)
            print(f"wrote the checksums of {len(manifest.shards)} shard(s) beside them, and {args.rec}")
            return 0
        sums = write_checksums(args.rec)
        print(f"wrote {checksums_path(args.rec)}: {sums.describe()}")
        return 0
    output = args.output or index_path_for(args.rec)
    index, source = build_index(args.rec, output, args.key_source, checksums=not args.no_checksums)
    sums = "" if args.no_checksums else f"; and {checksums_path(args.rec)}"
    print(f"wrote {output}: {len(index)} entries, keyed by record {source}{sums}")
    return 0
