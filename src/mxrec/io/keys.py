"""Key -> position look-up over an ``.idx``'s keys, without a Python dict where the keys allow it.

:class:`KeyStore` answers "at which position (line of the ``.idx``) is key
``k``?" -- for a duplicated key, the last one, as MXNet's dict does. What it
builds depends on the keys (:class:`~mxrec.format.idx.IntKeys` or a list):

* integers that count up by one (im2rec, InsightFace): arithmetic, nothing stored;
* strictly increasing integers: a binary search over the key array itself;
* other integers: on the first look-up, a stable argsort (two int64 arrays),
  then binary searches -- 16 bytes a key instead of a dict's ~100;
* other keys (strings): a dict, built on the first look-up.

A key matches as it would in a dict: ``5``, ``numpy.int64(5)``, ``5.0`` and
``True``/``1`` all find integer key 5; ``"5"`` does not.
"""

from __future__ import annotations

import bisect
import threading

import numpy as np

from mxrec.errors import OptionError, RecordKeyError
from mxrec.format.idx import IntKeys


def check_duplicates_rule(duplicates: object) -> None:
    """Refuse a reader's ``duplicates=`` other than ``"error"`` (a duplicated key fails) or ``"last"`` (it wins)."""
    if duplicates not in ("error", "last"):
        raise OptionError(f"duplicates must be 'error' or 'last', not {duplicates!r}")


def as_int_key(key: object) -> int | None:
    """``key`` as the ``int`` a dict of integer keys would match it with, or None when it matches none."""
    if type(key) is int:
        return key
    if isinstance(key, (int, np.integer)):
        return int(key)
    if isinstance(key, (float, np.floating)) and float(key).is_integer():
        return int(key)
    return None


class KeyStore:
    """Positions of keys among ``keys`` (file order); see the module doc for what is built and when."""

    def __init__(self, keys: IntKeys | list) -> None:
        self.keys = keys
        self._ints = isinstance(keys, IntKeys)
        self._start = keys.consecutive_from if self._ints else None
        self._lock = threading.Lock()
        self._sorted: memoryview | None = None  # keys in increasing order (a view of int64 memory)
        self._order: np.ndarray | None = None  # position of each sorted key; None when already in order
        self._dict: dict | None = None

    def position(self, key: object) -> int:
        """The position of ``key`` (its last occurrence); raises ``KeyError`` when absent."""
        if self._ints:
            value = as_int_key(key)
            if value is not None:
                start = self._start
                if start is not None:
                    if 0 <= value - start < len(self.keys):
                        return value - start
                else:
                    found = self._search(value)
                    if found is not None:
                        return found
        else:
            positions = self._dict if self._dict is not None else self._build_dict()
            try:
                return positions[key]
            except TypeError:  # unhashable: no such key
                pass
        raise KeyError(key)

    def position_in(self, source: str, key: object) -> int:
        """As :meth:`position`, a missing key raised as :class:`~mxrec.errors.RecordKeyError` naming ``source``."""
        try:
            return self.position(key)
        except KeyError:
            raise RecordKeyError(source, key=key) from None

    def unique(self) -> bool:
        """Whether no key appears twice."""
        if self._start is not None:
            return True
        if self._ints:
            if self._sorted is None:
                self._build_sorted()
            keys = np.frombuffer(self._sorted, np.int64)
            return not bool((keys[1:] == keys[:-1]).any())
        positions = self._dict if self._dict is not None else self._build_dict()
        return len(positions) == len(self.keys)

    def _search(self, value: int) -> int | None:
        if self._sorted is None:
            self._build_sorted()
        at = bisect.bisect_right(self._sorted, value) - 1
        if at < 0 or self._sorted[at] != value:
            return None
        return at if self._order is None else int(self._order[at])

    def _build_sorted(self) -> None:
        with self._lock:
            if self._sorted is not None:
                return
            keys = self.keys.array
            if len(keys) > 1 and not bool((keys[1:] > keys[:-1]).all()):
                order = np.argsort(keys, kind="stable")  # equal keys stay in file order: the last one wins
                self._order = order
                keys = keys[order]
            self._sorted = memoryview(keys)

    def _build_dict(self) -> dict:
        with self._lock:
            if self._dict is None:
                self._dict = {key: position for position, key in enumerate(self.keys)}
            return self._dict

    def __getstate__(self) -> dict:
        return {"keys": self.keys}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["keys"])
