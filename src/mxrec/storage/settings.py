"""Storage settings as one value: :class:`Storage` (fsspec options, the block cache, the request policy).

A :class:`Storage` is given once, where a dataset is opened (or to a command), and travels with what was opened:
every remote operation made for it follows its :class:`RequestPolicy`, every block it caches goes to its cache
folder. It pickles (into ``DataLoader`` workers and Ray tasks) as plain values.

:class:`RequestPolicy` is how every remote request is made (:mod:`mxrec.storage.remote`):

* ``attempts``: requests per operation at most, the first included (``attempts=6``: five retries). An operation
  that is more than one request on the wire (a move on S3 is a copy and a delete) counts its requests per attempt;
  each attempt is one request otherwise: the back-ends' own retries are switched off.
* ``backoff`` .. ``max_backoff``: the wait before retry ``n`` is drawn uniformly from ``[0, min(max_backoff,
  backoff * 2**n)]`` ("full jitter": many clients that failed together do not come back together).
* ``connect_timeout``: seconds to open a connection; ``read_timeout``: seconds of silence on an open one (a stalled
  answer) before the request counts as failed (and is retried).
* ``deadline``: seconds after the first attempt of an operation past which no new attempt starts (a transfer under
  way is bounded by the time-outs, not by the deadline, so that a large upload is never cut for being large).
* ``max_gap`` / ``max_request``: ranged reads closer than ``max_gap`` bytes are merged into one request of at most
  ``max_request`` bytes; ``in_flight``: ranged requests one reader has open at once (a batch's reads, and the
  blocks a block-shuffled epoch reads ahead).
* ``memory``: the bytes of blocks a reader of a block-shuffled epoch holds in memory at once, those in use and
  those read ahead (``memory=512MiB``; per process: each ``DataLoader`` worker has its own). Read-ahead stops at
  it; the blocks in use are never dropped for it, so it should exceed the shuffle window (about
  :data:`~mxrec.io.order.WINDOW_BYTES` by default).

The policy is read from the environment when none is given (:func:`RequestPolicy.from_env`,
``MXREC_REQUESTS="attempts=4,read_timeout=20"``), and the command line's ``--requests`` takes the same text.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mxrec.errors import OptionError

ENV_REQUESTS = "MXREC_REQUESTS"
ENV_CACHE_DIR = "MXREC_CACHE_DIR"
ENV_CACHE_SIZE = "MXREC_CACHE_SIZE"

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 10**3, "kib": 1 << 10, "m": 1 << 20, "mb": 10**6, "mib": 1 << 20,
          "g": 1 << 30, "gb": 10**9, "gib": 1 << 30, "t": 1 << 40, "tb": 10**12, "tib": 1 << 40}


def parse_bytes(text: str | int) -> int:
    """A size in bytes: ``"20GB"`` -> 20 * 10**9, ``"4MiB"`` -> 4 << 20, ``4096`` -> 4096.

    Parameters
    ----------
    text
        A number of bytes, or a number followed by a unit (``B``, ``KB``/``MB``/``GB``/``TB`` decimal,
        ``K``/``M``/``G``/``T`` and ``KiB``/``MiB``/``GiB``/``TiB`` binary).

    Returns
    -------
    int
        The number of bytes.

    Raises
    ------
    OptionError
        ``text`` is not a size.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
    if not match or match.group(2).lower() not in _UNITS:
        raise OptionError(f"not a size: {text!r} (examples: 4096, 512MB, 20GiB)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def _seconds(name: str, value: object, *, zero: bool = False) -> float:
    """``value`` as seconds (``"20"``, ``"20s"``, ``0.5``): more than 0, or (``zero``) 0 or more."""
    text = str(value).strip().lower().removesuffix("s")
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if math.isnan(seconds) or seconds < 0 or (seconds == 0 and not zero) or isinstance(value, bool):
        least = "0 seconds or more" if zero else "more than 0 seconds"
        raise OptionError(f"request policy: {name} must be {least}, not {value!r}")
    return seconds


@dataclass(frozen=True)
class RequestPolicy:
    """How every remote request is made: attempts, back-off, time-outs, deadline, merging and concurrency.

    See the module docstring for what each field means.

    Parameters
    ----------
    attempts
        Requests per operation at most, the first included.
    backoff, max_backoff
        The first retry waits up to ``backoff`` seconds, each later one up to twice as long, never more than
        ``max_backoff``.
    connect_timeout, read_timeout
        Seconds to connect; seconds of silence on an open connection.
    deadline
        Seconds after which an operation starts no new attempt.
    max_gap, max_request
        Ranged reads closer than ``max_gap`` bytes are merged, up to ``max_request`` bytes a request.
    in_flight
        Ranged requests a reader has open at once.
    memory
        Bytes of blocks a block-shuffled reader holds in memory at once (in use and read ahead).

    Raises
    ------
    OptionError
        A value that cannot work (no attempt, a negative time, no request in flight).
    """

    attempts: int = 6
    backoff: float = 0.1
    max_backoff: float = 4.0
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    deadline: float = 300.0
    max_gap: int = 256 << 10
    max_request: int = 64 << 20
    in_flight: int = 32
    memory: int = 256 << 20

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or self.attempts < 1:
            raise OptionError(f"request policy: attempts must be a whole number of at least 1, not {self.attempts!r}")
        if not isinstance(self.in_flight, int) or self.in_flight < 1:
            raise OptionError(f"request policy: in_flight must be at least 1, not {self.in_flight!r}")
        for name in ("backoff", "max_backoff", "connect_timeout", "read_timeout", "deadline"):
            _seconds(name, getattr(self, name), zero=name in ("backoff", "max_backoff"))
        if self.max_gap < 0 or self.max_request < 1:
            raise OptionError(f"request policy: need max_gap >= 0 and max_request >= 1, got {self.max_gap} and "
                              f"{self.max_request}")
        if not isinstance(self.memory, int) or self.memory < 0:
            raise OptionError(f"request policy: memory must be a size in bytes, 0 or more, not {self.memory!r}")

    @classmethod
    def parse(cls, text: str, base: RequestPolicy | None = None) -> RequestPolicy:
        """The policy ``text`` describes (``"attempts=4,read_timeout=20,in_flight=8"``), other fields from ``base``.

        Parameters
        ----------
        text
            Comma-separated ``name=value`` pairs naming fields of :class:`RequestPolicy`; sizes may carry a unit
            (``max_request=32MiB``, ``memory=1GiB``), times an ``s``.
        base
            The policy the unnamed fields come from (default: the defaults).

        Returns
        -------
        RequestPolicy
            The policy.

        Raises
        ------
        OptionError
            An unknown name, or a value that cannot work.
        """
        base = base or cls()
        known = {f.name: f for f in dataclasses.fields(cls)}
        changes: dict[str, Any] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, sep, value = item.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in known:
                raise OptionError(f"request policy: {item!r} is not name=value with a name among "
                                  f"{', '.join(known)}")
            if name in ("attempts", "in_flight"):
                if not value.strip().isdigit():
                    raise OptionError(f"request policy: {name} must be a whole number, not {value!r}")
                changes[name] = int(value)
            elif name in ("max_gap", "max_request", "memory"):
                changes[name] = parse_bytes(value)
            else:
                changes[name] = _seconds(name, value, zero=name in ("backoff", "max_backoff"))
        return dataclasses.replace(base, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RequestPolicy:
        """The policy ``$MXREC_REQUESTS`` describes (:meth:`parse`), or the defaults.

        Parameters
        ----------
        environ
            The environment to read (default: ``os.environ``).

        Returns
        -------
        RequestPolicy
            The policy it describes, or the defaults where it is unset or empty.

        Raises
        ------
        OptionError
            ``$MXREC_REQUESTS`` is malformed (the message names the variable).
        """
        text = (os.environ if environ is None else environ).get(ENV_REQUESTS, "")
        try:
            return cls.parse(text)
        except OptionError as exc:
            raise OptionError(f"${ENV_REQUESTS}: {exc}") from None

    def describe(self) -> str:
        """The policy as text.

        Returns
        -------
        str
            The policy as :meth:`parse` reads it (``attempts=6,backoff=0.1,...``).
        """
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self))


