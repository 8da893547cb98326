"""The pairwise, gen and fairness problems: sizes of the papers' tables, vectorised values against
brute force, white-box structure, exact violation measures, reproducible splits, bad input."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe.errors import DataNotFoundError, InvalidInputError
from zoframe.oracle import CountingOracle
from zoframe_constrained.problems import FAIRNESS_SETS, PairwiseProblem, fairness, gen, pairwise


def _small_pairwise(**kw: Any) -> PairwiseProblem:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 4))
    y = np.where(rng.random(60) < 0.4, 1.0, -1.0)
    return pairwise(X=X, y=y, n_samples=None, **kw)


def test_pairwise_values_against_brute_force() -> None:
    prob = _small_pairwise(margin=0.1, loss_c=0.7)
    d = prob.data
    pos, neg = d.X_train[d.y_train == 1], d.X_train[d.y_train == -1]
    assert prob.m == len(pos) * len(neg) and prob.n == len(d.y_train) == 30
    rng = np.random.default_rng(1)
    W = rng.standard_normal((3, 4))
    for b in (5, prob.m):  # both code paths: gather rows, or score every sample then gather
        idx = rng.choice(prob.m, size=b, replace=False)
        got = prob.constraints(W, idx)
        want = np.array([[(neg[k % len(neg)] - pos[k // len(neg)]) @ w + 0.1 for k in idx] for w in W])
        np.testing.assert_allclose(got, want, atol=1e-12)
    idx = np.arange(prob.n)
    want = np.array([[0.49 * (1 - np.exp(-((d.y_train[i] - d.X_train[i] @ w) ** 2) / 0.49)) for i in idx] for w in W])
    np.testing.assert_allclose(prob.components(W, idx), want, atol=1e-12)


def test_pairwise_white_box_structure_and_exact_violations() -> None:
    prob = _small_pairwise(margin=0.05, black_box_constraints=False)
    w = np.random.default_rng(2).standard_normal(4)
    D, e = prob.linear_constraints()
    allc = prob.constraints(w[None, :], np.arange(prob.m))[0]
    np.testing.assert_allclose(D @ w - e, allc, atol=1e-12)
    idx = np.array([0, 7, prob.m - 1])
    np.testing.assert_allclose(prob.constraint_gradients(w, idx), D[idx])
    v = np.maximum(allc, 0.0)
    got = prob.violations(w)
    assert got["max_violation"] == pytest.approx(v.max(), abs=1e-12)
    assert got["mean_violation"] == pytest.approx(v.mean(), abs=1e-12)
    assert got["frac_violated"] == pytest.approx(np.mean(allc > 0), abs=1e-12)
    assert got["constraints_checked"] == prob.m
    oracle = CountingOracle(prob)
    assert oracle.has_linear_constraints
    # component gradients against central differences
    ids = np.arange(5)
    h = 1e-6
    E = np.eye(4)
    fd = np.stack(
        [(prob.components((w + h * E[k])[None], ids) - prob.components((w - h * E[k])[None], ids))[0] / (2 * h) for k in range(4)],
        axis=1,
    )
    np.testing.assert_allclose(prob.component_gradients(w, ids), fd, atol=1e-6)
    ms = prob.measures({"x": w}, oracle.monitor)
    assert {"fun", "test_accuracy", "val_accuracy", "train_accuracy", "max_violation"} <= set(ms)
    assert oracle.calls == 0 and oracle.calls_by_purpose["monitor"] == prob.n


@pytest.mark.parametrize(
    ("dataset", "dim", "m_range"),
    [pytest.param("a9a", 123, (40_000, 50_000), marks=pytest.mark.data("a9a")),
     pytest.param("w8a", 300, (6_000, 9_000), marks=pytest.mark.data("w8a")),
     pytest.param("svmguide3", 22, (40_000, 50_000), marks=pytest.mark.data("svmguide3")),
     ("gen", 50, (55_000, 65_000)), ("breast-cancer", 31, (18_000, 20_000))],
)  # fmt: skip
def test_pairwise_sizes_match_the_paper(dataset: str, dim: int, m_range: tuple[int, int]) -> None:
    prob = pairwise(dataset, seed=3)
    assert prob.dim == dim
    assert m_range[0] <= prob.m <= m_range[1]
    n_total = 569 if dataset == "breast-cancer" else 1000
    sizes = [len(prob.data.y_train), len(prob.data.y_test), len(prob.data.y_val)]
    assert sum(sizes) == n_total
    assert abs(sizes[0] - 0.5 * n_total) <= 2 and abs(sizes[1] - 0.3 * n_total) <= 2


@pytest.mark.data("svmguide3")
def test_splits_are_reproducible_and_seeded() -> None:
    a, b, c = pairwise("svmguide3", seed=1), pairwise("svmguide3", seed=1), pairwise("svmguide3", seed=2)
    np.testing.assert_array_equal(a.data.X_train, b.data.X_train)
    assert not np.array_equal(a.data.X_train, c.data.X_train)
    assert gen(seed=4).m == pairwise("gen", seed=4).m


@pytest.mark.parametrize("name", sorted(FAIRNESS_SETS))
def test_fairness_sizes_and_values(name: str) -> None:
    prob = fairness(name, seed=0)
    dim, r = FAIRNESS_SETS[name]
    assert (prob.dim, prob.r, prob.m, prob.n) == (dim, r, 4 * r, 1000)
    assert not prob.convex_constraints
    w = np.random.default_rng(5).standard_normal(dim) * 0.1
    X, y, Z = prob.data.X_train, prob.data.y_train, prob.Z
    h = X @ w
    g1 = np.minimum(0, (1 + y) / 2 * y * h)
    g2 = np.minimum(0, (1 - y) / 2 * h)
    cov1 = ((Z - Z.mean(0)) * g1[:, None]).mean(0)
    cov2 = ((Z - Z.mean(0)) * g2[:, None]).mean(0)
    want = np.concatenate([cov1 - prob.c, -cov1 - prob.c, cov2 - prob.c, -cov2 - prob.c])
    np.testing.assert_allclose(prob.constraints(w[None], np.arange(prob.m))[0], want, atol=1e-12)
    # gradients against central differences (the point is generic: no kink within h)
    idx = np.arange(prob.m)
    step = 1e-6
    k = 3
    e = np.zeros(dim)
    e[k] = step
    fd = (prob.constraints((w + e)[None], idx) - prob.constraints((w - e)[None], idx))[0] / (2 * step)
    np.testing.assert_allclose(prob.constraint_gradients(w, idx)[:, k], fd, atol=1e-6)


def test_fairness_constraints_bind_and_are_learnable() -> None:
    """The unconstrained-ish start violates nothing (w = 0); a trained classifier is well above chance."""
    prob = fairness("D1", seed=0)
    res = zoframe.minimize(
        prob, "adszog", rng=0, max_iter=300, M1=128, M2=10, M3=10, eta_w=0.01, record_every=0, steps="paper"
    )
    assert res.measures["test_accuracy"] >= 0.75
    assert res.measures["constraints_checked"] == prob.m


def test_unconstrained_hinge_matches_cvxpy() -> None:
    import cvxpy as cp

    from zoframe_constrained.problems import unconstrained_hinge

    prob = fairness("D1", seed=0)
    X, y = prob.data.X_train, prob.data.y_train
    w = cp.Variable(X.shape[1])
    ref = cp.Problem(cp.Minimize(cp.sum(cp.pos(1 - cp.multiply(y, X @ w))) / X.shape[0]))
    ref.solve(solver=cp.CLARABEL)
    ours = unconstrained_hinge(X, y)
    assert float(np.mean(np.maximum(0.0, 1.0 - y * (X @ ours)))) <= ref.value + 1e-7


def test_fairness_thresholds_relative_to_the_unconstrained_classifier() -> None:
    """Zafar et al.'s calibration: c_rel = 1 keeps w_unc feasible; c_rel = 0.5 cuts every nonzero
    covariance of w_unc in half, so w_unc violates the constraints by exactly half of it."""
    from zoframe_constrained.problems import calibrated_thresholds, unconstrained_hinge

    base = fairness("D2", seed=0)
    w = unconstrained_hinge(base.data.X_train, base.data.y_train)
    idx = np.arange(base.m)
    full = fairness("D2", seed=0, c_rel=1.0)
    half = fairness("D2", seed=0, c_rel=0.5)
    assert np.shape(full.c) == (base.m,) and np.all(np.asarray(full.c) >= 0)
    assert float(full.constraints(w[None], idx)[0].max()) <= 1e-12
    v = half.constraints(w[None], idx)[0]
    np.testing.assert_allclose(v.max(), 0.5 * float(np.max(full.c)), rtol=1e-9)
    np.testing.assert_allclose(calibrated_thresholds(base, 0.25), 0.25 * np.asarray(full.c), rtol=1e-9)
    with pytest.raises(InvalidInputError, match="not both"):
        fairness("D1", c=0.1, c_rel=0.5)
    with pytest.raises(InvalidInputError, match="c_rel"):
        fairness("D1", c_rel=-1.0)
    with pytest.raises(InvalidInputError, match="one per constraint"):
        dataclasses.replace(base, c=np.ones(3))
    with pytest.raises(InvalidInputError, match="one per constraint"):
        dataclasses.replace(base, c=-np.ones(base.m))


@pytest.mark.data("svmguide3")
def test_kernel_variants() -> None:
    prob = pairwise("svmguide3", kernel="rbf", landmarks=40)
    assert prob.dim == 40 and prob.name.endswith("-rbf")
    assert np.all((prob.data.X_train > 0) & (prob.data.X_train <= 1))
    f = fairness("D1", kernel="rbf", landmarks=30, gamma=0.01)
    assert f.dim == 30 and f.m == 40


def test_bad_input() -> None:
    with pytest.raises(InvalidInputError, match="kernel"):
        pairwise("svmguide3", kernel="poly")
    with pytest.raises(InvalidInputError, match="D1"):
        fairness("D9")
    with pytest.raises(InvalidInputError, match="loss_c"):
        pairwise("svmguide3", loss_c=0.0)
    with pytest.raises(InvalidInputError, match="both classes"):
        pairwise(X=np.ones((10, 2)), y=np.ones(10), n_samples=None)
    with pytest.raises(InvalidInputError, match="X and y"):
        pairwise(X=np.ones((10, 2)))
    with pytest.raises(DataNotFoundError):
        pairwise("no-such-dataset-file")
