"""``mx.nd.NDArray`` for data-loading code: a numpy array behind the members such code uses.

MXNet's data APIs hand out ``NDArray`` objects; the code that consumes them
calls ``.asnumpy()`` (a contiguous copy), reads ``.shape``/``.dtype``/``.size``,
indexes, transposes and flips. :class:`NDArray` offers exactly those (and
``np.asarray(nd)`` works); anything else -- arithmetic, contexts, autograd --
raises :class:`~mxrec.errors.UnsupportedError` saying to call ``asnumpy()``
first. :data:`FUNCTIONS` are ``mx.nd``'s functions of the same members.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mxrec.errors import OptionError, UnsupportedError

_COVERED = "asnumpy, shape, dtype, ndim, size, astype, copy, transpose, flip, indexing, len"


def unsupported(name: str) -> UnsupportedError:
    """The error for a part of MXNet that :mod:`mxrec.compat.mx` does not cover."""
    return UnsupportedError(f"{name} is not supported: mxrec.compat.mx covers MXNet's data loading only "
                            f"(NDArray: {_COVERED}); call .asnumpy() and use numpy or your framework for the rest")


class NDArray:
    """A read-mostly stand-in for ``mx.nd.NDArray`` over the numpy array ``data`` (not copied)."""

    __slots__ = ("_data",)
    __array_priority__ = 100  # numpy defers to this class, so arithmetic with it reaches the clear error

    def __init__(self, data: Any) -> None:
        self._data = data._data if isinstance(data, NDArray) else np.asarray(data)

    def asnumpy(self) -> np.ndarray:
        """A contiguous numpy copy, as MXNet's ``asnumpy`` gives."""
        return np.array(self._data, order="C", copy=True)

    def asscalar(self) -> Any:
        """The value of a one-element array."""
        if self._data.size != 1:
            raise OptionError(f"asscalar needs a one-element NDArray, this one has shape {self.shape}")
        return self._data.reshape(()).item()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return int(self._data.size)

    def astype(self, dtype: Any, copy: bool = True) -> NDArray:
        return NDArray(self._data.astype(dtype, copy=copy))

    def copy(self) -> NDArray:
        return NDArray(self._data.copy())

    def transpose(self, axes: Sequence[int] | None = None) -> NDArray:
        return NDArray(self._data.transpose(axes))

    def flip(self, axis: int) -> NDArray:
        return NDArray(np.flip(self._data, axis))

    def __getitem__(self, key: Any) -> NDArray:
        return NDArray(self._data[key._data if isinstance(key, NDArray) else key])

    def __setitem__(self, key: Any, value: Any) -> None:
        self._data[key] = value._data if isinstance(value, NDArray) else value

    def __len__(self) -> int:
        return len(self._data)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return self._data if dtype is None else self._data.astype(dtype)

    def __repr__(self) -> str:
        return f"\n{self._data!r}\n<NDArray {'x'.join(map(str, self.shape))} @cpu(0)>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise unsupported(f"NDArray.{name}")

    def _arithmetic(self, *_: Any) -> Any:
        raise unsupported("NDArray arithmetic")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _arithmetic
    __truediv__ = __rtruediv__ = __floordiv__ = __neg__ = __pow__ = _arithmetic


def array(source: Any, ctx: Any = None, dtype: Any = None) -> NDArray:
    """``mx.nd.array``: an NDArray holding a copy of ``source`` (float32 unless ``dtype`` or an array's own)."""
    if dtype is None:
        dtype = source.dtype if isinstance(source, (np.ndarray, NDArray)) else np.float32
    return NDArray(np.array(np.asarray(source), dtype=dtype))


def transpose(data: NDArray, axes: Sequence[int] | None = None) -> NDArray:
    """``mx.nd.transpose``."""
    return NDArray(data).transpose(axes)


def flip(data: NDArray, axis: int) -> NDArray:
    """``mx.nd.flip``."""
    return NDArray(data).flip(axis)


#: ``mx.nd``'s functions that data code calls.
FUNCTIONS: dict[str, Callable[..., Any]] = {"NDArray": NDArray, "array": array, "transpose": transpose,
                                            "flip": flip}
