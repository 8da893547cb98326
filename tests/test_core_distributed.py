"""Bit-identical results serially, with chunks, on a process pool and on a dask cluster (loopback).

The row partition of a batch is a property of the batch alone (blocks of ``block_rows`` rows), so
functions whose rounding depends on the number of rows they see (matrix products) give the same
bits wherever the blocks are evaluated. The problems are module-level classes of installed
packages, so they pickle to other processes.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
import math
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe import CountingOracle
from zoframe.result import Result
from zoframe_basic.problems import LeastSquares
from zoframe_minimax.problems import NCSC

distributed = pytest.importorskip("distributed", reason="the zoframe[distributed] extra is not installed")

# batches of 21 rows (q + 1) and more: with 5 rows per block, every estimate is several blocks
LS = LeastSquares(dim=40, n=300)
LS_RUN: dict[str, Any] = {"rng": 3, "max_iter": 12, "q": 20, "batch": 16, "eta": 0.01, "record_every": 3,
                          "steps": "paper"}
NC = NCSC(d1=30, d2=10, n=50)
NC_RUN: dict[str, Any] = {"rng": 5, "max_iter": 6, "record_every": 2, "steps": "paper"}
CASES = [("least-squares", LS, "zo-sgd", LS_RUN), ("ncsc", NC, "zo-sgda", NC_RUN)]


def assert_bit_identical(a: Result, b: Result) -> None:
    """Every number of the two results, except wall-clock times, is the same bit pattern."""
    assert np.array_equal(a.x, b.x) and np.array_equal(a.x_best, b.x_best)
    assert a.fun == b.fun or (math.isnan(a.fun) and math.isnan(b.fun))
    assert a.fun_best == b.fun_best
    assert (a.nit, a.nfev, a.status, a.success) == (b.nit, b.nfev, b.status, b.success)
    assert a.nfev_by_kind == b.nfev_by_kind and a.nfev_by_purpose == b.nfev_by_purpose
    assert a.measures == b.measures
    assert a.outputs.keys() == b.outputs.keys()
    assert all(np.array_equal(a.outputs[k], b.outputs[k]) for k in a.outputs)
    cols = [c for c in a.trace.columns if c != "seconds"]
    assert cols == [c for c in b.trace.columns if c != "seconds"]
    assert all(np.array_equal(a.trace[c], b.trace[c], equal_nan=True) for c in cols)


def _run(problem: Any, solver: str, kw: dict[str, Any], executor: Executor | None = None, chunks: int | None = None) -> Result:
    return zoframe.minimize(problem, solver, executor=executor, chunks=chunks, block_rows=5, **kw)


class Watched(Executor):
    """An executor that counts the tasks it is given (to prove the parallel path really ran)."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.tasks = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.tasks += 1
        return self.inner.submit(fn, *args, **kwargs)


@pytest.mark.parametrize(("name", "problem", "solver", "kw"), CASES, ids=[c[0] for c in CASES])
def test_the_problems_round_differently_on_other_row_blocks(name: str, problem: Any, solver: str, kw: dict[str, Any]) -> None:
    """The bit-identity tests below have teeth: on these problems another row partition (what an
    executor-dependent split would give) changes the Result, so only a partition fixed by the batch
    passes them. Which partitions happen to round alike depends on the CPU's BLAS kernels, so
    several are tried: at least one must differ."""
    ref = _run(problem, solver, kw)
    others = [zoframe.minimize(problem, solver, block_rows=rows, **kw) for rows in (1, 2, 7)]
    assert any(not np.array_equal(ref.x, other.x) for other in others)
    for other in others:
        np.testing.assert_allclose(ref.x, other.x, rtol=1e-9, atol=1e-12)  # the same run up to rounding


@pytest.mark.parametrize(("name", "problem", "solver", "kw"), CASES, ids=[c[0] for c in CASES])
def test_serial_chunks_and_process_pool_are_bit_identical(name: str, problem: Any, solver: str, kw: dict[str, Any]) -> None:
    serial = _run(problem, solver, kw)
    assert serial.nit == kw["max_iter"] and math.isfinite(serial.fun)
    with ThreadPoolExecutor(2) as ex:
        for chunks in (2, 3):
            watched = Watched(ex)
            assert_bit_identical(serial, _run(problem, solver, kw, watched, chunks=chunks))
            assert watched.tasks >= kw["max_iter"]
    with ProcessPoolExecutor(2) as ex:
        watched = Watched(ex)
        assert_bit_identical(serial, _run(problem, solver, kw, watched))
        assert watched.tasks >= kw["max_iter"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_dask_local_cluster_is_bit_identical() -> None:
    serial = {name: _run(p, s, kw) for name, p, s, kw in CASES}
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        for name, p, s, kw in CASES:
            watched = Watched(client.get_executor())
            assert_bit_identical(serial[name], _run(p, s, kw, watched, chunks=3))
            assert watched.tasks >= kw["max_iter"]


def _recording(sizes: list[int]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def f(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        sizes.append(X.shape[0])
        out: np.ndarray = X @ np.arange(1.0, X.shape[1] + 1)[:, None] + idx[None, :]
        return out

    return f


@pytest.mark.parametrize("chunks", [None, 1, 2, 5])
def test_the_blocks_depend_on_the_batch_alone(chunks: int | None) -> None:
    serial: list[int] = []
    prob = zoframe.FiniteSum(_recording(serial), n=3, x0=np.zeros(2))
    X = np.random.default_rng(0).standard_normal((23, 2))
    ref = CountingOracle(prob, block_rows=5).objective(X)
    assert serial == [5, 5, 5, 5, 3]
    parallel: list[int] = []
    prob_p = zoframe.FiniteSum(_recording(parallel), n=3, x0=np.zeros(2))
    with ThreadPoolExecutor(2) as ex:
        out = CountingOracle(prob_p, block_rows=5, executor=ex, chunks=chunks).objective(X)
    assert sorted(parallel) == sorted(serial) and np.array_equal(out, ref)


def test_a_batch_of_at_most_block_rows_is_one_call() -> None:
    sizes: list[int] = []
    prob = zoframe.FiniteSum(_recording(sizes), n=3, x0=np.zeros(2))
    with ThreadPoolExecutor(2) as ex:
        o = CountingOracle(prob, executor=ex, chunks=4)
        o.objective(np.zeros((256, 2)))
        o.objective(np.zeros((257, 2)))
    # one call for 256 rows; blocks [0, 256) and [256, 257) for 257 (on threads: in any order)
    assert sizes[0] == 256 and sorted(sizes[1:]) == [1, 256] and o.block_rows == 256


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_block_rows_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(zoframe.InvalidInputError, match="block_rows must be a positive integer"):
        CountingOracle(LS, block_rows=bad)
