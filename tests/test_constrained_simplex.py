"""The distribution p: projection, the sparse (floor + support) ascent step against a dense
sort-based reference, inverse-CDF sampling in both forms, and the subnormal flush."""

from __future__ import annotations

import numpy as np
import pytest

from zoframe.sets import project_simplex
from zoframe_constrained.simplex import (
    FLUSH,
    Ascent,
    ascent_dense,
    ascent_sparse,
    densify,
    flush,
    project_simplex_dense,
    sample_dense,
    sample_sparse,
    simplex_threshold,
    sparsify,
)


def test_projection_matches_the_sort_based_reference() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        v = rng.standard_normal(int(rng.integers(1, 60))) * rng.choice([1e-3, 1.0, 1e3])
        v_copy = v.copy()
        np.testing.assert_allclose(project_simplex_dense(v), project_simplex(v), rtol=0, atol=1e-12)
        np.testing.assert_array_equal(v, v_copy)


def test_weighted_threshold_equals_the_expanded_vector() -> None:
    rng = np.random.default_rng(1)
    for _ in range(100):
        vals = rng.standard_normal(8)
        counts = rng.integers(1, 20, size=8).astype(float)
        expanded = np.repeat(vals, counts.astype(int))
        assert simplex_threshold(vals, counts) == pytest.approx(simplex_threshold(expanded), abs=1e-12)


def _reference_step(p: np.ndarray, eta: float, h: Ascent) -> np.ndarray:
    """Proj_Delta(p + eta H), H = sum_j e_j gain_j - lam p: dense, sort-based (zoframe.sets)."""
    H = -h.lam * p
    np.add.at(H, h.idx, h.gain)
    return project_simplex(p + eta * H)


@pytest.mark.parametrize(("lam", "violated"), [(1e-6, 0.7), (1e-2, 0.3), (0.5, 0.05)])
def test_sparse_ascent_gives_the_dense_iterates(lam: float, violated: float) -> None:
    """3000 steps from the uniform p: floor > 0 phases (no violation sampled) and floor = 0 phases."""
    rng = np.random.default_rng(2)
    m, k, eta = 500, 16, 0.05
    p = np.full(m, 1.0 / m)
    support, values, floor = sparsify(p)
    assert support.shape == (0,) and floor == 1.0 / m
    worst = 0.0
    sizes = []
    for _ in range(3000):
        idx = rng.choice(m, size=k, replace=True)  # duplicates must add up
        phi = np.maximum(rng.standard_normal(k) - 1.5, 0.0) ** 2 * (rng.random() < violated)
        h = Ascent(idx=idx, gain=m / k * phi, lam=lam)
        p_ref = _reference_step(p, eta, h)
        p = ascent_dense(p, eta, h)
        support, values, floor = ascent_sparse(support, values, floor, m, eta, h)
        dense = densify(support, values, floor, m)
        worst = max(worst, float(np.abs(p - p_ref).max()), float(np.abs(dense - p).max()))
        sizes.append(support.shape[0])
        assert np.all(np.diff(support) > 0)
        assert np.all(values > floor)
    assert worst <= 1e-12
    assert abs(densify(support, values, floor, m).sum() - 1.0) <= 1e-12
    assert min(sizes) < m // 4  # the support really is sparse part of the time


def test_sampling_both_forms_draw_the_same_indices_with_the_right_law() -> None:
    rng = np.random.default_rng(3)
    m = 50
    for floor in (0.0, 0.004):
        support = np.sort(rng.choice(m, size=7, replace=False)).astype(np.intp)
        values = floor + rng.random(7)
        values *= (1.0 - floor * (m - 7)) / values.sum()
        values = np.maximum(values, floor + 1e-3)
        p = densify(support, values, floor, m)
        p /= p.sum()
        support, values, floor = sparsify(p)
        u = rng.random(200_000)
        a = sample_dense(p, u)
        b = sample_sparse(support, values, floor, m, u)
        assert np.mean(a != b) < 1e-4  # only rounding at the boundaries may differ
        freq = np.bincount(b, minlength=m) / u.shape[0]
        se = np.sqrt(p * (1 - p) / u.shape[0]) + 1e-12
        assert np.max(np.abs(freq - p) / se) < 5.0
        assert np.all(freq[p == 0] == 0)


def test_uniform_floor_only_sampling() -> None:
    u = np.random.default_rng(4).random(10_000)
    idx = sample_sparse(np.zeros(0, dtype=np.intp), np.zeros(0), 0.01, 100, u)
    assert idx.min() >= 0 and idx.max() <= 99
    np.testing.assert_array_equal(idx, sample_dense(np.full(100, 0.01), u))


