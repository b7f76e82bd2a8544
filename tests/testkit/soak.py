"""A soak under faults: every kind of work mxrec does with remote data, through the fault proxies, each result
judged ``ok``, ``wrong``, ``hang``, ``unclear`` or ``error`` (issue 22 §5).

:class:`Soak` sets up, once, a small image dataset and its copies: a ``.rec``/``.idx`` on the S3-API server, the
HTTP server and the WebHDFS server, a shard set and a ``.lst`` on S3, and the answers each operation must give,
computed from the local files. :meth:`Soak.run` then arms a :class:`~testkit.proxy.FaultProfile` on every proxy
and runs each operation of :data:`OPERATIONS` (reads on each store, a shard set, ``ImageRecordIter``, fork
``DataLoader`` workers, ``pack``, ``convert``, ``info``, ``verify``), each in a thread of its own with a time
limit, and returns an :class:`Outcome` per operation:

* ``ok``: the exact answer (records, batches, a packed or converted output read back whole);
* ``wrong``: an answer, but not the exact one (silently wrong data);
* ``hang``: no answer within the limit;
* ``error``: a clear error: one :class:`~mxrec.errors.MxrecError`, one line, naming a URL;
* ``unclear``: any other exception (a library's own, a message naming no URL, several lines).

An output (``pack``, ``convert``) that failed must have left nothing under its final names; one found there is
``wrong``. The requests each operation made are those the proxies counted.

``tests/io/test_soak.py`` runs a few seconds of it per profile in CI; ``benchmarks/bench_faults.py`` the longer
soak, printing the table (:func:`table`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import s3fs

import mxrec
from mxrec.datasets.opening import open_dataset
from mxrec.doctor.sets import info as dataset_info
from mxrec.doctor.sets import verify as verify_set
from mxrec.errors import MxrecError
from mxrec.format.lst import ListEntry
from mxrec.io.lists import write_list
from mxrec.io.opener import RecordReader
from mxrec.io.shards import ShardedWriter, ShardLimit
from mxrec.packing.job import pack_list
from mxrec.storage import filesystem
from mxrec.storage.settings import ENV_REQUESTS, RequestPolicy, Storage
from mxrec.train.record_iter import ImageRecordIter
from testkit.datasets import jpeg, photo
from testkit.proxy import PROFILES, FaultProfile, HTTPProxy, S3Proxy, WebHDFSProxy

#: the policy the soak runs under: enough attempts for a transient storm (a move is two requests an attempt),
#: short back-offs, read time-outs well below the profiles' stalls
POLICY = RequestPolicy(attempts=12, backoff=0.005, max_backoff=0.05, connect_timeout=1, read_timeout=0.5,
                       deadline=60)

#: the profiles of the soak, scaled to run in seconds: stalls of 2 s against the read time-out of 0.5 s
SOAK_PROFILES: dict[str, FaultProfile] = {
    "latency": PROFILES["latency"].replace(latency=0.01),
    "storm_5xx": PROFILES["storm_5xx"],
    "resets": PROFILES["resets"],
    "truncations": PROFILES["truncations"],
    "cut_heads": PROFILES["cut_heads"],
    "stalls": PROFILES["stalls"],
    "transient_mix": PROFILES["transient_mix"].replace(stall_seconds=2.0),
}
#: the profile under which every operation must give the exact answer, not even a clear error
TRANSIENT = "transient_mix"

VERDICTS = ("ok", "error", "wrong", "hang", "unclear")
COUNT = 24
SIZE = 24  # pixels a side of the soak's images


class WrongData(Exception):
    """An operation answered, but not what the local files say."""


@dataclass
class Outcome:
    """One operation under one profile: its ``verdict`` (one of :data:`VERDICTS`), the requests the proxies
    counted, the seconds it took, and the error's text (``detail``) when it raised."""

    profile: str
    operation: str
    verdict: str
    requests: int
    seconds: float
    detail: str = ""


