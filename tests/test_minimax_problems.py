"""The minimax problems of zoframe_minimax: ``ncsc`` (synthetic) and ``dro`` (section 5 DRO)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zoframe import CountingOracle, InvalidInputError, default_registry
from zoframe.measures import central_difference_gradient
from zoframe_minimax.problems import DRO, NCSC, PAPER_SIZES, dro


def _random_point(problem: Any, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = 0.5 * rng.standard_normal(problem.dim)
    y = rng.random(problem.dim_y)
    if problem.y_set is not None:
        y = problem.y_set.project(y)
    return x, y


def _check_white_box(problem: Any, seed: int = 0) -> None:
    """Gradients, y*, g and grad g against central differences and a local search."""
    rng = np.random.default_rng(seed)
    x, y = _random_point(problem, rng)
    idx = np.arange(problem.n)
    gx, gy = problem.minimax_gradients(x, y, idx)
    num_x = central_difference_gradient(lambda X: problem.values(X, np.repeat(y[None], len(X), 0), idx), x)
    num_y = central_difference_gradient(lambda Y: problem.values(np.repeat(x[None], len(Y), 0), Y, idx), y)
    assert np.allclose(gx, num_x, atol=1e-7)
    assert np.allclose(gy, num_y, atol=1e-7)
    # y*(x) maximises f(x, .) over Y: no feasible perturbation does better
    ys = problem.y_star(x)
    f0 = problem.values(x[None], ys[None], idx).mean()
    for _ in range(50):
        cand = ys + 1e-2 * rng.standard_normal(problem.dim_y)
        if problem.y_set is not None:
            cand = problem.y_set.project(cand)
        assert problem.values(x[None], cand[None], idx).mean() <= f0 + 1e-12
    assert problem.g(x) == pytest.approx(f0, rel=1e-12, abs=1e-12)
    num_g = central_difference_gradient(lambda X: np.array([[problem.g(r)] for r in X]), x)[0]
    assert np.allclose(problem.grad_g(x), num_g, atol=1e-6)  # Danskin


@pytest.mark.parametrize("y_set", [None, "box", "ball", "simplex"])
def test_ncsc_white_box(y_set: str | None) -> None:
    _check_white_box(NCSC(d1=6, d2=3, kappa=5, n=4, y_set_name=y_set, seed=1))


def test_ncsc_kappa_and_concavity() -> None:
    p = NCSC(d1=8, d2=3, kappa=20, seed=0)
    assert p.tau == pytest.approx(p.ell / 20)
    # the Hessian norm bound ell: every Hessian of f has norm <= ell = 2 at random points
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = 3 * rng.standard_normal(8)
        wpp = (1 - x * x) / (1 + x * x) ** 2
        H = np.block([[np.diag(wpp), p.B.T], [p.B, -p.tau * np.eye(3)]])
        assert np.linalg.norm(H, 2) <= p.ell + 1e-12
    with pytest.raises(InvalidInputError, match="kappa"):
        NCSC(kappa=1.5)
    with pytest.raises(InvalidInputError, match="y_set"):
        NCSC(y_set_name="cube")


def test_dro_white_box_small() -> None:
    rng = np.random.default_rng(0)
    S = rng.standard_normal((12, 5))
    z = np.where(rng.random(12) < 0.25, 1.0, -1.0)
    z[:2] = (1.0, -1.0)
    _check_white_box(DRO(S, z))


def test_dro_values_are_the_section5_objective() -> None:
    rng = np.random.default_rng(1)
    S = rng.standard_normal((7, 4))
    z = np.array([1.0, -1, -1, -1, 1, -1, -1])
    p = DRO(S, z, lam=10.0)
    x = rng.standard_normal(4)
    y = p.y_set.project(rng.random(7))
    direct = sum(y[i] * np.log(1 + np.log(1 + np.exp(-z[i] * x @ S[i]))) for i in range(7))
    direct -= 10 * np.sum((y - 1 / 7) ** 2)
    assert p.values(x[None], y[None], np.arange(7)).mean() == pytest.approx(direct, rel=1e-12)
    assert p.f(x, y) == pytest.approx(direct, rel=1e-12)


def test_dro_bad_input() -> None:
    with pytest.raises(InvalidInputError, match="labels must be -1 or \\+1"):
        DRO(np.ones((3, 2)), np.array([0.0, 1.0, 2.0]))
    with pytest.raises(InvalidInputError, match="3 labels for 4 samples"):
        DRO(np.ones((4, 2)), np.ones(3))
    with pytest.raises(InvalidInputError, match="lam"):
        DRO(np.ones((3, 2)), np.ones(3), lam=0.0)


@pytest.mark.parametrize("dataset", [pytest.param(d, marks=pytest.mark.data(d)) for d in sorted(PAPER_SIZES)])
def test_dro_datasets_paper_sizes(dataset: str) -> None:
    p = dro(dataset, seed=0)
    expected_d = {"a9a": 123, "mushrooms": 112, "w8a": 300, "colon-cancer": 2000}[dataset]
    assert (p.n, p.dim) == (PAPER_SIZES[dataset], expected_d)
    positives = int((p.labels > 0).sum())
    if dataset == "colon-cancer":
        assert positives == 22  # all 62 rows: 22 positive, 40 negative (1:3 is not attainable)
    else:
        assert positives * 4 == p.n  # 1:3 positive:negative
    q = dro(dataset, seed=0)
    assert np.array_equal(p.features, q.features)  # seeded


@pytest.mark.data("mushrooms")
def test_dro_subsample_depends_on_seed_and_measures() -> None:
    a, b = dro("mushrooms", seed=0), dro("mushrooms", seed=1)
    assert not np.array_equal(a.features, b.features)
    oracle = CountingOracle(a)
    m = a.measures({"x": a.x0, "y": a.y0}, oracle.monitor)
    assert {"fun", "g", "grad_g_norm", "y_mapping_norm", "grad_x_norm", "dist_y_star"} <= set(m)
    assert m["g"] >= m["fun"] - 1e-12  # g(x) = max_y f(x, y)
    assert m["primal"] == m["g"]  # the primal value under its plain name
    assert oracle.calls == 0  # measures are not budgeted


def test_problems_are_registered() -> None:
    reg = default_registry()
    p = reg.make_problem("ncsc", d1=4, d2=2, kappa=3)
    assert p.dim == 4 and p.dim_y == 2


@pytest.mark.data("mushrooms")
def test_dro_is_registered() -> None:
    q = default_registry().make_problem("dro", dataset="mushrooms", n=40)
    assert q.n == 40 and int((q.labels > 0).sum()) == 10


def test_ncsc_primal_measure_is_max_over_y() -> None:
    """``fun`` is F(x, y) at the given y; ``primal`` is g(x) = max_y F(x, y): equal only at y = y*(x)."""
    p = default_registry().make_problem("ncsc")
    oracle = CountingOracle(p)
    x = p.x0 + 0.5
    at_y0 = p.measures({"x": x, "y": p.y0}, oracle.monitor)
    at_star = p.measures({"x": x, "y": p.y_star(x)}, oracle.monitor)
    assert at_y0["primal"] > at_y0["fun"] + 1e-6  # y0 is not the maximiser: fun sits below g(x)
    assert at_star["primal"] == pytest.approx(at_star["fun"], rel=1e-9, abs=1e-12)
    assert at_y0["primal"] == pytest.approx(at_star["primal"], rel=1e-12)  # g depends on x only