def test_flush_removes_subnormals() -> None:
    v = np.array([1e-310, -1e-315, 3e-308, 0.5, -2.0])
    out = flush(v.copy())
    np.testing.assert_array_equal(out, [0.0, 0.0, 3e-308, 0.5, -2.0])
    assert FLUSH == np.finfo(np.float64).tiny
    p = project_simplex_dense(np.array([1.0, 1.0 - 2e-309, -5.0]))
    assert np.all((p == 0) | (p >= FLUSH))


def test_huge_values_keep_p_on_the_simplex() -> None:
    """A diverged run (values ~1e17) must not leave p off the simplex through rounding."""
    p = project_simplex_dense(np.array([0.0, 1.2e16, 3.0]))
    np.testing.assert_array_equal(p, [0.0, 1.0, 0.0])
    support, values, floor = ascent_sparse(
        np.array([1, 2], dtype=np.intp), np.array([0.5, 0.5]), 0.0, 10, 1.0, Ascent(np.array([3]), np.array([1e17]), 1e-6)
    )
    np.testing.assert_array_equal(densify(support, values, floor, 10), np.eye(10)[3])


@pytest.mark.parametrize(("a", "b", "violated"), [(0.9, 0.9, 0.5), (0.5, 0.1, 0.2), (0.1, 0.5, 0.0)])
def test_adszog_floor_support_form_gives_the_dense_updates(a: float, b: float, violated: float) -> None:
    """ADSZOG's l.6, l.7, l.15 and the flush in the floor + support form (PZ) against a plain dense
    reference written with zoframe.sets.project_simplex, over 2000 random steps."""
    from zoframe_constrained.simplex import PZ, pz_average, pz_ema, pz_flush, pz_project

    rng = np.random.default_rng(6)
    m, k, lam, eta = 400, 12, 1e-3, 0.05
    p = np.full(m, 1.0 / m)
    z = -lam * p
    pz = PZ(np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.intp), 1.0 / m, -lam / m, m)
    threshold = 1e-250
    worst = 0.0
    sizes = []
    for t in range(1, 2001):
        step = eta / (np.sqrt(np.linalg.norm(z)) + 1e-8)
        p = (1 - a) * p + a * project_simplex(p + step * z)  # reference l.6, l.7
        idx = rng.choice(m, size=k, replace=False)
        gain = m / k * np.maximum(rng.standard_normal(k) - 1.0, 0.0) ** 2 * (rng.random() < violated)
        h = -lam * p
        h[idx] += gain
        z = (1 - b) * z + b * h  # reference l.15
        if t % 16 == 0:
            p[p < threshold] = 0.0
            z[np.abs(z) < threshold] = 0.0
        step_pz = eta / (np.sqrt(pz.norm_z()) + 1e-8)
        pz = pz_average(pz, pz_project(pz, step_pz), a)
        pz = pz_ema(pz, Ascent(idx=idx, gain=gain, lam=lam), b)
        if t % 16 == 0:
            pz = pz_flush(pz, threshold)
        assert pz.support is not None
        sizes.append(pz.support.shape[0])
        worst = max(worst, float(np.abs(pz.dense_p() - p).max()), float(np.abs(densify(pz.support, pz.z, pz.z_floor, m) - z).max()))
    assert worst <= 1e-12
    assert abs(p.sum() - 1.0) <= 1e-9
    if (a, b) == (0.9, 0.9):  # short memory: entries touched long ago fall back into the floor block
        assert np.median(sizes[300:]) < m // 4 and max(sizes[300:]) < m // 2, (np.median(sizes[300:]), max(sizes[300:]))


def test_merge_equals_np_insert_bit_for_bit() -> None:
    """The scatter of ``_merge`` puts every entry where ``np.insert`` would (new entries before old ones)."""
    from zoframe_constrained.simplex import _merge

    rng = np.random.default_rng(3)
    for trial in range(300):
        m = int(rng.integers(1, 200))
        support = np.sort(rng.choice(m, size=int(rng.integers(0, m + 1)), replace=False)).astype(np.intp)
        idx = np.sort(rng.choice(m, size=int(rng.integers(0, min(m, 40) + 1)), replace=False)).astype(np.intp)
        a, b = rng.standard_normal(support.shape[0]), rng.standard_normal(support.shape[0])
        a0, b0 = a.copy(), b.copy()
        union, (fa, fb) = _merge(support, idx, (a, 0.25), (b, -1.5))
        pos = np.searchsorted(support, idx)
        present = np.isin(idx, support)
        where = pos[~present]
        assert np.array_equal(union, np.insert(support, where, idx[~present])), trial
        assert union.dtype == np.intp and np.all(np.diff(union) > 0)
        assert np.array_equal(fa, np.insert(a0, where, 0.25)) and np.array_equal(fb, np.insert(b0, where, -1.5))
        assert np.array_equal(a, a0) and np.array_equal(b, b0)  # inputs untouched


