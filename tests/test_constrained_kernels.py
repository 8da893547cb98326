"""The simplex kernels against their plain formulations, bit for bit.

``sample_dense``, ``simplex_threshold`` and ``project_simplex_dense`` take shortcuts (a cached block
layout, the blocks gathered as columns, no second Michelot pass when the first keeps every entry,
only the surviving entries subtracted); the references below are the straightforward versions of
the same arithmetic, and every result must equal theirs exactly (values and signs of zeros).
"""

from __future__ import annotations

import numpy as np
import pytest

from zoframe_constrained.simplex import FLUSH, _floor_threshold, project_simplex_dense, sample_dense, simplex_threshold


def _ref_sample(p: np.ndarray, u: np.ndarray, block: int = 32) -> np.ndarray:
    m = p.shape[0]
    starts = np.arange(0, m, block)
    sums = np.add.reduceat(p, starts)
    cum = np.cumsum(sums)
    t = u * cum[-1]
    b = np.minimum(np.searchsorted(cum, t, side="right"), starts.shape[0] - 1)
    rest = t - (cum[b] - sums[b])
    idx = starts[b][:, None] + np.arange(block)[None, :]
    W = np.where(idx < m, p[np.minimum(idx, m - 1)], 0.0)
    k = (np.cumsum(W, axis=1) <= rest[:, None]).sum(axis=1)
    out = np.minimum(starts[b] + k, m - 1).astype(np.intp)
    bad = p[out] == 0.0
    if bad.any():
        out[bad] = np.minimum(np.searchsorted(np.cumsum(p), t[bad], side="right"), m - 1)
    return out


def _ref_threshold(v: np.ndarray, c: np.ndarray | None = None) -> float:
    unit = c is None  # unit weights: numpy's sums; weights: numpy's sums of the products (no BLAS dot)
    c = np.ones_like(v) if c is None else c
    total = float(v.sum()) if unit else float(np.sum(v * c))
    tau = max(float(v.max()) - 1.0, (total - 1.0) / float(c.sum()))
    keep = v > tau
    kept = int(np.count_nonzero(keep))
    while kept:
        v, c = v[keep], c[keep]
        n = kept
        tau = (float(v.sum() if unit else np.sum(v * c)) - 1.0) / (n if unit else float(c.sum()))
        keep = v > tau
        kept = int(np.count_nonzero(keep))
        if kept == n:
            break
    return tau


def _ref_project(v: np.ndarray) -> np.ndarray:
    tau = _ref_threshold(v)
    out = v - tau
    out[out < FLUSH] = 0.0
    return out


def _distributions(rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for m in (1, 5, 31, 32, 33, 100, 1000, 4097):
        for zeros in (0.0, 0.5, 0.99):
            p = rng.random(m) * (rng.random(m) >= zeros)
            if not p.any():
                p[-1] = 1.0
            out.append(p / p.sum())
    return out


def test_sample_dense_is_the_plain_inversion() -> None:
    rng = np.random.default_rng(3)
    for p in _distributions(rng):
        for block in (7, 32, 100):
            for u in (rng.random(128), np.linspace(0.0, 1.0 - 1e-16, 64), rng.random(1)):
                got = sample_dense(p, u, block)
                assert got.dtype == np.intp
                np.testing.assert_array_equal(got, _ref_sample(p, u, block))


@pytest.mark.parametrize("scale", [1e-6, 1e-2, 1.0, 1e3])
def test_threshold_and_projection_are_the_plain_michelot(scale: float) -> None:
    rng = np.random.default_rng(4)
    for p in _distributions(rng):
        for v in (
            p + scale * rng.standard_normal(p.shape[0]) * 1e-3,
            p * (1.0 + scale),
            rng.standard_normal(p.shape[0]) * scale,
        ):
            assert simplex_threshold(v) == _ref_threshold(v)
            c = rng.integers(1, 4, v.shape[0]).astype(np.float64)
            assert simplex_threshold(v, c) == _ref_threshold(v, c)
            ref = _ref_project(v)
            for overwrite in (False, True):
                got = project_simplex_dense(v.copy(), overwrite=overwrite)
                np.testing.assert_array_equal(got, ref)
                np.testing.assert_array_equal(np.signbit(got), np.signbit(ref))
            if v.shape[0] > 1:  # the floor block: the last value stands for n_floor equal entries
                for n_floor in (1, 7, 10_000):
                    counts = np.ones(v.shape[0])
                    counts[-1] = n_floor
                    assert _floor_threshold(v.copy(), n_floor) == _ref_threshold(v, counts)


def test_projection_of_special_values() -> None:
    v = np.array([0.5, -np.inf, 0.25, 1e-310, 0.75])
    np.testing.assert_array_equal(project_simplex_dense(v.copy()), _ref_project(v))
    nan = np.array([0.5, np.nan, 0.5])
    np.testing.assert_array_equal(project_simplex_dense(nan.copy()), _ref_project(nan))


def test_passive_solve_is_solve_triangular() -> None:
    from scipy.linalg import solve_triangular

    from zoframe_constrained.ldp import _PassiveQR

    rng = np.random.default_rng(5)
    for M, k in ((32, 40), (12, 5), (70, 70)):
        E = rng.standard_normal((M, k))
        e = rng.standard_normal(M)
        qr = _PassiveQR(E)
        for t in range(k):
            if not qr.append(t, 1e-10):
                continue
            p = qr.p
            ref = solve_triangular(qr.R[:p, :p], qr.Q[:, :p].T @ e, check_finite=False)
            np.testing.assert_array_equal(qr.solve(e), ref)


def test_sparse_moving_average_without_gains_keeps_the_support() -> None:
    from zoframe_constrained.simplex import PZ, Ascent, _merge_at, pz_ema

    rng = np.random.default_rng(6)
    m = 1000
    support = np.sort(rng.choice(m, 40, replace=False)).astype(np.intp)
    pz = PZ(rng.random(40) * 1e-2, rng.standard_normal(40) * 1e-3, support, 1e-7, -2e-9, m)
    idx = rng.choice(m, 64, replace=False).astype(np.intp)
    for gain in (np.zeros(64), -rng.random(64)):
        h = Ascent(idx, gain, 1e-6)
        got = pz_ema(pz, h, 0.9)
        # the general path: merge nothing, then the same arithmetic
        union, (p, z), _ = _merge_at(pz.support, idx[:0], (pz.p, pz.p_floor), (pz.z, pz.z_floor))
        z = (1.0 - 0.9) * z + 0.9 * (-1e-6 * p)
        assert got.support is union and got.p is p
        np.testing.assert_array_equal(got.z, z)
        assert got.z_floor == (1.0 - 0.9) * pz.z_floor + 0.9 * (-1e-6 * pz.p_floor)


def test_members_is_isin() -> None:
    from zoframe_constrained.restoration import _members

    rng = np.random.default_rng(7)
    for n_pool in (0, 1, 2, 17, 60):
        values = np.sort(rng.choice(500, 120, replace=False)).astype(np.intp)
        pool = rng.choice(500, n_pool, replace=False).astype(np.intp)
        for p in (np.sort(pool), pool):  # sorted (the active sets) and in any order
            np.testing.assert_array_equal(_members(values, p), np.isin(values, p, assume_unique=True))
