"""Sending a user function to executor workers with its arrays at a native alignment.

A transport may unpickle a problem's arrays at any byte offset inside a received frame (dask's
does: an ``(5, 30)`` matrix can arrive 5 bytes past an 8-byte boundary). numpy then cannot hand
such an array to BLAS and multiplies it with its own loop, which rounds differently, so a matrix
product in the user's function would give other bits on a worker than in the driver process.

:func:`ship` wraps the function so that it pickles itself with protocol 5 and out-of-band buffers:
every contiguous array travels as a separate buffer and is rebuilt, on arrival, in fresh memory
aligned to 64 bytes (read-only where the original was). The pickler is the standard one; for an
executor other than :class:`concurrent.futures.ProcessPoolExecutor` (dask's, which sends lambdas
and closures with cloudpickle) ``cloudpickle`` is used when the standard pickler refuses the
function and cloudpickle is installed. A thread pool never pickles: the wrapper just calls.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
import pickle
from typing import Any

import numpy as np

_ALIGN = 64


class Shipped:
    """A callable that pickles its function with aligned out-of-band buffers (see the module)."""

    __slots__ = ("_cloud", "_payload", "fn")

    def __init__(self, fn: Callable[..., Any], cloud: bool) -> None:
        self.fn = fn
        self._cloud = cloud
        self._payload: tuple[bytes, list[tuple[bytes, bool]]] | None = None

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[bytes, list[tuple[bytes, bool]]]]:
        if self._payload is None:  # pickled once however many tasks carry it
            buffers: list[pickle.PickleBuffer] = []
            try:
                data = pickle.dumps(self.fn, protocol=5, buffer_callback=buffers.append)
            except (pickle.PicklingError, AttributeError, TypeError):
                if not self._cloud:
                    raise
                try:
                    import cloudpickle  # type: ignore[import-untyped]
                except ImportError:
                    raise
                buffers = []
                data = cloudpickle.dumps(self.fn, protocol=5, buffer_callback=buffers.append)
            raw = []
            for b in buffers:
                view = b.raw()
                raw.append((view.tobytes(), bool(view.readonly)))
            self._payload = (data, raw)
        return _unship, self._payload


def _aligned(data: bytes, readonly: bool) -> memoryview:
    block = np.empty(len(data) + _ALIGN, dtype=np.uint8)
    start = (-block.ctypes.data) % _ALIGN
    out = block[start : start + len(data)]
    out[:] = np.frombuffer(data, dtype=np.uint8)
    view = memoryview(out.data)
    return view.toreadonly() if readonly else view


def _unship(data: bytes, raw: list[tuple[bytes, bool]]) -> Shipped:
    fn = pickle.loads(data, buffers=[_aligned(b, ro) for b, ro in raw])
    return Shipped(fn, cloud=False)


def ship(fn: Callable[..., Any], executor: Executor) -> Shipped:
    """``fn`` ready to be submitted to ``executor`` (see the module docstring)."""
    return Shipped(fn, cloud=not isinstance(executor, ProcessPoolExecutor))
