"""The composite peers ``prox-fd`` and ``dfols``, and the residuals capability ``dfols`` reads.

Residuals: ``residuals=`` of ``FiniteSum`` / ``Composite`` (checked against ``fun`` at ``x0``), and
``oracle.residuals`` (one residual = one evaluation of kind ``objective``; budget, shapes, non-finite
policy, purpose). The peers: lasso problems with a closed-form solution (orthogonal design:
``A^T A = n I`` makes ``f(x) = |x|^2 - 2 c^T x + const`` with ``c = A^T b / n``, so that the lasso
``f + w |x|_1`` is solved by ``soft(c, w / 2)``), certified successes, exact budgets, honest statuses,
refusals with the argument to give, and a missing DFO-LS naming its extra.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe._optional import MissingDependencyError
from zoframe.errors import BudgetExhausted, IncompatibleProblemError, InvalidInputError, NonFiniteValueError
from zoframe.oracle import CountingOracle
from zoframe.penalties import L1, SquaredL2
from zoframe.result import Status

N, D = 24, 5


def _design(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A`` ``(N, D)`` with ``A^T A = N I``, ``b``, and ``c = A^T b / N``."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((N, D)))
    A = np.sqrt(N) * Q
    b = A @ np.array([1.0, -0.8, 0.0, 0.05, 0.6]) + 0.05 * rng.standard_normal(N)
    return A, b, A.T @ b / N


def _soft(v: np.ndarray, t: float) -> np.ndarray:
    return np.asarray(np.sign(v) * np.maximum(np.abs(v) - t, 0.0))


def _lasso(weight: float = 0.2, *, coupling: str = "identity", residuals: bool = True, seed: int = 0) -> tuple[Any, np.ndarray]:
    """The orthogonal-design lasso as a composite problem, and its solution.

    ``identity``: ``x - y = 0``, ``psi = weight |.|_1`` (solution ``soft(c, weight / 2)``);
    ``double``: ``2 x - y = 0`` (``y = 2 x``: ``h = 2 weight |x|_1``, solution ``soft(c, weight)``);
    ``blocks``: ``x - (y_0, y_1) = 0`` with ``weight |y_0|_1`` on the first two coordinates and
    ``(weight / 2) |y_1|^2`` on the others (solution ``soft(c, weight / 2)``, then ``c / (1 + weight / 2)``).
    """
    A, b, c = _design(seed)

    def fun(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        r = X @ A[idx].T - b[idx]
        return np.asarray(r * r)

    def res(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.asarray(X @ A[idx].T - b[idx])

    kw: dict[str, Any] = {"n": N, "x0": np.zeros(D), "residuals": res if residuals else None}
    eye = np.eye(D)
    if coupling == "identity":
        prob = zoframe.Composite(fun, A=eye, B=[-eye], c=np.zeros(D), penalties=[L1(weight)], **kw)
        return prob, _soft(c, weight / 2)
    if coupling == "double":
        prob = zoframe.Composite(fun, A=2 * eye, B=[-eye], c=np.zeros(D), penalties=[L1(weight)], **kw)
        return prob, _soft(c, weight)
    B0, B1 = -eye[:, :2], -eye[:, 2:]
    prob = zoframe.Composite(fun, A=eye, B=[B0, B1], c=np.zeros(D), penalties=[L1(weight), SquaredL2(weight)], **kw)
    return prob, np.concatenate([_soft(c[:2], weight / 2), c[2:] / (1 + weight / 2)])


# --------------------------------------------------------------------------- the residuals capability
def test_residuals_are_counted_as_objective_evaluations() -> None:
    prob, _ = _lasso()
    oracle = CountingOracle(prob, max_calls=3 * N - 1)
    X = np.ones((2, D))
    R = oracle.residuals(X, purpose="peer")
    assert R.shape == (2, N) and np.allclose(R * R, prob.components(X, np.arange(N)), rtol=1e-12)
    assert oracle.residuals(X[0], [3, 1]).shape == (1, 2)
    assert oracle.calls == 2 * N + 2 and oracle.calls_by_kind == {"objective": 2 * N + 2}
    assert oracle.calls_by_purpose == {"peer": 2 * N, "estimate": 2}
    with pytest.raises(BudgetExhausted):  # N more do not fit: refused before any evaluation
        oracle.residuals(X[0])
    assert oracle.calls == 2 * N + 2


def test_residual_forms_follow_fun_and_are_checked_at_x0() -> None:
    A, b, _ = _design()
    one = zoframe.FiniteSum(lambda X: ((X - 1.0) ** 2).sum(axis=1), x0=np.zeros(2),
                            residuals=lambda X: np.sqrt(((X - 1.0) ** 2).sum(axis=1)))
    assert CountingOracle(one).residuals(np.array([1.0, 4.0]))[0, 0] == pytest.approx(3.0)
    scalar = zoframe.FiniteSum(lambda x, i: float(A[i] @ x - b[i]) ** 2, n=N, x0=np.zeros(D), vectorized=False,
                               residuals=lambda x, i: float(A[i] @ x - b[i]))
    assert np.allclose(CountingOracle(scalar).residuals(np.ones(D), [0, 5])[0], A[[0, 5]].sum(axis=1) - b[[0, 5]])
    with pytest.raises(InvalidInputError, match=r"l_i\(x\) = r_i\(x\)\^2"):  # half squares: the wrong scale
        zoframe.FiniteSum(lambda X, idx: 0.5 * (X @ A[idx].T - b[idx]) ** 2, n=N, x0=np.zeros(D),
                          residuals=lambda X, idx: X @ A[idx].T - b[idx])
    with pytest.raises(InvalidInputError, match="residuals is called as residuals"):
        zoframe.FiniteSum(lambda X, idx: (X @ A[idx].T) ** 2, n=N, x0=np.zeros(D), residuals=lambda X: X.sum(1))
    plain = zoframe.FiniteSum(lambda X: (X * X).sum(axis=1), x0=np.ones(2))
    assert not CountingOracle(plain).has_residuals
    with pytest.raises(InvalidInputError, match="residuals="):
        CountingOracle(plain).residuals(np.ones(2))


def test_nonfinite_residuals_follow_the_policy() -> None:
    prob = zoframe.FiniteSum(lambda X: np.where(X[:, 0] > 1, np.nan, X[:, 0] ** 2), x0=np.zeros(1),
                             residuals=lambda X: np.where(X[:, 0] > 1, np.nan, X[:, 0]))
    with pytest.raises(NonFiniteValueError, match="the residual function returned nan"):
        CountingOracle(prob).residuals(np.array([[2.0]]))
    assert CountingOracle(prob, nonfinite="inf").residuals(np.array([[2.0]]))[0, 0] == np.inf


# --------------------------------------------------------------------------- accuracy
@pytest.mark.parametrize("coupling", ["identity", "double", "blocks"])
def test_prox_fd_solves_the_lasso_to_the_closed_form(coupling: str) -> None:
    prob, xstar = _lasso(coupling=coupling)
    res = zoframe.minimize(prob, "prox-fd", rng=0, max_calls=N * 4000)
    assert res.success and res.status is Status.CONVERGED, res.message
    assert np.abs(res.x - xstar).max() <= 1e-6
    assert np.array_equal(res.x == 0.0, xstar == 0.0)  # the prox gives exact zeros where the solution has them
    assert res.certificate is not None and res.certificate["kind"] == "composite"
    assert res.nfev % N == 0 and res.nfev_by_kind == {"objective": res.nfev}
    # the outputs the ADMM solvers give: the blocks y_j = M_j x + e_j and lam
    M = 2.0 if coupling == "double" else 1.0
    y = np.concatenate([res.outputs[f"y{j}"] for j in range(len(prob.B))])
    assert np.allclose(y, M * res.x, rtol=0, atol=1e-15) and res.outputs["lam"].shape == (D,)


@pytest.mark.parametrize("coupling", ["identity", "blocks"])
def test_dfols_solves_the_lasso_to_the_closed_form(coupling: str) -> None:
    """DFO-LS's regularised steps (smoothed FISTA, 500 iterations) reach about 1e-4 here (seeds 0-3: 5e-5 to
    1.5e-4, certificate residuals 1.8e-4 to 4.9e-4); its y_j are x_j rounded by the prox at rho_end."""
    prob, xstar = _lasso(0.5, coupling=coupling)
    res = zoframe.minimize(prob, "dfols", rng=0, max_calls=N * 2000)
    assert res.success and res.status is Status.CONVERGED, res.message
    assert np.abs(res.x - xstar).max() <= 5e-4
    assert res.nfev % N == 0 and res.nfev_by_kind == {"objective": res.nfev}
    y = np.concatenate([res.outputs[f"y{j}"] for j in range(len(prob.B))])
    assert np.abs(y - res.x).max() <= 1e-8 and np.array_equal(y == 0.0, xstar == 0.0)


# --------------------------------------------------------------------------- budgets
@pytest.mark.parametrize("solver", ["prox-fd", "dfols"])
def test_budget_is_exact_and_a_budget_stop_is_no_success(solver: str) -> None:
    prob, _ = _lasso()
    budget = N * 9 + 5
    res = zoframe.minimize(prob, solver, rng=0, max_calls=budget)
    assert res.status is Status.BUDGET and not res.success, res.message
    # measures are paid from max_calls here (a user's problem): the peer's points, then the trace's
    peer, monitor = res.nfev_by_purpose["peer"], res.nfev_by_purpose["monitor"]
    assert res.nfev == peer and peer % N == 0 and 0 <= budget - (peer + monitor) < N
    capped = zoframe.minimize(prob, solver, rng=0, max_calls=10**6, maxfev=7)
    assert capped.status is Status.BUDGET and capped.nfev_by_purpose["peer"] == 7 * N, capped.message


# --------------------------------------------------------------------------- honest statuses
def test_prox_fd_unbounded_smooth_part_diverges() -> None:
    eye = np.eye(3)
    prob = zoframe.Composite(lambda X: -(X * X).sum(axis=1), x0=np.ones(3), A=eye, B=[-eye], c=np.zeros(3),
                             penalties=[L1(0.1)])
    res = zoframe.minimize(prob, "prox-fd", rng=0, max_calls=20000)
    assert res.status is Status.DIVERGED and not res.success, res.message


def test_dfols_claim_is_checked_against_the_objective() -> None:
    """Residuals that agree with the components at x0 only: DFO-LS converges on the residuals, the check of
    the objective at its final point refuses the claim."""
    A, b, _ = _design()
    eye = np.eye(D)

    def fun(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        r = X @ A[idx].T - b[idx]
        return np.asarray(r * r + (X * X).sum(axis=1, keepdims=True))  # + |x|^2: equal at x0 = 0 only

    prob = zoframe.Composite(fun, A=eye, B=[-eye], c=np.zeros(D), penalties=[L1(0.2)], n=N, x0=np.zeros(D),
                             residuals=lambda X, idx: X @ A[idx].T - b[idx])
    res = zoframe.minimize(prob, "dfols", rng=0, max_calls=N * 2000, sfista_iters=100)
    assert res.status is Status.FAILED and not res.success and "not the mean of the squared" in res.message, res.message


def test_dfols_refuses_what_it_cannot_take() -> None:
    without, _ = _lasso(residuals=False)
    with pytest.raises(IncompatibleProblemError, match="residuals=r"):
        zoframe.minimize(without, "dfols", max_calls=1000)
    double, _ = _lasso(coupling="double")
    with pytest.raises(IncompatibleProblemError, match="y = x \\+ e"):
        zoframe.minimize(double, "dfols", max_calls=1000)
    eye = np.eye(2)
    split = zoframe.Composite(lambda X: (X * X).sum(axis=1), x0=np.ones(2), A=eye, B=[-eye[:, :1]], c=np.zeros(2),
                              penalties=[L1(0.1)])  # one y for two rows: y does not follow from x
    for solver in ("dfols", "prox-fd"):
        with pytest.raises(IncompatibleProblemError, match="ADMM"):
            zoframe.minimize(split, solver, max_calls=1000)


def test_missing_dfols_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    prob, _ = _lasso()
    monkeypatch.setitem(sys.modules, "dfols", None)  # import dfols now raises ImportError
    with pytest.raises(MissingDependencyError) as info:
        zoframe.minimize(prob, "dfols", rng=0, max_calls=1000)
    assert "zoframe[dfols]" in str(info.value) and "DFO-LS" in str(info.value)


def test_prox_fd_is_deterministic_and_resumes(tmp_path: Any) -> None:
    prob, _ = _lasso(coupling="blocks")
    straight = zoframe.minimize(prob, "prox-fd", rng=2, max_calls=N * 4000, points_per_step=9, record_every=0)
    again = zoframe.minimize(prob, "prox-fd", rng=2, max_calls=N * 4000, points_per_step=9, record_every=0)
    assert np.array_equal(straight.x, again.x) and straight.nfev == again.nfev
    path = f"{tmp_path}/prox"
    part = zoframe.minimize(prob, "prox-fd", rng=2, max_iter=4, checkpoint=path, points_per_step=9, record_every=0)
    assert part.status is Status.MAX_ITER
    resumed = zoframe.minimize(prob, "prox-fd", max_calls=N * 4000, resume=path, points_per_step=9, record_every=0)
    assert np.array_equal(straight.x, resumed.x) and straight.nfev == resumed.nfev
    assert np.array_equal(straight.outputs["lam"], resumed.outputs["lam"]) and resumed.success