@dataclass
class Soak:
    """The soak's data on the three servers behind their proxies (see the module docstring).

    Parameters
    ----------
    folder
        A local folder for the soak's files.
    s3, http, webhdfs
        The proxies (their ``server`` attributes the servers behind them).
    bucket
        The S3 bucket to use.
    policy
        The request policy of every operation.
    """

    folder: Path
    s3: S3Proxy
    http: HTTPProxy
    webhdfs: WebHDFSProxy
    bucket: str
    policy: RequestPolicy = POLICY
    expected: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.folder = Path(self.folder)
        self.storage = Storage(options=self.s3.storage_options(), policy=self.policy)
        self.direct = Storage(options=self.s3.server.storage_options(), policy=self.policy)  # no proxy: checks
        self._prepare()

    # -- the data and the answers

    def _prepare(self) -> None:
        folder = self.folder
        root = folder / "root"
        root.mkdir(parents=True)
        for i in range(COUNT):
            (root / f"{i}.jpg").write_bytes(jpeg(photo(i, SIZE + 8, SIZE + 4)))
        entries = [ListEntry(i, (float(i % 4),), f"{i}.jpg") for i in range(COUNT)]
        write_list(folder / "set.lst", entries)
        rec = folder / "set.rec"
        pack_list(folder / "set.lst", root, rec)
        local = RecordReader(rec)
        payloads = local.read_batch(range(len(local)))
        self.root = root
        self.expected = {"payloads": payloads, "batches": _batches(str(rec), None), "records": len(payloads)}
        server = self.s3.server
        for name in ("set.rec", "set.idx", "set.checksums", "set.lst"):
            server.put_object(self.bucket, name, (folder / name).read_bytes())
        shards = folder / "shards"
        shards.mkdir()
        with ShardedWriter(shards / "parts.rec", ShardLimit(records=8)) as writer:
            for i, payload in enumerate(payloads):
                writer.write(payload, key=i)
        for path in shards.iterdir():
            server.put_object(self.bucket, path.name, path.read_bytes())
        self.http.server.put("set.rec", rec.read_bytes())
        self.http.server.put("set.idx", rec.with_suffix(".idx").read_bytes())
        hdfs = self.webhdfs.server.local_path("/soak")
        hdfs.mkdir(parents=True, exist_ok=True)
        for name in ("set.rec", "set.idx"):
            (hdfs / name).write_bytes((folder / name).read_bytes())
        self.urls = {"s3": f"s3://{self.bucket}/set.rec", "http": self.http.url_for("set.rec"),
                     "webhdfs": f"webhdfs://127.0.0.1:{self.webhdfs.port}/soak/set.rec"}
        self.storages = {"s3": self.storage, "http": Storage(policy=self.policy),
                         "webhdfs": Storage(options={"user": self.webhdfs.server.user}, policy=self.policy)}

    # -- running

    @property
    def proxies(self) -> tuple[Any, ...]:
        return (self.s3, self.http, self.webhdfs)

    def requests(self) -> int:
        return len(self.s3.log) + len(self.http.log) + len(self.webhdfs.log)

    def run(self, name: str, profile: FaultProfile, *, seed: int = 0, limit: float = 60.0,
            operations: dict[str, Callable[[Soak], None]] | None = None) -> list[Outcome]:
        """Every operation (default :data:`OPERATIONS`) under ``profile`` on every proxy; an :class:`Outcome` each.

        ``limit``: seconds an operation may take before it counts as a hang.
        """
        outcomes = []
        with self._environment():
            for number, (operation, work) in enumerate((operations or OPERATIONS).items()):
                for proxy in self.proxies:
                    proxy.use_profile(profile, seed=seed * 1000 + number)
                try:
                    before = self.requests()
                    verdict, seconds, detail = _judged(lambda work=work: work(self), limit)
                    outcomes.append(Outcome(name, operation, verdict, self.requests() - before, seconds, detail))
                finally:
                    for proxy in self.proxies:
                        proxy.clear_profile()
        return outcomes

    @contextlib.contextmanager
    def _environment(self) -> Iterator[None]:
        """What a command gets from the environment: the policy, and S3 through the proxy (``pack`` takes no
        storage settings); the file systems made before (mxrec's and s3fs's) are dropped, so that none points
        elsewhere."""
        values = {**self.s3.server.env(), "AWS_ENDPOINT_URL": self.s3.url, "AWS_ENDPOINT_URL_S3": self.s3.url,
                  ENV_REQUESTS: self.policy.describe()}
        before = {name: os.environ.get(name) for name in values}
        os.environ.update(values)
        filesystem._filesystems.clear()
        s3fs.S3FileSystem.clear_instance_cache()  # (s3fs keeps one per options: the endpoint from before)
        try:
            yield
        finally:
            filesystem._filesystems.clear()
            s3fs.S3FileSystem.clear_instance_cache()
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def fresh(self, name: str) -> str:
        """A new S3 URL for an output: ``s3://BUCKET/out-UNIQUE/name``."""
        return f"s3://{self.bucket}/out-{uuid.uuid4().hex[:8]}/{name}"

    def left_under(self, url: str) -> list[str]:
        """The objects under the folder of ``url`` (read past the proxy), hidden staging ones left out."""
        prefix = url.removeprefix(f"s3://{self.bucket}/").rsplit("/", 1)[0] + "/"
        return [k for k in self.s3.server.list_keys(self.bucket, prefix) if "/." not in k]


