"""Functions sent to executor workers arrive with their arrays aligned (BLAS-eligible) and intact."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
import pickle

import numpy as np
import pytest

from zoframe._shipping import ship


def _misaligned(a: np.ndarray, offset: int) -> np.ndarray:
    """A copy of ``a`` that starts ``offset`` bytes past a 64-byte boundary (what a transport may give)."""
    raw = np.empty(a.nbytes + 128, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    out = raw[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


@dataclass
class Linear:
    B: np.ndarray

    def values(self, X: np.ndarray) -> np.ndarray:
        out: np.ndarray = X @ self.B.T
        return out


def test_arrays_arrive_aligned_with_their_values_and_write_flags() -> None:
    rng = np.random.default_rng(0)
    B = _misaligned(rng.standard_normal((10, 30)), 5)
    assert B.ctypes.data % 8 != 0  # numpy multiplies such an array without BLAS
    B.setflags(write=False)
    problem = Linear(B)
    with ThreadPoolExecutor(1) as ex:
        shipped = ship(problem.values, ex)
        arrived = pickle.loads(pickle.dumps(shipped))
    got = arrived.fn.__self__.B
    assert got.ctypes.data % 64 == 0 and np.array_equal(got, B) and not got.flags.writeable
    X = rng.standard_normal((5, 30))
    assert np.array_equal(arrived(X), X @ B.copy().T)  # the BLAS product of an aligned copy
    assert problem.B is B  # the caller's object is untouched


def test_a_process_pool_still_refuses_what_the_standard_pickler_cannot_send() -> None:
    with ProcessPoolExecutor(1) as ex:
        shipped = ship(lambda X: X, ex)
        with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
            pickle.dumps(shipped)


def test_other_executors_fall_back_to_cloudpickle_for_closures() -> None:
    cloudpickle = pytest.importorskip("cloudpickle", reason="cloudpickle comes with the zoframe[distributed] extra")
    scale = np.arange(3.0)
    with ThreadPoolExecutor(1) as ex:
        shipped = ship(lambda X: X * scale, ex)
        arrived = cloudpickle.loads(pickle.dumps(shipped))
    assert np.array_equal(arrived(np.ones(3)), scale)
