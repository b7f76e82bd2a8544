"""mxrec probe DATASET [name=value ...]: run your loader configuration briefly, check its batches, find the bound.

The parameters are ImageRecordIter's own names and values (data_shape=3,224,224 batch_size=128 shuffle=1
rand_crop=1 mean_r=123.68 ...), or --config FILE (a JSON object of them; name=value overrides it). DATASET is
a .rec file or URL, a shard set, or a mixture file NAME.mix.json.

It runs the iterator for --batches N or --seconds S (default: 50 batches or 20 s, whichever first), after
--warmup batches that are not measured, and reports: the checks of the batches (dtype, value range after
normalisation, shapes, labels against the dataset's (its identities, or a spread sample of its headers),
memory), throughput, where each sample's time goes
(fetch, decode, augment, write; the consumer's wait), the machine (CPU per core, the data's disk, memory),
the stored image sizes, the bound and what to change. --step-time MS simulates a training step per batch.
--sweep name=v1,v2 runs every variant and marks the fastest. --records reads records only (storage speed).

Exit 0 when no check fails (a bound or a recommendation never fails), 1 when one does (warnings too with
--strict), 2 on bad usage or unreadable input. --json prints everything with the verdict codes; --html FILE
writes a self-contained page.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from mxrec.cli.options import positive_int
from mxrec.doctor.html import write_page
from mxrec.errors import ParameterError
from mxrec.probing import probe
from mxrec.probing.html import probe_page

HELP = "run a loader configuration briefly: check its batches, find the bound, recommend; exit 1 on a fault"


def parse_value(text: str) -> Any:
    """A parameter value as ImageRecordIter takes it: ``3,224,224`` a tuple, numbers, true/false, else text."""
    if "," in text:
        return tuple(parse_value(part) for part in text.split(",") if part)
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def name_value(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not name=value")
    return name, value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", help="a .rec file or URL, a shard set (quoted glob, brace range, manifest) or a "
                                        "mixture file NAME.mix.json")
    p.add_argument("params", nargs="*", type=name_value, metavar="name=value",
                   help="ImageRecordIter parameters (data_shape=3,224,224 batch_size=128 ...)")
    p.add_argument("--config", metavar="FILE", help="a JSON object of ImageRecordIter parameters")
    p.add_argument("--batches", type=positive_int, help="measure this many batches (default 50, or --seconds)")
    p.add_argument("--seconds", type=float, help="measure for this long (default 20, or --batches)")
    p.add_argument("--warmup", type=int, default=2, help="batches run before measuring (default 2)")
    p.add_argument("--step-time", type=float, default=0.0, metavar="MS",
                   help="simulate a training step of MS milliseconds consuming each batch")
    p.add_argument("--records", action="store_true", help="a bare record read: storage speed only")
    p.add_argument("--num-classes", type=int, help="labels must be below this")
    p.add_argument("--sweep", action="append", type=name_value, default=[], metavar="name=v1,v2",
                   help="run each value (every combination of several --sweep) and tabulate img/s")
    p.add_argument("--strict", action="store_true", help="warnings fail too (exit 1)")
    p.add_argument("--json", action="store_true", help="print JSON (verdict codes, every measurement)")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML report to FILE")
    p.add_argument("--max-problems", type=int, default=10, help="problems listed per check in text output")


def _params(args: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            try:
                loaded = json.load(f)
            except json.JSONDecodeError as exc:
                raise ParameterError(f"{args.config}: not JSON ({exc})") from None
        if not isinstance(loaded, dict):
            raise ParameterError(f"{args.config}: must hold a JSON object of parameters")
        params.update(loaded)
    params.update({name: parse_value(value) for name, value in args.params})
    if "data_shape" in params and isinstance(params["data_shape"], list):
        params["data_shape"] = tuple(params["data_shape"])
    return params


def run(args: argparse.Namespace) -> int:
    if args.warmup < 0 or args.step_time < 0 or (args.seconds is not None and args.seconds <= 0):
        raise ParameterError("--warmup and --step-time must be >= 0, --seconds > 0")
    sweep = {}
    for name, values in args.sweep:
        parsed = [parse_value(v) for v in values.split(",") if v]
        if not parsed:
            raise ParameterError(f"--sweep {name}= has no values")
        sweep[name] = parsed
    result = probe(args.dataset, batches=args.batches, seconds=args.seconds, warmup=args.warmup,
                   step_time=args.step_time / 1000, records=args.records, num_classes=args.num_classes,
                   sweep=sweep or None, **_params(args))
    if args.html:
        write_page(args.html, probe_page(result))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        print(result.format_text(args.max_problems))
    passed = result.report.clean if args.strict else result.report.ok
    return 0 if passed else 1