def _judged(work: Callable[[], None], limit: float) -> tuple[str, float, str]:
    """``work()`` in a thread of its own: its verdict, the seconds it took, and what it raised."""
    result: list[tuple[str, str]] = []
    done = threading.Event()

    def run() -> None:
        try:
            work()
            result.append(("ok", ""))
        except WrongData as exc:
            result.append(("wrong", str(exc)))
        except MxrecError as exc:
            text = str(exc)
            clear = "://" in text and "\n" not in text
            result.append(("error" if clear else "unclear", text))
        except Exception as exc:  # the verdict: whatever else escaped is an unclear error
            result.append(("unclear", "".join(traceback.format_exception_only(type(exc), exc)).strip()))
        finally:
            done.set()

    began = time.monotonic()
    threading.Thread(target=run, name="soak-operation", daemon=True).start()
    if not done.wait(limit):
        return "hang", time.monotonic() - began, f"no answer in {limit:g} s"
    verdict, detail = result[0]
    return verdict, time.monotonic() - began, detail


def _check(what: str, got: object, expected: object) -> None:
    if got != expected:
        raise WrongData(f"{what}: not the expected answer")


def _batches(url: str, storage: Storage | None, processes: int = 0) -> list[tuple[bytes, tuple[float, ...]]]:
    """Two epochs of a block-shuffled ``ImageRecordIter`` (built in ``processes`` worker processes, which share
    their downloads): each batch's pixels and labels."""
    out = []
    with ImageRecordIter(path_imgrec=url, data_shape=(3, SIZE, SIZE), batch_size=8, shuffle=True, seed=5,
                         shuffle_block=4, storage_options=storage, preprocess_processes=processes,
                         preprocess_start_method="fork" if processes else None) as it:
        for _ in range(2):
            for batch in it:
                out.append((np.asarray(batch.data[0]).tobytes(), tuple(np.asarray(batch.label[0]).ravel())))
    return out


# -- the operations


def _read(store: str) -> Callable[[Soak], None]:
    def read(soak: Soak) -> None:
        reader = RecordReader(soak.urls[store], storage_options=soak.storages[store])
        positions = [5, 0, 17, 3, 23, 11, 12, 13]
        _check(f"read_batch on {store}", reader.read_batch(positions), [soak.expected["payloads"][p]
                                                                       for p in positions])
        _check(f"iterating {store}", list(reader), soak.expected["payloads"])

    return read


def shard_set(soak: Soak) -> None:
    for spec in (f"s3://{soak.bucket}/parts.manifest.json", f"s3://{soak.bucket}/parts_*.rec"):
        dataset = open_dataset(spec, storage=soak.storage)
        _check(f"the shard set {spec}", dataset.read_batch(range(len(dataset))), soak.expected["payloads"])


def iterator(soak: Soak) -> None:
    _check("ImageRecordIter's batches", _batches(soak.urls["s3"], soak.storage), soak.expected["batches"])


def fork_workers(soak: Soak) -> None:
    from torch.utils.data import DataLoader

    from mxrec.torch import RecordDataset

    records = RecordDataset(soak.urls["s3"], storage_options=soak.storage)
    loader = DataLoader(records, batch_size=5, num_workers=2, multiprocessing_context="fork", collate_fn=list,
                        timeout=60)
    _check("fork DataLoader workers", [p for batch in loader for p in batch], soak.expected["payloads"])


