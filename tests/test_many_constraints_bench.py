"""benchmarks/many_constraints.py: constraint data made per index, the exchange reference against a dense
solve, the memory need of the scipy runs (fast)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
import sys
import tracemalloc
from types import ModuleType

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "many_constraints.py"
FAMILIES = ("polytope", "fit", "rosenbrock", "balls")


@pytest.fixture(scope="module")
def mc() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_many_constraints_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", FAMILIES)
def test_a_constraint_is_the_same_whatever_block_it_is_asked_in(mc: ModuleType, name: str) -> None:
    m = 50_000
    fam = mc.family(name, m, 1)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, fam.d))
    idx = rng.choice(m, 700, replace=False)
    whole = fam.g(X, idx)
    assert whole.shape == (3, 700) and np.isfinite(whole).all()
    one_by_one = np.hstack([fam.g(X, idx[i : i + 1]) for i in range(0, 700, 70)])
    np.testing.assert_allclose(fam.g(X, idx[::70]), one_by_one, rtol=0, atol=1e-13)  # BLAS rounding only
    order = np.argsort(idx)
    np.testing.assert_allclose(fam.g(X, idx[order]), whole[:, order], rtol=0, atol=1e-13)
    # the same instance again gives the same values; another seed another instance
    np.testing.assert_array_equal(mc.family(name, m, 1).g(X, idx), whole)
    assert not np.allclose(mc.family(name, m, 2).g(X, idx), whole)
    # the exact Jacobian rows are those of the values (a central difference)
    x, h = X[0], 1e-6
    E = h * np.eye(fam.d)
    fd = (fam.g(x + E, idx[:20]) - fam.g(x - E, idx[:20])).T / (2 * h)
    np.testing.assert_allclose(fam.jac(x, idx[:20]), fd, rtol=1e-6, atol=1e-6)


def test_rows_and_hash_look_like_independent_draws(mc: ModuleType) -> None:
    idx = np.arange(200_000)
    u = mc.hash_uniform(12345, idx)
    assert 0.0 < u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.01
    rows = mc.FourierRows(8, idx.shape[0], np.random.default_rng(3))
    A = rows(idx)
    some = np.random.default_rng(1).choice(idx.shape[0], 500)
    np.testing.assert_array_equal(rows(some), A[some])  # a row is made from its index alone, bit for bit
    np.testing.assert_array_equal(mc.hash_uniform(12345, some), u[some])
    assert A.shape == (200_000, 8)
    np.testing.assert_allclose(A.mean(0), 0.0, atol=0.02)
    np.testing.assert_allclose(A.var(0), 1.0, atol=0.02)
    C = np.corrcoef(A.T)
    assert np.abs(C - np.eye(8)).max() < 0.02


def test_a_huge_family_holds_no_m_by_d_array(mc: ModuleType) -> None:
    m = 10**9
    tracemalloc.start()
    try:
        fam = mc.family("polytope", m, 0)
        v = fam.g(fam.x0[None, :] + 0.1, np.arange(m - 20_000, m))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert v.shape == (1, 20_000) and np.isfinite(v).all()
    assert peak < 64 * 2**20  # 8 m d bytes would be 149 GB


@pytest.mark.parametrize("name", FAMILIES)
def test_exchange_reference_matches_a_dense_solve(mc: ModuleType, name: str) -> None:
    fam = mc.family(name, 3000, 0)
    ref = mc.reference(fam)
    assert ref["violation"] <= 1e-12
    assert mc.full_pass(fam, ref["x"])[0] <= 1e-12
    assert ref["working_set"] < fam.m
    dense = mc.dense_reference(fam)
    assert abs(ref["f_star"] - dense) <= 1e-10 * max(1.0, abs(dense))
    assert mc.full_pass(fam, ref["x"])[0] >= -1e-9  # some constraint is active: they matter


def test_scipy_memory_need_is_computed_from_the_dense_arrays(mc: ModuleType) -> None:
    m, d = 10**7, 20
    need = mc.scipy_need_bytes("slsqp-2point", m, d)
    assert need >= 2 * 8 * m * d + 8 * 3 * m * d  # Jacobian, its copy, the workspace
    assert need / 2**30 > 2.0
    assert mc.scipy_need_bytes("cobyla", m, d) == 8 * m * (3 * d + 2)
    assert mc.scipy_need_bytes("cobyla", m, 10) / 2**30 > 2.0  # d = 10 does not fit in 2 GB either
    assert mc.scipy_need_bytes("slsqp-2point", 10_000, d) < 2**30
