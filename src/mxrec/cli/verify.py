"""``mxrec verify FILE.rec``: check framing and index consistency; exit 1 on any fault."""

from __future__ import annotations

import argparse
import json

from mxrec.verify import verify_recordio


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("verify", help="check a .rec (and its .idx); exit 1 on any fault",
                              description=__doc__)
    p.add_argument("rec", help="the .rec file")
    p.add_argument("--idx", help="the .idx file (default: beside the .rec, if present)")
    p.add_argument("--json", action="store_true", help="print JSON (every problem listed)")
    p.add_argument("--max-problems", type=int, default=10, help="problems listed per check in text output")
    p.set_defaults(run=run, command="verify")


def run(args: argparse.Namespace) -> int:
    report = verify_recordio(args.rec, args.idx)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format_text(args.max_problems))
    return 0 if report.ok else 1