def worker_processes(soak: Soak) -> None:
    _check("ImageRecordIter's batches from 2 worker processes", _batches(soak.urls["s3"], soak.storage, 2),
           soak.expected["batches"])


def shared_workers(soak: Soak) -> None:
    """Fork workers reading ahead along one block-shuffled order, sharing their downloads."""
    from torch.utils.data import DataLoader

    from mxrec.torch import DistributedBatchSampler, RecordDataset

    records = RecordDataset(soak.urls["s3"], storage_options=soak.storage)
    sampler = DistributedBatchSampler(records, 5, shuffle=True, seed=3, shuffle_block=4, shuffle_window=2, rank=0,
                                      world_size=1)
    expected = [soak.expected["payloads"][p] for batch in sampler for p in batch]
    loader = DataLoader(records, batch_sampler=sampler, num_workers=2, multiprocessing_context="fork",
                        collate_fn=list, timeout=60)
    _check("fork workers sharing their downloads", [p for batch in loader for p in batch], expected)


def _read_back(soak: Soak, spec: str) -> list[bytes]:
    dataset = open_dataset(spec, storage=soak.direct)
    return dataset.read_batch(range(len(dataset)))


@contextlib.contextmanager
def _whole_or_absent(soak: Soak, url: str) -> Iterator[None]:
    """A failed output leaves nothing under its names, or only what its error names (a cleanup that failed too)
    and no reader takes for a whole output: the output itself, or the folder's shards by a glob, are refused."""
    try:
        yield
    except BaseException as exc:
        left = soak.left_under(url)
        if not left:
            raise
        said = "\n".join([str(exc), *getattr(exc, "__notes__", ())])
        unnamed = [key for key in left if key not in said]
        if unnamed:
            raise WrongData(f"a failed output left {unnamed} under final names, which its error does not name "
                            f"({said!r})") from None
        folder = url.rsplit("/", 1)[0]
        specs = [url] + ([f"{folder}/*.rec"] if any(key.endswith(".rec") for key in left) else [])
        for spec in specs:
            try:
                open_dataset(spec, storage=soak.direct)
            except MxrecError:
                continue
            raise WrongData(f"a failed output left {left}, and {spec} opens as a whole dataset") from None
        raise


def pack(soak: Soak) -> None:
    url = soak.fresh("packed.rec")
    with _whole_or_absent(soak, url):
        pack_list(f"s3://{soak.bucket}/set.lst", soak.root, url)
    _check("pack's output", _read_back(soak, url), soak.expected["payloads"])


def convert(soak: Soak) -> None:
    url = soak.fresh("converted.rec")
    with _whole_or_absent(soak, url):
        result = mxrec.convert(soak.urls["s3"], url, shard_size=10, storage_options=soak.storage)
    _check("convert's output", _read_back(soak, result.manifest or url), soak.expected["payloads"])


def info(soak: Soak) -> None:
    found = dataset_info(soak.urls["s3"], storage_options=soak.storage)
    _check("info's record count", (found.records, found.damaged), (soak.expected["records"], False))


def verify(soak: Soak) -> None:
    report = verify_set(soak.urls["s3"], storage_options=soak.storage)
    _check("verify's verdict", report.ok, True)


OPERATIONS: dict[str, Callable[[Soak], None]] = {
    "read s3": _read("s3"), "read http": _read("http"), "read webhdfs": _read("webhdfs"), "shard set": shard_set,
    "ImageRecordIter": iterator, "worker processes": worker_processes, "fork workers": fork_workers,
    "shared workers": shared_workers, "pack": pack, "convert": convert, "info": info, "verify": verify,
}


def table(outcomes: list[Outcome]) -> str:
    """Profile x operation: the verdicts, requests and seconds, one line each, then the totals per verdict."""
    lines = [f"{'profile':<14} {'operation':<16} {'verdict':<8} {'requests':>8} {'seconds':>8}  detail"]
    for o in outcomes:
        lines.append(f"{o.profile:<14} {o.operation:<16} {o.verdict:<8} {o.requests:>8} {o.seconds:>8.2f}  "
                     f"{o.detail[:90]}")
    totals = {v: sum(o.verdict == v for o in outcomes) for v in VERDICTS}
    lines.append("totals: " + ", ".join(f"{v} {n}" for v, n in totals.items()))
    return "\n".join(lines)