@dataclass(frozen=True)
class Storage:
    """Where and how remote data is reached: fsspec options, the block cache, and the request policy.

    Parameters
    ----------
    options
        fsspec storage options (credentials, endpoint, ...), which win over the environment.
    cache_dir
        A local folder that keeps fetched blocks of remote files (:class:`~mxrec.storage.block_cache.BlockCache`);
        default ``$MXREC_CACHE_DIR``, none when that is unset.
    cache_size
        The most bytes the cache folder holds (``"20GB"`` or a number); default ``$MXREC_CACHE_SIZE`` or 10 GiB.
    policy
        How requests are made (:class:`RequestPolicy`); default from ``$MXREC_REQUESTS``.

    Raises
    ------
    OptionError
        ``cache_size`` is not a size, or ``options`` is not a mapping.
    """

    options: Mapping[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None
    cache_size: int | None = None
    policy: RequestPolicy = field(default_factory=RequestPolicy.from_env)

    def __post_init__(self) -> None:
        if not isinstance(self.options, Mapping):
            raise OptionError(f"storage options must be a mapping of fsspec options, not {type(self.options).__name__}")
        object.__setattr__(self, "options", dict(self.options))
        if self.cache_dir is not None:
            object.__setattr__(self, "cache_dir", os.fspath(self.cache_dir))
        if self.cache_size is not None:
            object.__setattr__(self, "cache_size", parse_bytes(self.cache_size))

    @classmethod
    def of(cls, value: Storage | Mapping[str, Any] | None = None, *, cache_dir: str | os.PathLike | None = None,
           cache_size: int | str | None = None, policy: RequestPolicy | str | None = None) -> Storage:
        """A :class:`Storage` from what a caller gave: one, plain fsspec options (the older keyword), or nothing,
        with the keyword shorthands laid over it.

        Parameters
        ----------
        value
            A :class:`Storage`, a mapping of fsspec options, or ``None``.
        cache_dir, cache_size, policy
            Shorthands that replace the field of the same name when given (a policy may be :meth:`RequestPolicy.parse`
            text).

        Returns
        -------
        Storage
            The settings.

        Raises
        ------
        OptionError
            A value that is neither of those.
        """
        if isinstance(value, Storage):
            storage = value
        elif value is None or isinstance(value, Mapping):
            storage = cls(options=dict(value or {}))
        else:
            raise OptionError(f"storage must be a mxrec.Storage or a mapping of fsspec options, not "
                              f"{type(value).__name__}")
        changes: dict[str, Any] = {}
        if cache_dir is not None:
            changes["cache_dir"] = os.fspath(cache_dir)
        if cache_size is not None:
            changes["cache_size"] = parse_bytes(cache_size)
        if policy is not None:
            changes["policy"] = RequestPolicy.parse(policy, storage.policy) if isinstance(policy, str) else policy
        return dataclasses.replace(storage, **changes) if changes else storage

    def options_key(self) -> tuple:
        """A dictionary key for these fsspec options.

        Returns
        -------
        tuple
            What tells one set of fsspec options (with the policy's time-outs and connections) from another.
        """
        return (tuple(sorted((k, repr(v)) for k, v in self.options.items())),
                self.policy.connect_timeout, self.policy.read_timeout, self.policy.in_flight)

    def cache_folder(self) -> str | None:
        """The block cache's folder.

        Returns
        -------
        str or None
            :attr:`cache_dir`, else ``$MXREC_CACHE_DIR``, else ``None`` (no cache).
        """
        return self.cache_dir if self.cache_dir is not None else (os.environ.get(ENV_CACHE_DIR) or None)
