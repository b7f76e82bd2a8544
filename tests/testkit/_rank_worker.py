"""One rank of :func:`testkit.ranks.launch_ranks`: ``python -m testkit._rank_worker SPEC_JSON RANK``.

Joins the process group through the spec's ``file://`` rendezvous, runs the target, leaves the group, and writes
``{"result": ...}`` to ``rank<R>.json`` atomically, so the launcher never reads half a file. Any exception exits
non-zero with its traceback on stderr, which the launcher reports.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import json
import os
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _load(target: str) -> tuple[Callable[..., Any] | None, str | None]:
    """``(function, None)`` for a ``module:function`` or ``file.py:function`` target, ``(None, path)`` for a script."""
    if ":" not in target:
        return None, target
    where, name = target.rsplit(":", 1)
    if where.endswith(".py") or os.sep in where:
        spec = importlib.util.spec_from_file_location(f"_testkit_rank_target_{Path(where).stem}", where)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {where}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    return getattr(module, name), None


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    rank = int(argv[2])
    world_size = int(spec["world_size"])
    function, script = _load(spec["target"])
    dist = None
    if spec["init"]:
        import torch.distributed as dist

        dist.init_process_group(backend=spec["backend"], init_method=spec["init_method"], rank=rank,
                                world_size=world_size, timeout=datetime.timedelta(seconds=float(spec["timeout"])))
    try:
        if function is not None:
            result = function(rank=rank, world_size=world_size, **spec["kwargs"])
        else:
            sys.argv = [str(script)]
            result = runpy.run_path(str(script), run_name="__main__").get("RESULT")
    finally:
        if dist is not None and dist.is_initialized():
            dist.destroy_process_group()
    out = Path(spec["results"]) / f"rank{rank}.json"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"result": result}))
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
