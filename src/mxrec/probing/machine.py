"""The machine while a probe runs: CPU per core, the data's block device, memory, GPU memory -- sampled over time.

Linux's own counters, read the way ``top`` and ``iostat -x`` read them: ``/proc/stat`` (jiffies per core),
``/proc/diskstats`` (sectors read and milliseconds busy of the device holding the data; a partition is
reported as its disk), ``/proc/self/status`` (``VmRSS``, ``VmHWM``). Where a counter is missing (not Linux,
data on tmpfs/overlay with no block device) the figure is ``None``, never a guess. GPU memory is read only
when ``torch`` is already imported and sees a GPU.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field

from mxrec.storage.filesystem import local_or_none

SECTOR = 512


def _cpu_jiffies() -> list[tuple[int, int]] | None:
    """``(busy, total)`` jiffies per core, from ``/proc/stat``."""
    try:
        with open("/proc/stat") as f:
            lines = [line.split() for line in f if line.startswith("cpu") and line[3].isdigit()]
    except OSError:
        return None
    out = []
    for fields in lines:
        values = [int(v) for v in fields[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
        total = sum(values[:8])
        out.append((total - idle, total))
    return out


def physical_cores() -> int:
    """Physical cores this process may run on (hyper-threads counted once), else the logical count."""
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
    cores = set()
    for cpu in allowed:
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            with open(f"{base}/core_id") as f:
                core = f.read().strip()
            with open(f"{base}/physical_package_id") as f:
                package = f.read().strip()
        except OSError:
            return len(allowed)
        cores.add((package, core))
    return len(cores) or len(allowed)


def block_device(path: str) -> str | None:
    """The name of the disk (``sda``, ``nvme0n1``) that holds ``path`` (for a shard pattern, its folder), or
    ``None`` (a URL, tmpfs, overlay)."""
    local = local_or_none(path)
    if local is None:
        return None
    path = local
    try:
        dev = os.stat(path if os.path.exists(path) else os.path.dirname(os.path.abspath(path))).st_dev
    except OSError:
        return None
    major, minor = os.major(dev), os.minor(dev)
    if major == 0:
        return None
    link = f"/sys/dev/block/{major}:{minor}"
    if not os.path.exists(link):
        return None
    real = os.path.realpath(link)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real)


def _disk(device: str | None) -> tuple[int, int] | None:
    """``(bytes read, milliseconds busy)`` of ``device`` from ``/proc/diskstats``."""
    if device is None:
        return None
    try:
        with open("/proc/diskstats") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 12 and fields[2] == device:
                    return int(fields[5]) * SECTOR, int(fields[12])
    except OSError:
        return None
    return None


def _memory() -> tuple[int, int] | None:
    """``(rss, peak rss)`` bytes of this process."""
    found = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    found[line[:5]] = int(line.split()[1]) * 1024
    except OSError:
        return None
    if len(found) != 2:
        return None
    return found["VmRSS"], found["VmHWM"]


def _gpu_memory() -> int | None:
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_available():
            return None
        return int(sum(torch.cuda.memory_allocated(i) for i in range(torch.cuda.device_count())))
    except Exception:  # a broken CUDA setup is not the probe's failure
        return None


@dataclass
class Sample:
    """One reading: seconds since the start, CPU busy % per core, disk MB/s and busy %, RSS bytes."""

    t: float
    cpu: list[float] | None
    disk_mb_s: float | None
    disk_util: float | None
    rss: int | None


@dataclass
class MachineRecord:
    """Readings over a run, and its totals."""

    device: str | None
    samples: list[Sample] = field(default_factory=list)
    cores: int = 0  # logical cores in /proc/stat
    physical_cores: int = 0  # those this process may use, hyper-threads counted once
    cpu_per_core: list[float] | None = None  # mean busy % per core over the run
    process_cpu: float = 0.0  # cores' worth of CPU this process used (user + system)
    disk_read_bytes: int | None = None
    disk_util: float | None = None
    rss_start: int | None = None
    rss_end: int | None = None
    rss_peak: int | None = None
    gpu_memory: int | None = None

    def to_dict(self) -> dict:
        return {"device": self.device, "cores": self.cores, "physical_cores": self.physical_cores,
                "cpu_per_core": self.cpu_per_core,
                "process_cpu": round(self.process_cpu, 2), "disk_read_bytes": self.disk_read_bytes,
                "disk_util": self.disk_util, "rss_start": self.rss_start, "rss_end": self.rss_end,
                "rss_peak": self.rss_peak, "gpu_memory": self.gpu_memory,
                "series": [{"t": round(s.t, 3), "cpu": s.cpu, "disk_mb_s": s.disk_mb_s, "disk_util": s.disk_util,
                            "rss": s.rss} for s in self.samples]}


class MachineSampler:
    """Reads the counters every ``interval`` seconds on a thread, from :meth:`start` to :meth:`stop`."""

    def __init__(self, data_path: str | None, interval: float = 0.25) -> None:
        self.record = MachineRecord(block_device(data_path) if data_path else None)
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._cpu0 = self._cpu_last = _cpu_jiffies()
        self._disk0 = self._disk_last = _disk(self.record.device)
        self._times0 = os.times()
        memory = _memory()
        self.record.rss_start = memory[0] if memory else None
        self._last_t = 0.0
        self._thread = threading.Thread(target=self._run, name="mxrec-probe-machine", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._read()

    def _read(self) -> None:
        t = time.perf_counter() - self._t0
        span = max(t - self._last_t, 1e-6)
        cpu = _cpu_jiffies()
        busy = None
        if cpu is not None and self._cpu_last is not None and len(cpu) == len(self._cpu_last):
            busy = [round(100.0 * (b - b0) / max(n - n0, 1), 1) for (b, n), (b0, n0) in zip(cpu, self._cpu_last,
                                                                                             strict=True)]
        disk = _disk(self.record.device)
        mb_s = util = None
        if disk is not None and self._disk_last is not None:
            mb_s = round((disk[0] - self._disk_last[0]) / span / 1e6, 2)
            util = round(min(100.0, (disk[1] - self._disk_last[1]) / (span * 10)), 1)
        memory = _memory()
        self.record.samples.append(Sample(t, busy, mb_s, util, memory[0] if memory else None))
        self._cpu_last, self._disk_last, self._last_t = cpu, disk, t

    def stop(self) -> MachineRecord:
        """Stop sampling; fill in the run's totals."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._read()
        record = self.record
        record.physical_cores = physical_cores()
        elapsed = max(time.perf_counter() - self._t0, 1e-6)
        times = os.times()
        record.process_cpu = (times.user - self._times0.user + times.system - self._times0.system) / elapsed
        cpu = _cpu_jiffies()
        if cpu is not None and self._cpu0 is not None and len(cpu) == len(self._cpu0):
            record.cores = len(cpu)
            record.cpu_per_core = [round(100.0 * (b - b0) / max(n - n0, 1), 1)
                                   for (b, n), (b0, n0) in zip(cpu, self._cpu0, strict=True)]
        disk = _disk(record.device)
        if disk is not None and self._disk0 is not None:
            record.disk_read_bytes = disk[0] - self._disk0[0]
            record.disk_util = round(min(100.0, (disk[1] - self._disk0[1]) / (elapsed * 10)), 1)
        memory = _memory()
        if memory is not None:
            record.rss_end, record.rss_peak = memory
        record.gpu_memory = _gpu_memory()
        return record