def test_projection_in_place_gives_the_same_values() -> None:
    rng = np.random.default_rng(5)
    for scale in (1e-3, 1.0, 1e3, 2.0**60):
        v = rng.standard_normal(500) * scale
        ref = project_simplex_dense(v)
        w = v.copy()
        out = project_simplex_dense(w, overwrite=True)
        assert out is w and np.array_equal(out, ref)


def _sample_sparse_reference(support: np.ndarray, values: np.ndarray, floor: float, m: int, u: np.ndarray) -> np.ndarray:
    """The plain formula of :func:`sample_sparse` (every array computed, no shortcut)."""
    r = values - floor
    cum_r = np.cumsum(r)
    t = u * (floor * m + float(cum_r[-1]))
    start = floor * support + (cum_r - r)
    end = start + values
    k = np.searchsorted(start, t, side="right") - 1
    kk = np.maximum(k, 0)
    if floor > 0.0:
        nxt = np.append(support, m)
        before = np.minimum(t / floor, support[0] - 1.0).astype(np.intp)
        gap = support[kk] + 1 + np.clip(np.floor((t - end[kk]) / floor), 0.0, float(m)).astype(np.intp)
        gap = np.minimum(gap, nxt[kk + 1] - 1)
        out = np.where(k < 0, before, np.where(t < end[kk], support[kk], gap))
    else:
        out = support[kk]
    return np.clip(out, 0, m - 1).astype(np.intp)


def test_sparse_sampling_equals_the_plain_formula() -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        m = int(rng.integers(2, 5000))
        support = np.sort(rng.choice(m, size=int(rng.integers(1, min(m, 60) + 1)), replace=False)).astype(np.intp)
        values = rng.exponential(size=support.shape[0])
        # floor 0, a floor mass small enough that few draws fall between support entries, or a large one
        floor = 0.0 if rng.random() < 0.4 else float(rng.uniform(0.0, values.min())) * 10.0 ** -rng.uniform(0, 6)
        total = floor * (m - support.shape[0]) + values.sum()
        values, floor = values / total, floor / total
        u = rng.random(128)
        got = sample_sparse(support, values, floor, m, u)
        assert got.dtype == np.intp and np.array_equal(got, _sample_sparse_reference(support, values, floor, m, u))


def test_floor_threshold_equals_the_weighted_threshold_bit_for_bit() -> None:
    """The floor block's threshold counts its weights instead of summing them: the same tau."""
    from zoframe_constrained.simplex import _floor_threshold

    rng = np.random.default_rng(12)
    for _ in range(500):
        k = int(rng.integers(0, 80))
        values = np.empty(k + 1)
        values[:k] = rng.exponential(size=k) * rng.choice([1e-6, 1e-2, 1.0, 30.0])
        values[k] = float(rng.choice([0.0, rng.uniform(0.0, 1e-3), rng.uniform(0.0, 2.0)]))
        n_floor = int(rng.choice([1, int(rng.integers(1, 50)), int(rng.integers(1, 10**8))]))
        counts = np.ones(k + 1)
        counts[k] = float(n_floor)
        assert _floor_threshold(values.copy(), n_floor) == simplex_threshold(values, counts)


