"""DSZOG and ADSZOG as in the papers: accuracy on a convex problem with a known solution, cost, p on
the simplex, unbiasedness of the p-gradient estimator, dense = sparse iterates, and bad input.

Every run here uses the papers' fixed steps (``steps="paper"``, set by :func:`minimize` below
unless a test says otherwise); the default scale-free rule is tested in
``tests/test_constrained_robust.py``."""

from __future__ import annotations

from typing import Any
import warnings

import cvxpy as cp
import numpy as np
import pytest

import zoframe
from zoframe.errors import EstimatorUnderflowWarning, InvalidInputError, InvalidParameterError, NonFiniteValueError
from zoframe.oracle import CountingOracle
from zoframe_constrained.solvers import ADSZOG, DSZOG

SEEDS = range(5)


def minimize(*args: Any, **kwargs: Any) -> Any:
    """``zoframe.minimize`` with the papers' fixed steps unless ``steps`` is given."""
    kwargs.setdefault("steps", "paper")
    return zoframe.minimize(*args, **kwargs)


def convex_problem(seed: int = 0, d: int = 5, n: int = 60, m: int = 300) -> tuple[Any, np.ndarray, float]:
    """Least squares (values ~ 1) under ``m`` random unit-norm halfspaces; 5 are active at w*."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)) / np.sqrt(d)
    b = A @ np.ones(d) + 0.1 * rng.standard_normal(n)
    D = rng.standard_normal((m, d))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    e = rng.uniform(0.5, 1.5, m)

    def obj(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return (X @ A[idx].T - b[idx]) ** 2

    def con(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return X @ D[idx].T - e[idx]

    prob = zoframe.Constrained(obj, con, m=m, x0=np.zeros(d), n=n, convex_constraints=True)
    w = cp.Variable(d)
    ref = cp.Problem(cp.Minimize(cp.sum_squares(A @ w - b) / n), [D @ w <= e])
    ref.solve()
    assert ref.status == cp.OPTIMAL
    return prob, np.asarray(w.value), float(ref.value)


@pytest.fixture(scope="module")
def convex() -> tuple[Any, np.ndarray, float]:
    return convex_problem()


SOLVERS = [
    ("dszog", {"eta_w": 0.02, "eta_p": 0.01, "beta": 100.0}),
    ("adszog", {"eta_w": 0.01, "eta_p": 0.01, "beta": 100.0, "a": 0.5, "b": 0.5}),
]


@pytest.mark.parametrize(("name", "params"), SOLVERS)
def test_convex_known_solution_median_over_seeds(convex: tuple[Any, np.ndarray, float], name: str, params: dict[str, Any]) -> None:
    """After 2000 iterations, median over 5 seeds: |f0 - f*| <= 0.02, max violation <= 0.02, ||w - w*|| <= 0.08.

    Theory for the penalty minimax: the violation at the penalised solution is about
    sum(alpha*)/(2 beta) = 0.96/200 ~ 0.005 here, so 0.02 leaves room for the stochastic error.
    """
    prob, w_star, f_star = convex
    gaps, viols, dists = [], [], []
    for seed in SEEDS:
        r = minimize(prob, name, rng=seed, max_iter=2000, M1=16, M2=16, M3=32, record_every=0, **params)
        gaps.append(abs(r.fun - f_star))
        viols.append(r.measures["max_violation"])
        dists.append(float(np.linalg.norm(r.x - w_star)))
    assert np.median(gaps) <= 0.02, gaps
    assert np.median(viols) <= 0.02, viols
    assert np.median(dists) <= 0.08, dists
    # the start (w = 0) is far: this is real progress, not a lucky start
    assert np.linalg.norm(w_star) > 0.5


@pytest.mark.parametrize(("name", "params"), SOLVERS)
def test_p_stays_on_the_simplex_and_finds_the_active_constraints(
    convex: tuple[Any, np.ndarray, float], name: str, params: dict[str, Any]
) -> None:
    prob, w_star, _ = convex
    seen: list[np.ndarray] = []

    def cb(info: zoframe.IterationInfo) -> None:
        if info.iteration % 100 == 0:
            p = (DSZOG() if name == "dszog" else ADSZOG()).outputs(info.state)["p"]
            seen.append(np.array(p))

    r = minimize(prob, name, rng=1, max_iter=1000, M1=16, M2=16, M3=32, record_every=0, callback=cb, **params)
    seen.append(r.outputs["p"])
    for p in seen:
        assert p.shape == (prob.m,)
        assert p.min() >= 0.0
        assert abs(p.sum() - 1.0) <= 1e-9
    # p says which constraints are hard: most of its mass sits on the 5 (of 300) active at w*
    active = prob.constraints(w_star[None, :], np.arange(prob.m))[0] > -1e-6
    assert active.sum() == 5
    assert r.outputs["p"][active].sum() >= 0.5
    assert np.isin(np.argsort(r.outputs["p"])[-5:], np.flatnonzero(active)).sum() >= 3


@pytest.mark.parametrize("cls", [DSZOG, ADSZOG])
def test_calls_per_step_equal_the_declared_cost(convex: tuple[Any, np.ndarray, float], cls: type) -> None:
    prob, _, _ = convex
    solver = cls(M1=7, M2=9, M3=11, q=4, steps="paper")
    oracle = CountingOracle(prob)
    rng = np.random.default_rng(0)
    state = solver.init(oracle, prob.x0, rng)
    init_calls = oracle.calls
    expected_init = prob.m + (0 if cls is DSZOG else 5 * (7 + 9) + 11)
    assert init_calls == expected_init
    for _ in range(5):
        before = oracle.calls
        state = solver.step(oracle, state, rng)
        assert oracle.calls - before == solver.calls_per_step(oracle) == 5 * (7 + 9) + 11
    # one objective call and two constraint calls per step: objective = (q+1)|M1|
    assert oracle.calls_by_kind["objective"] == 5 * 5 * 7 + (0 if cls is DSZOG else 5 * 7)


def test_grad_p_estimator_is_unbiased() -> None:
    """E[H] = beta phi(w) - lambda p over the uniform draw of M3 (z-test per coordinate)."""
    rng = np.random.default_rng(0)
    m, d = 30, 3
    D = rng.standard_normal((m, d))
    w = rng.standard_normal(d)
    prob = zoframe.Constrained(lambda X: np.zeros(X.shape[0]), lambda X, idx: X @ D[idx].T, m=m, x0=w, n=1)
    oracle = CountingOracle(prob)
    solver = DSZOG(beta=2.0, lam=0.1, M3=7)
    p = rng.dirichlet(np.ones(m))
    phi = np.maximum(D @ w, 0.0) ** 2
    truth = solver.beta * phi - solver.lam * p
    draws = 6000
    samples = np.empty((draws, m))
    for k in range(draws):
        M3 = rng.choice(m, size=solver.M3, replace=False)
        h = solver.phases(oracle)[0].H(oracle, w, M3)
        dense = -h.lam * p
        np.add.at(dense, h.idx, h.gain)
        samples[k] = dense
    mean = samples.mean(axis=0)
    se = samples.std(axis=0, ddof=1) / np.sqrt(draws)
    nz = phi > 0
    np.testing.assert_allclose(mean[~nz], truth[~nz], rtol=1e-12)  # satisfied: H_j = -lambda p_j always
    z = (mean[nz] - truth[nz]) / se[nz]
    assert np.max(np.abs(z)) < 4.5, z  # 30 coordinates: P(max |z| > 4.5) < 1e-4 if unbiased
    assert nz.sum() >= 5


@pytest.mark.parametrize(
    ("name", "params"),
    [("dszog", {"beta": 100.0, "eta_w": 0.02}), ("adszog", {"beta": 100.0, "eta_w": 0.02, "a": 0.5, "b": 0.5})],
)
def test_dense_and_sparse_p_give_the_same_iterates(
    convex: tuple[Any, np.ndarray, float], name: str, params: dict[str, Any]
) -> None:
    prob, _, _ = convex
    runs = {}
    supports: list[int] = []
    for form in ("dense", "sparse"):
        xs = []

        def cb(info: zoframe.IterationInfo) -> None:
            xs.append(np.array(info.x))  # noqa: B023
            if form == "sparse":  # noqa: B023
                supports.append(-1 if info.state.inner.p_support is None else len(info.state.inner.p_support))

        r = minimize(
            prob, name, rng=7, max_iter=400, M1=16, M2=16, M3=32, p_form=form, record_every=0, callback=cb, **params
        )
        runs[form] = (np.array(xs), r.outputs["p"], r.nfev)
    xd, pd, nd = runs["dense"]
    xs_, ps, ns = runs["sparse"]
    assert nd == ns
    np.testing.assert_allclose(xs_, xd, rtol=0, atol=1e-10)
    np.testing.assert_allclose(ps, pd, rtol=0, atol=1e-12)
    assert min(s for s in supports if s >= 0) < prob.m // 4  # the sparse form was really used


def test_checkpoint_resume_with_the_sparse_form(tmp_path: Any, convex: tuple[Any, np.ndarray, float]) -> None:
    prob, _, _ = convex
    kw: dict[str, Any] = {"M1": 8, "M2": 8, "M3": 8, "p_form": "sparse", "record_every": 0}
    for name in ("dszog", "adszog"):
        straight = minimize(prob, name, rng=3, max_iter=40, **kw)
        minimize(prob, name, rng=3, max_iter=20, checkpoint=tmp_path / name, **kw)
        resumed = minimize(prob, name, max_iter=40, resume=tmp_path / name, **kw)
        np.testing.assert_array_equal(straight.x, resumed.x)
        np.testing.assert_array_equal(straight.outputs["p"], resumed.outputs["p"])


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (DSZOG, {"beta": 0.0}, "beta"),
        (DSZOG, {"beta": -1.0}, "beta"),
        (DSZOG, {"lam": 0.0}, "lambda"),
        (ADSZOG, {"lam": -1e-6}, "lambda"),
        (ADSZOG, {"a": 0.0}, "a"),
        (ADSZOG, {"a": 1.0}, "a"),
        (ADSZOG, {"b": 1.5}, "b"),
        (ADSZOG, {"b": -0.1}, "b"),
        (DSZOG, {"eta_w": float("nan")}, "eta_w"),
        (DSZOG, {"M2": 0}, "M2"),
        (DSZOG, {"q": 2.5}, "q"),
        (DSZOG, {"p_form": "tree"}, "p_form"),
        (DSZOG, {"eta_p": 10.0, "lam": 0.5}, "eta_p \\* lambda"),
    ],
)
def test_bad_hyper_parameters_are_refused(cls: type, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        cls(**kwargs)


@pytest.mark.parametrize(("name", "batch", "match"), [("dszog", {"M1": 61}, "M1=61"), ("adszog", {"M1": 16, "M3": 301}, "M3=301")])
def test_batches_larger_than_n_or_m_fail_before_any_evaluation(
    convex: tuple[Any, np.ndarray, float], name: str, batch: dict[str, int], match: str
) -> None:
    prob, _, _ = convex
    with pytest.raises(InvalidParameterError, match=match):
        minimize(prob, name, rng=0, max_iter=5, **batch)
    oracle = CountingOracle(prob)
    solver = (DSZOG if name == "dszog" else ADSZOG)(**batch)
    with pytest.raises(InvalidParameterError, match=match):
        solver.validate(oracle)
    assert oracle.calls == 0


def test_m2_larger_than_m_samples_with_replacement(convex: tuple[Any, np.ndarray, float]) -> None:
    prob, _, _ = convex
    r = minimize(prob, "dszog", rng=0, max_iter=3, M1=4, M2=1000, M3=4, q=2, record_every=0)
    assert r.nfev == prob.m + 3 * (3 * (4 + 1000) + 4)


def _nan_problem(where: str) -> Any:
    def con(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out = X @ np.ones((2, len(idx))) - 1.0
        if where == "always" or (where == "far" and np.abs(X).max() > 0.5):
            out[:, 0] = np.nan
        return out

    return zoframe.Constrained(lambda X: (X**2).sum(1), con, m=10, x0=np.zeros(2))


@pytest.mark.parametrize("name", ["dszog", "adszog"])
def test_nan_constraints_give_a_clear_error(name: str) -> None:
    # one rule at the first call and later: RunFailedError, the error as its cause, the result so far kept
    with pytest.raises(zoframe.RunFailedError) as info:
        minimize(_nan_problem("always"), name, rng=0, max_iter=5, M1=1, M2=2, M3=2)
    assert isinstance(info.value.__cause__, NonFiniteValueError) and "constraint" in str(info.value.__cause__)
    # with nonfinite="inf" the oracle passes +inf on: the solver refuses it with its own message,
    # at the start (closed-form p_1) or later in the run
    with pytest.raises(zoframe.RunFailedError) as info:
        minimize(_nan_problem("always"), name, rng=0, max_iter=5, M1=1, M2=2, M3=2, nonfinite="inf")
    assert isinstance(info.value.__cause__, NonFiniteValueError)
    assert "finite constraint values" in str(info.value.__cause__)
    assert info.value.result.nit == 0 and np.array_equal(info.value.result.x, np.zeros(2))
    with pytest.raises(zoframe.RunFailedError) as info:
        minimize(
            _nan_problem("far"), name, rng=0, max_iter=50, M1=1, M2=2, M3=2, mu=1.0, nonfinite="inf"
        )
    err = info.value.__cause__
    assert isinstance(err, NonFiniteValueError)
    assert "finite constraint values" in str(err)


def test_empty_constraint_set_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="m"):
        zoframe.Constrained(lambda X: X.sum(1), lambda X, idx: X[:, :0], m=0, x0=np.zeros(2))

    class NoConstraints:
        kind = "constrained"
        dim, n, m = 2, 1, 0
        x0 = np.zeros(2)

        def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
            return X.sum(1, keepdims=True)

        def constraints(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
            return X[:, :0]

    with pytest.raises(InvalidInputError, match="at least one constraint"):
        minimize(NoConstraints(), "dszog", rng=0, max_iter=2, M1=1)


def test_wrong_constraint_shape_is_reported() -> None:
    prob = zoframe.Constrained(
        lambda X, idx: np.zeros((X.shape[0], len(idx))), lambda X, idx: X[:, :1], m=5, x0=np.zeros(2), n=3
    )
    with pytest.raises(zoframe.RunFailedError) as info:
        minimize(prob, "adszog", rng=0, max_iter=2, M1=2, M2=3, M3=3)
    assert isinstance(info.value.__cause__, zoframe.ShapeError) and "shape" in str(info.value.__cause__)


# ---------------------------------------------------------------------- ending feasible
@pytest.mark.parametrize(("name", "params"), SOLVERS)
def test_feasibility_restoration_ends_within_tolerance(
    convex: tuple[Any, np.ndarray, float], name: str, params: dict[str, Any]
) -> None:
    """Median over 5 seeds: 1500 penalty steps + restoration end with max violation <= 1e-4 over ALL
    constraints (the problem's full pass) and an objective gap still <= 0.02."""
    prob, _, f_star = convex
    viols, gaps = [], []
    for seed in SEEDS:
        r = minimize(
            prob, name, rng=seed, max_iter=2500, M1=16, M2=16, M3=32, record_every=0,
            restore_after=1500, violation_tol=1e-4, **params,
        )  # fmt: skip
        # feasible, but a fixed number of penalty steps is a budget, not a stationarity certificate
        assert r.status is zoframe.Status.MAX_ITER and r.message.startswith("feasible"), r.message
        assert not r.success and "no stationarity certificate" in r.message
        assert "full pass" in r.message
        assert r.nit < 1500 + 10  # restoration is a few rounds, not a slow crawl
        assert float(r.outputs["max_violation"]) <= 1e-4
        assert float(r.outputs["violation_checked"]) == prob.m
        viols.append(r.measures["max_violation"])
        gaps.append(abs(r.fun - f_star))
    assert np.median(viols) <= 1e-4
    assert np.median(gaps) <= 0.02


def test_restoration_with_sampled_checks_says_so(convex: tuple[Any, np.ndarray, float]) -> None:
    prob, _, _ = convex
    r = minimize(
        prob, "adszog", rng=0, max_iter=1000, M1=16, M2=16, M3=32, record_every=0, beta=100.0,
        restore_after=500, violation_tol=1e-3, restore_sample=100,
    )  # fmt: skip
    assert "sampled: 100 constraints" in r.message
    assert float(r.outputs["violation_checked"]) == 100
    assert r.nfev_by_purpose["restore"] > 0


def test_restoration_gives_up_after_restore_rounds() -> None:
    """Infeasible constraints (x <= -1 and x >= 1): restoration stops and says the violation left."""
    prob = zoframe.Constrained(
        lambda X: (X**2).sum(1), lambda X, idx: np.stack([X[:, 0] + 1, 1 - X[:, 0]], axis=1)[:, idx],
        m=2, x0=np.zeros(1), convex_constraints=True,
    )  # fmt: skip
    r = minimize(prob, "dszog", rng=0, max_iter=100, M1=1, M2=2, M3=2, restore_after=5, restore_rounds=3)
    assert r.nit == 8
    assert r.message.startswith("feasibility restoration failed: max violation 1 > 0.001")
    assert r.status is zoframe.Status.FAILED and not r.success


@pytest.mark.parametrize(("kwargs", "match"), [({"restore_after": -1}, "restore_after"), ({"restore_every": 0}, "restore_every"), ({"violation_tol": 0.0}, "violation_tol"), ({"restore_sample": 0}, "restore_sample")])
def test_bad_restoration_parameters(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        DSZOG(**kwargs)


def test_restoration_keeps_the_objective_on_breast_cancer_pairwise() -> None:
    """The feasibility target: f0 <= 0.18 with max violation <= 1e-3 over all 18,868 pairs,
    reached by 400 adszog steps + restoration (median over 3 seeds)."""
    prob = zoframe.default_registry().make_problem("pairwise", dataset="breast-cancer")
    funs, viols = [], []
    for seed in range(3):
        r = minimize(
            prob, "adszog", rng=seed, max_iter=600, record_every=0, eta_w=0.03, restore_after=400,
            violation_tol=1e-3, restore_rounds=150,
        )  # fmt: skip
        assert r.message.startswith("feasible"), r.message
        funs.append(r.fun)
        viols.append(r.measures["max_violation"])
    assert np.median(viols) <= 1e-3
    assert np.median(funs) <= 0.18, funs


def test_divergence_is_reported_with_what_to_change() -> None:
    """Plain DSZOG with a fixed step too large for the penalty blows up: the run stops DIVERGED, with advice."""
    prob = zoframe.default_registry().make_problem("gen")
    with warnings.catch_warnings():  # on the way out, |w| ~ 1e10 may underflow the differences first: said, not fatal
        warnings.simplefilter("ignore", EstimatorUnderflowWarning)
        r = minimize(prob, "dszog", rng=0, max_iter=300, record_every=0, eta_w=0.05, lam=1e-6)
    assert r.status is zoframe.Status.DIVERGED and not r.success
    assert "diverged" in r.message and "lower eta_w" in r.message and "steps='auto'" in r.message
    assert r.nit < 300 and np.all(np.isfinite(r.x))


# ---------------------------------------------------------------------- restoration step and snapshots
def test_least_distance_step_is_the_projection_onto_the_halfspaces() -> None:
    """Known answers: one halfspace (closed form) and many random ones (cvxpy's projection)."""
    from zoframe_constrained.solvers import least_distance_step

    g = np.array([3.0, 4.0])
    np.testing.assert_allclose(least_distance_step(g[None, :], np.array([-1.0])), -g / 25.0, atol=1e-12)
    rng = np.random.default_rng(0)
    for k, d in ((3, 8), (40, 8), (400, 20)):
        G = rng.standard_normal((k, d))
        b = G @ rng.standard_normal(d) + rng.uniform(0.0, 0.5, k)  # feasible; 0 is not when some b < 0
        delta = cp.Variable(d)
        cp.Problem(cp.Minimize(cp.sum_squares(delta)), [G @ delta <= b]).solve()
        out = least_distance_step(G, b)
        assert float(np.max(G @ out - b)) <= 1e-8
        np.testing.assert_allclose(out, delta.value, atol=1e-5)


def test_least_distance_step_falls_back_on_inconsistent_rows() -> None:
    """x <= -1 and -x <= -1 have no solution: the least-squares step (here 0) instead of a crash."""
    from zoframe_constrained.solvers import least_distance_step

    out = least_distance_step(np.array([[1.0], [-1.0]]), np.array([-1.0, -1.0]))
    assert np.all(np.isfinite(out)) and abs(float(out[0])) < 1e-12


@pytest.mark.parametrize("error", [np.linalg.LinAlgError("Matrix is singular."), RuntimeError("too many iterations")])
def test_least_distance_step_survives_a_failing_nnls(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    """When NNLS fails, the step falls back to least squares on the violated rows instead of failing
    the run (the satisfied third row is not pulled onto its boundary)."""
    import zoframe_constrained.ldp as ldp

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(ldp, "nnls", broken)
    G = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    np.testing.assert_allclose(ldp.least_distance_step(G, np.array([-1.0, -1.0, 5.0])), [-1.0, -0.5], atol=1e-12)
    assert ldp.least_distance(G, np.array([-1.0, -1.0, 5.0]))[1] is None


def test_nnls_matches_scipy_on_random_and_degenerate_problems() -> None:
    """Lawson-Hanson NNLS against scipy's on 600 problems (duplicate, zero, opposite and integer
    columns among them): feasible (u >= 0) and a residual no larger than scipy's (1e-9 relative)."""
    from scipy.optimize import nnls as scipy_nnls

    from zoframe_constrained.ldp import nnls

    rng = np.random.default_rng(0)
    for trial in range(600):
        M, k = int(rng.integers(1, 25)), int(rng.integers(1, 60))
        E = rng.standard_normal((M, k))
        kind = trial % 5
        if kind == 1 and k > 3:
            E[:, 1] = E[:, 0]
        elif kind == 2 and k > 3:
            E[:, 2] = 0.0
        elif kind == 3 and k > 3:
            E[:, 3] = -E[:, 0]
        elif kind == 4:
            E = np.round(E)
        e = rng.standard_normal(M)
        ref = float(scipy_nnls(E, e, maxiter=50 * k)[1])
        u = nnls(E, e)
        assert u.min() >= 0.0
        assert float(np.linalg.norm(E @ u - e)) <= ref + 1e-9 * (1.0 + ref), (trial, M, k, kind)


def test_nnls_downdates_match_scipy_on_least_distance_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Least-distance programs of the restoration's shape (many rows, tens active): columns leave the
    passive set one or two at a time (the Givens downdate, not a new factorisation), and the answer
    has scipy's residual (1e-9 relative)."""
    from scipy.optimize import nnls as scipy_nnls

    from zoframe_constrained import ldp

    downdates = []
    real = ldp.qr_delete

    def spy(*args: Any, **kwargs: Any) -> Any:
        downdates.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(ldp, "qr_delete", spy)
    rng = np.random.default_rng(3)
    for _ in range(20):
        d, k = int(rng.integers(20, 60)), int(rng.integers(200, 600))
        G = rng.standard_normal((k, d))
        b = rng.standard_normal(k) - 1.0  # about a sixth violated at 0
        E = np.vstack([-G.T, -b[None, :]])
        e = np.zeros(d + 1)
        e[d] = 1.0
        ref = float(scipy_nnls(E, e, maxiter=50 * k)[1])
        u = ldp.nnls(E, e)
        assert u.min() >= 0.0
        assert float(np.linalg.norm(E @ u - e)) <= ref + 1e-9 * (1.0 + ref)
    assert downdates, "no column left the passive set by a downdate"


def test_nnls_says_when_it_runs_out_of_iterations() -> None:
    from zoframe_constrained.ldp import nnls

    rng = np.random.default_rng(1)
    with pytest.raises(RuntimeError, match="iterations"):
        nnls(rng.standard_normal((10, 30)), rng.standard_normal(10), maxiter=1)


def _halfspaces(seed: int, d: int, m: int, slack: float, spread: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``m`` random unit halfspaces ``D x <= e`` around a feasible point (slacks uniform in ``[0, slack]``) and
    a start ``x0`` at about ``spread`` from it: ``(D, e, x0)``."""
    rng = np.random.default_rng(seed)
    D = rng.standard_normal((m, d))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    x_in = rng.standard_normal(d)
    e = D @ x_in + rng.uniform(0.0, slack, m)  # x_in is feasible
    x0 = x_in + spread * rng.standard_normal(d) / np.sqrt(d)
    return D, e, x0


def test_restoration_with_thousands_of_violated_constraints_takes_few_rounds() -> None:
    """Hundreds of 20,000 random halfspaces around a feasible point violated at x0: restoration (all
    nearly active rows per round) is feasible over all constraints within 5 rounds and moves x no
    further than the exact projection onto the halfspaces (within 1%)."""
    d, m = 20, 20_000
    D, e, x0 = _halfspaces(1, d, m, slack=3.0, spread=0.3)
    assert 100 <= int(np.sum(D @ x0 > e)) <= 2000

    def con(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return X @ D[idx].T - e[idx]

    prob = zoframe.Constrained(lambda X: ((X - x0) ** 2).sum(1), con, m=m, x0=x0, convex_constraints=True)
    r = minimize(prob, "dszog", rng=0, max_iter=50, M1=1, M2=4, M3=4, restore_after=0, violation_tol=1e-6)
    assert r.message.startswith("feasible"), r.message
    assert r.nit <= 5
    assert float(np.max(D @ r.x - e)) <= 1e-6
    y = cp.Variable(d)
    cp.Problem(cp.Minimize(cp.sum_squares(y - x0)), [D @ y <= e - 5e-7]).solve(solver=cp.CLARABEL)
    assert np.linalg.norm(r.x - x0) <= 1.01 * np.linalg.norm(y.value - x0)


def test_restoration_rows_per_round_default_to_m_over_dim_within_4_and_16_dim() -> None:
    """The rows of a round: ``restore_batch`` when given, else ``m / dim`` clipped to ``[4 dim, 16 dim]``."""
    from types import SimpleNamespace

    from zoframe_constrained.restoration import row_budget
    from zoframe_constrained.solvers import ADSZOG, DSZOG

    for cls in (DSZOG, ADSZOG):
        settings = cls().restore_settings()
        assert row_budget(SimpleNamespace(dim=10, m=50), settings) == 40  # type: ignore[arg-type]
        assert row_budget(SimpleNamespace(dim=10, m=1_000), settings) == 100  # type: ignore[arg-type]
        assert row_budget(SimpleNamespace(dim=10, m=10**6), settings) == 160  # type: ignore[arg-type]
        assert row_budget(SimpleNamespace(dim=10, m=10**6), cls(restore_batch=7).restore_settings()) == 7  # type: ignore[arg-type]


def test_restoration_with_the_default_rows_per_round_uses_them_and_ends_feasible(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random halfspaces (d = 20, m = 2,000: ``m / dim`` = 100 rows per round, below ``16 dim`` = 320),
    hundreds violated at x0: every least-distance program has at most 100 rows, some have exactly 100,
    and the restoration ends feasible over all constraints, moving x at most 5% further than the exact
    projection onto the halfspaces."""
    import zoframe_constrained.restoration as restoration

    d, m = 20, 2_000
    D, e, x0 = _halfspaces(3, d, m, slack=1.0, spread=1.0)
    assert 100 <= int(np.sum(D @ x0 > e)) <= 1000

    def con(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return X @ D[idx].T - e[idx]

    rows: list[int] = []
    original = restoration.least_distance

    def counted(G: np.ndarray, b: np.ndarray) -> Any:
        rows.append(int(G.shape[0]))
        return original(G, b)

    monkeypatch.setattr(restoration, "least_distance", counted)
    prob = zoframe.Constrained(lambda X: ((X - x0) ** 2).sum(1), con, m=m, x0=x0, convex_constraints=True)
    r = minimize(prob, "dszog", rng=0, max_iter=50, M1=1, M2=4, M3=4, restore_after=0, violation_tol=1e-6)
    assert r.message.startswith("feasible"), r.message
    assert rows and max(rows) == 100, rows
    assert float(np.max(D @ r.x - e)) <= 1e-6
    y = cp.Variable(d)
    cp.Problem(cp.Minimize(cp.sum_squares(y - x0)), [D @ y <= e - 5e-7]).solve(solver=cp.CLARABEL)
    assert np.linalg.norm(r.x - x0) <= 1.05 * np.linalg.norm(y.value - x0)


@pytest.mark.parametrize("name", ["dszog", "adszog"])
def test_restore_every_keeps_feasible_snapshots_and_leaves_the_iterates_alone(
    convex: tuple[Any, np.ndarray, float], name: str
) -> None:
    """Snapshots every 100 steps: x_feasible is feasible over all constraints (checked here, not by the
    solver), was taken at step 300, and the penalty iterates are exactly those of a run without them."""
    prob, _, f_star = convex
    kw: dict[str, Any] = {"M1": 16, "M2": 16, "M3": 32, "beta": 100.0, "record_every": 0}
    plain = minimize(prob, name, rng=2, max_iter=300, **kw)
    snap = minimize(prob, name, rng=2, max_iter=300, restore_every=100, violation_tol=1e-4, **kw)
    np.testing.assert_array_equal(plain.x, snap.x)
    assert snap.nfev > plain.nfev and snap.nfev_by_purpose["restore"] > 0
    xf = np.asarray(snap.outputs["x_feasible"])
    full = prob.constraints(xf[None, :], np.arange(prob.m))[0]
    assert float(full.max()) <= 1e-4
    assert float(snap.outputs["feasible_max_violation"]) <= 1e-4
    assert float(snap.outputs["feasible_step"]) == 300
    assert float(snap.outputs["feasible_checked"]) == prob.m
    assert abs(float(prob.objective(xf[None, :], np.arange(prob.n)).mean()) - f_star) < 0.05
    assert "x_feasible" not in plain.outputs


def test_restore_every_resumes_from_a_checkpoint(tmp_path: Any, convex: tuple[Any, np.ndarray, float]) -> None:
    prob, _, _ = convex
    kw: dict[str, Any] = {"M1": 8, "M2": 8, "M3": 8, "record_every": 0, "restore_every": 15, "beta": 100.0}
    straight = minimize(prob, "adszog", rng=3, max_iter=40, **kw)
    minimize(prob, "adszog", rng=3, max_iter=20, checkpoint=tmp_path / "a", **kw)
    resumed = minimize(prob, "adszog", max_iter=40, resume=tmp_path / "a", **kw)
    np.testing.assert_array_equal(straight.outputs["x_feasible"], resumed.outputs["x_feasible"])
    np.testing.assert_array_equal(straight.x, resumed.x)


def _pairwise_cone(seed: int, n: int = 200, d: int = 20) -> tuple[Any, np.ndarray, np.ndarray]:
    """Pairwise constraints ``(x_neg - x_pos)^T w <= 0`` with one sample in both classes."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(X @ rng.standard_normal(d) + 0.8 * rng.standard_normal(n) > 0, 1.0, -1.0)
    X, y = np.vstack([X, X[:1]]), np.append(y, -y[0])  # the same sample with both labels
    pos, neg = X[y > 0], X[y < 0]
    D = (neg[None, :, :] - pos[:, None, :]).reshape(-1, d)
    w0 = 0.1 * rng.standard_normal(d)

    def con(W: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return W @ D[idx].T

    prob = zoframe.Constrained(lambda W: ((W - w0) ** 2).sum(1), con, m=D.shape[0], x0=w0, convex_constraints=True)
    return prob, D, w0


def test_restoration_resumes_from_a_checkpoint_with_its_active_set(tmp_path: Any) -> None:
    """A run checkpointed between restoration rounds resumes with the active set it had: the same
    rounds and the same final point as a straight run."""
    prob, _, _ = _pairwise_cone(0)
    kw: dict[str, Any] = {"M1": 1, "M2": 4, "M3": 4, "restore_after": 0, "violation_tol": 1e-6, "restore_batch": 40,
                          "record_every": 0}  # fmt: skip
    straight = minimize(prob, "dszog", rng=0, max_iter=100, **kw)
    assert straight.message.startswith("feasible") and straight.nit >= 4
    minimize(prob, "dszog", rng=0, max_iter=2, checkpoint=tmp_path / "c", **kw)
    resumed = minimize(prob, "dszog", max_iter=100, resume=tmp_path / "c", **kw)
    assert resumed.nit == straight.nit
    np.testing.assert_array_equal(resumed.x, straight.x)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_restoration_on_a_degenerate_pairwise_cone_with_a_small_row_budget(seed: int) -> None:
    """Pairwise ranking constraints ``(x_neg - x_pos)^T w <= 0`` with one sample in both classes (a
    constraint that is identically 0, so no step can push every row strictly below 0) and far more
    nearly active rows than ``restore_batch``: restoration (which keeps the previous active set and
    targets the boundary) ends feasible over all rows within 12 rounds (over 3 seeds), moving ``w`` at
    most 10% more than the exact projection onto the cone (cvxpy). Aiming every row at ``-violation_tol / 2`` makes
    these rows inconsistent; dropping the active set makes the steps undo each other."""
    prob, D, w0 = _pairwise_cone(seed)
    d = D.shape[1]
    f0 = D @ w0
    assert np.sum(f0 > -np.max(f0)) > 20 * d  # far more nearly active rows than the batch below
    r = minimize(
        prob, "dszog", rng=0, max_iter=100, M1=1, M2=4, M3=4, restore_after=0, violation_tol=1e-6,
        restore_batch=2 * d, restore_rounds=60,
    )  # fmt: skip
    assert r.message.startswith("feasible"), r.message
    assert r.nit <= 12, r.message
    assert float(np.max(D @ r.x)) <= 1e-6
    v = cp.Variable(d)
    cp.Problem(cp.Minimize(cp.sum_squares(v - w0)), [D @ v <= 0]).solve(solver=cp.CLARABEL)
    assert np.linalg.norm(r.x - w0) <= 1.10 * np.linalg.norm(v.value - w0)


def test_restoration_after_snapshots_starts_from_the_snapshot_active_set() -> None:
    """``restore_every`` and ``restore_after`` together: the final restoration starts from the active
    set of the last snapshot and still ends feasible over all rows."""
    prob, D, _ = _pairwise_cone(1)
    kw: dict[str, Any] = {"M1": 1, "M2": 4, "M3": 4, "violation_tol": 1e-6, "restore_batch": 40, "record_every": 0}
    both = minimize(prob, "dszog", rng=0, max_iter=200, restore_every=5, restore_after=10, **kw)
    assert both.message.startswith("feasible"), both.message
    assert float(np.max(D @ both.x)) <= 1e-6
    assert float(np.max(D @ both.outputs["x_feasible"])) <= 1e-6


@pytest.mark.parametrize("solver", [DSZOG, ADSZOG])
def test_batches_are_sorted_uniform_index_sets(solver: type) -> None:
    """M1 and M3 are :func:`uniform_subset` draws (one rng.random call each): sorted, distinct, read-only, and
    the same indices whether the kernel draws them or numpy does."""
    from zoframe_constrained import simplex
    from zoframe_constrained.simplex import uniform_subset, uniform_subsets

    prob, _, _ = convex_problem()
    oracle = CountingOracle(prob)
    M1, M3 = solver(M1=17, M3=23).phases(oracle)[0].batches(oracle, np.random.default_rng(4))
    ref = uniform_subsets(oracle.n, 17, oracle.m, 23, np.random.default_rng(4))
    assert np.array_equal(M1, ref[0]) and np.array_equal(M3, ref[1])
    for batch, size, total in ((M1, 17, oracle.n), (M3, 23, oracle.m)):
        assert batch.dtype == np.intp and not batch.flags.writeable and batch.shape == (size,)
        assert np.all(np.diff(batch) > 0) and batch[0] >= 0 and batch[-1] < total
    if simplex._K is not None:  # the compiled draws (both regimes: 4k < n and 4k >= n) give the same indices
        sizes = ((300, 23), (60, 17), (60, 45), (5, 5), (20000, 128), (284, 128))
        for n, k in sizes:
            for seed in range(20):
                a = uniform_subset(n, k, np.random.default_rng(seed), compiled=True)
                b = uniform_subset(n, k, np.random.default_rng(seed))
                assert np.array_equal(a, b), (n, k, seed)
                for n2, k2 in sizes:
                    pair = uniform_subsets(n, k, n2, k2, np.random.default_rng(seed), compiled=True)
                    ref = uniform_subsets(n, k, n2, k2, np.random.default_rng(seed))
                    assert np.array_equal(pair[0], ref[0]) and np.array_equal(pair[1], ref[1]), (n, k, n2, k2, seed)


def test_uniform_subsets_are_uniform() -> None:
    """Every k-subset equally likely (chi-square over all subsets, both regimes and the complement), and a full
    batch is the whole range without a draw."""
    from math import comb

    from zoframe_constrained.simplex import uniform_subset, uniform_subsets

    rng = np.random.default_rng(7)
    for n, k in ((9, 2), (6, 2), (6, 4), (5, 3)):  # 4k >= n (first distinct draws), k > n / 2 (complement)
        counts: dict[tuple[int, ...], int] = {}
        draws = 200 * comb(n, k)
        for _ in range(draws):
            key = tuple(int(i) for i in uniform_subset(n, k, rng))
            counts[key] = counts.get(key, 0) + 1
        assert len(counts) == comb(n, k)
        expected = draws / comb(n, k)
        chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
        dof = comb(n, k) - 1
        assert chi2 < dof + 5 * np.sqrt(2 * dof), (n, k, chi2, dof)
    hits = np.zeros(400)
    for _ in range(2000):  # 4k < n: i.i.d. draws with the repeated ones drawn again
        hits[uniform_subset(400, 10, rng)] += 1
    chi2 = float(((hits - 50.0) ** 2 / 50.0).sum())
    assert chi2 < 399 + 5 * np.sqrt(2 * 399)
    pairs: dict[tuple[int, ...], int] = {}
    for _ in range(200 * 36):  # two batches from one draw: each uniform, and independent of each other
        a, b = uniform_subsets(4, 1, 9, 1, rng)
        pairs[(int(a[0]), int(b[0]))] = pairs.get((int(a[0]), int(b[0])), 0) + 1
    chi2 = sum((c - 200.0) ** 2 / 200.0 for c in pairs.values())
    assert len(pairs) == 36 and chi2 < 35 + 5 * np.sqrt(2 * 35)
    state = rng.bit_generator.state
    assert np.array_equal(uniform_subset(7, 7, rng), np.arange(7)) and rng.bit_generator.state == state


@pytest.mark.parametrize("name", ["dszog", "adszog"])
def test_mu_reaches_a_given_estimator_but_q_is_refused(name: str) -> None:
    prob, _, _ = convex_problem()
    est = zoframe.GaussianEstimator(q=3, mu=1e-3)
    with pytest.raises(InvalidInputError, match="q=4"):
        minimize(prob, name, estimator=est, q=4, rng=0, max_iter=2)
    seen: list[float] = []

    class Recording(zoframe.GaussianEstimator):
        def estimate(
            self, fun: Any, x: np.ndarray, rng: np.random.Generator, *, mu: float | None = None,
            per_component: bool = False,
        ) -> Any:  # fmt: skip
            seen.append(float(mu) if mu is not None else float("nan"))
            return super().estimate(fun, x, rng, mu=mu, per_component=per_component)

    res = minimize(prob, name, estimator=Recording(q=3, mu=1e-3), mu=2.5e-4, rng=0, max_iter=3, M1=8, M2=8, M3=8)
    assert res.nit == 3 and seen and all(v == 2.5e-4 for v in seen)  # the solver's mu is the radius used


def test_weighted_terms_equal_the_stacked_product_bit_for_bit() -> None:
    from zoframe_constrained.penalty import _weighted_terms

    rng = np.random.default_rng(2)
    for k, b1, b2 in [(1, 5, 7), (11, 128, 128), (3, 1, 300)]:
        loss = rng.standard_normal((k, b1)) * 10.0 ** rng.integers(-100, 100, (k, b1))
        f = rng.standard_normal((k, b2)) * 10.0 ** rng.integers(-150, 150, (k, b2))
        weights = rng.uniform(0.0, 3.0, b1 + b2)
        f0 = f.copy()
        ref = np.hstack([loss, np.maximum(f, 0.0) ** 2]) * weights
        assert np.array_equal(_weighted_terms(loss, f, weights), ref)
        assert np.array_equal(f, f0)


@pytest.mark.parametrize("solver", [DSZOG, ADSZOG])
def test_p_star_equals_the_projected_expression_bit_for_bit(solver: type) -> None:
    prob, _, _ = convex_problem()
    oracle = CountingOracle(prob)
    s = solver(beta=3.0, lam=1e-4)
    w = np.full(5, 0.4)
    f = oracle.constraints(w, None)[0]
    p, c0 = s.phases(oracle)[0]._p_star(oracle, w)
    from zoframe_constrained.simplex import project_simplex_dense

    assert np.array_equal(p, project_simplex_dense(3.0 * np.maximum(f, 0.0) ** 2 / 1e-4))
    assert c0 == float(np.max(np.abs(f)))


def test_p_star_projection_in_place_equals_the_dense_projection_bit_for_bit() -> None:
    from zoframe_constrained.penalty import _project_in_place
    from zoframe_constrained.simplex import project_simplex_dense

    rng = np.random.default_rng(3)
    for t in range(2000):
        m = int(rng.integers(1, 200))
        kinds = (
            np.zeros(m),  # a feasible start: p* is uniform
            rng.random(m) * 10.0 ** int(rng.integers(-8, 7)),
            np.where(rng.random(m) < 0.9, 0.0, rng.random(m) * 10.0 ** int(rng.integers(-8, 8))),
            np.full(m, rng.random() / m) + rng.random(m) * 1e-12,
        )
        v = kinds[t % 4]
        assert project_simplex_dense(v.copy()).tobytes() == _project_in_place(v.copy()).tobytes()


def test_p_star_at_a_feasible_start_holds_one_m_vector() -> None:
    import tracemalloc

    from zoframe_constrained.problems import pairwise

    prob = pairwise("gen", n_samples=12000, seed=0)  # about 9 10^6 pairs, all satisfied at w = 0
    oracle = CountingOracle(prob)
    w = np.zeros(prob.dim)
    oracle.constraints(w, None)  # the oracle's own index of all constraints is not the solver's
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        p, _ = DSZOG().phases(oracle)[0]._p_star(oracle, w)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert np.all(p == p[0])
    vec = 8 * prob.m
    assert peak < 1.5 * vec + 16 * 2**20, f"peak {peak / 2**20:.0f} MiB for m-vectors of {vec / 2**20:.0f} MiB"


@pytest.mark.parametrize("solver", [DSZOG, ADSZOG])
def test_outputs_give_the_sparse_form_of_p_above_the_dense_limit(solver: type, monkeypatch: pytest.MonkeyPatch) -> None:
    from zoframe_constrained import penalty as penalty_mod
    from zoframe_constrained.simplex import densify

    prob, _, _ = convex_problem()
    dense = minimize(prob, solver.__name__.lower(), rng=1, max_iter=20, M1=8, M2=8, M3=8, p_form="sparse")
    monkeypatch.setattr(penalty_mod, "DENSE_P_MAX", 299)  # m = 300 counts as huge
    sparse = minimize(prob, solver.__name__.lower(), rng=1, max_iter=20, M1=8, M2=8, M3=8, p_form="sparse")
    assert "p" in dense.outputs and "p" not in sparse.outputs
    out = sparse.outputs
    assert out["p_support"].shape == out["p_values"].shape and out["p_support"].shape[0] < 300
    assert np.array_equal(densify(out["p_support"], out["p_values"], float(out["p_floor"]), 300), dense.outputs["p"])
    assert np.array_equal(sparse.x, dense.x)