def _pz_reference(pz, h, eta: float, a: float, b: float):  # type: ignore[no-untyped-def]
    """pz_project, pz_average and pz_ema of the sparse form as plain expressions (every array new)."""
    from zoframe_constrained.simplex import PZ, _merge

    v = pz.p + eta * pz.z
    n_floor = pz.m - pz.support.shape[0]
    v_floor = pz.p_floor + eta * pz.z_floor
    if n_floor > 0:
        tau = simplex_threshold(np.append(v, v_floor), np.append(np.ones_like(v), float(n_floor)))
    else:
        tau = simplex_threshold(v)
    p_hat = v - tau
    p_hat[p_hat < FLUSH] = 0.0
    floor = v_floor - tau
    floor = floor if floor >= FLUSH else 0.0
    p = (1.0 - a) * pz.p + a * p_hat
    p_floor = (1.0 - a) * pz.p_floor + a * floor
    positive = h.gain > 0.0
    order = np.argsort(h.idx[positive])
    gained, gain = h.idx[positive][order], h.gain[positive][order]
    support, (p, z) = _merge(pz.support, gained, (p, p_floor), (pz.z, pz.z_floor))
    z = (1.0 - b) * z + b * (-h.lam * p)
    z[np.searchsorted(support, gained)] += b * gain
    z_floor = (1.0 - b) * pz.z_floor + b * (-h.lam * p_floor)
    return PZ(p, z, support, p_floor, z_floor, pz.m)


def _random_floor_support(rng: np.random.Generator) -> tuple[int, np.ndarray, np.ndarray, float]:
    """A random floor + support distribution: ``(m, S, p_S, floor)``, normalised to total mass 1."""
    m = int(rng.integers(2, 3000))
    k = int(rng.integers(0, min(m, 80) + 1))
    support = np.sort(rng.choice(m, size=k, replace=False)).astype(np.intp)
    values = rng.exponential(size=k)
    floor = float(rng.choice([0.0, rng.uniform(0.0, 1e-3)])) if k else float(rng.uniform(1e-6, 1e-3))
    total = values.sum() + floor * (m - k)
    return m, support, values / total, floor / total


def test_adszog_sparse_kernels_equal_the_plain_expressions_bit_for_bit() -> None:
    from zoframe_constrained.simplex import PZ, pz_average, pz_ema, pz_project

    rng = np.random.default_rng(13)
    for _ in range(300):
        m, support, p, p_floor = _random_floor_support(rng)
        pz = PZ(p, rng.standard_normal(support.shape[0]) * 1e-3, support, p_floor, float(rng.normal() * 1e-6), m)
        M3 = rng.choice(m, size=min(m, 20), replace=False).astype(np.intp)
        gain = np.where(rng.random(M3.shape[0]) < 0.5, 0.0, rng.exponential(size=M3.shape[0]))
        h = Ascent(idx=M3, gain=gain, lam=1e-6)
        eta, a, b = float(rng.uniform(1e-3, 1.0)), float(rng.uniform(0.1, 0.9)), float(rng.uniform(0.1, 0.9))
        got = pz_ema(pz_average(pz, pz_project(pz, eta), a), h, b)
        ref = _pz_reference(pz, h, eta, a, b)
        for field in ("p", "z", "support"):
            assert np.array_equal(getattr(got, field), getattr(ref, field)), field
        assert (got.p_floor, got.z_floor, got.m) == (ref.p_floor, ref.z_floor, ref.m)


def _ascent_sparse_reference(support, values, floor, m, eta, h):  # type: ignore[no-untyped-def]
    """ascent_sparse as plain expressions: merge, weighted threshold over [v, s floor], cut."""
    from zoframe_constrained.simplex import _gains, _merge

    idx, gain = _gains(h)
    s = 1.0 - eta * h.lam
    union, (v,) = _merge(support, idx, (s * values, s * floor))
    v[np.searchsorted(union, idx)] += eta * gain
    n_floor = m - union.shape[0]
    if n_floor > 0:
        tau = simplex_threshold(np.append(v, s * floor), np.append(np.ones_like(v), float(n_floor)))
    else:
        tau = simplex_threshold(v)
    new_floor = s * floor - tau
    new_floor = new_floor if new_floor >= FLUSH else 0.0
    new_v = v - tau
    new_v[new_v < FLUSH] = 0.0
    keep = new_v > new_floor
    return union[keep], new_v[keep], float(new_floor)


def test_sparse_ascent_equals_the_plain_expressions_bit_for_bit() -> None:
    rng = np.random.default_rng(14)
    for _ in range(300):
        m, support, values, floor = _random_floor_support(rng)
        M3 = rng.choice(m, size=min(m, int(rng.integers(1, 40))), replace=bool(rng.random() < 0.3)).astype(np.intp)
        h = Ascent(idx=M3, gain=np.where(rng.random(M3.shape[0]) < 0.5, 0.0, rng.exponential(size=M3.shape[0])), lam=1e-6)
        eta = float(rng.uniform(1e-3, 1.0))
        got = ascent_sparse(support, values, floor, m, eta, h)
        ref = _ascent_sparse_reference(support, values, floor, m, eta, h)
        assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1]) and got[2] == ref[2]
