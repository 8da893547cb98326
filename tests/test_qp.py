"""Goldfarb & Idnani's dual method (zoframe_constrained.qp.dual_qp) against the KKT conditions and a reference
solver (cvxpy with Clarabel at tolerances 1e-10)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from zoframe_constrained.qp import dual_qp


def _random_qp(seed: int, d: int, k: int, meq: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((d, d))
    B = Q @ Q.T + 0.1 * np.eye(d)
    g = 10.0 * rng.standard_normal(d)
    A = rng.standard_normal((k, d))
    x_in = rng.standard_normal(d)  # a point that satisfies every row (equalities exactly)
    b = A @ x_in + np.concatenate([np.zeros(meq), rng.uniform(0.0, 1.0, k - meq)])
    return B, g, A, b


def _kkt(B: np.ndarray, g: np.ndarray, A: np.ndarray, b: np.ndarray, meq: int, p: np.ndarray, lam: np.ndarray) -> None:
    size = 1e-10 * max(1.0, float(np.abs(g).max()), float(np.abs(b).max()))
    assert np.abs(B @ p + g + A.T @ lam).max() <= size  # stationarity
    assert np.abs(A[:meq] @ p - b[:meq]).max(initial=0.0) <= size  # equalities
    assert float(np.max(A[meq:] @ p - b[meq:], initial=0.0)) <= size  # inequalities
    assert lam[meq:].min(initial=0.0) >= 0.0  # dual feasibility
    assert np.abs(lam[meq:] * (A[meq:] @ p - b[meq:])).max(initial=0.0) <= size * max(1.0, float(np.abs(lam).max()))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(("d", "k", "meq"), [(5, 12, 0), (12, 40, 0), (8, 20, 3), (20, 20, 0)])
def test_random_qps_meet_their_kkt_conditions_and_match_a_reference(seed: int, d: int, k: int, meq: int) -> None:
    B, g, A, b = _random_qp(seed, d, k, meq)
    p, lam = dual_qp(B, g, A, b, meq)
    _kkt(B, g, A, b, meq, p, lam)
    x = cp.Variable(d)
    cons = [A[meq:] @ x <= b[meq:]] + ([A[:meq] @ x == b[:meq]] if meq else [])
    ref = cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, cp.psd_wrap(B)) + g @ x), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert np.abs(p - x.value).max() <= 1e-6 * max(1.0, float(np.abs(x.value).max()))


def test_inconsistent_rows_raise() -> None:
    """x <= -1 and x >= 1 (as -x <= -1): no point satisfies both; an equality against an inequality it cannot
    meet; two dependent equalities that disagree. The method says it cannot solve them (RuntimeError), and the
    precision phase's QP (which then asks the least-distance form) returns None."""
    from zoframe_constrained.precision import _qp

    cases = [
        (np.eye(1), np.zeros(1), np.array([[1.0], [-1.0]]), np.array([-1.0, -1.0]), 0),
        (np.eye(2), np.zeros(2), np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([2.0, 1.0]), 1),
        (np.eye(2), np.zeros(2), np.array([[1.0, 1.0], [2.0, 2.0]]), np.array([1.0, 3.0]), 2),
    ]
    for B, g, A, b, meq in cases:
        with pytest.raises(RuntimeError):
            dual_qp(B, g, A, b, meq)
        assert _qp(B, g, A, b, meq) is None


def test_nearly_dependent_but_consistent_rows_are_left_to_the_least_distance_form() -> None:
    """An active row x <= 0 and a row -x + 1e-12 y <= -1e-3, consistent only for y <= -1e9: the dual method cannot
    tell that from inconsistency (RuntimeError); the precision phase's QP answers with the least-distance form's
    verdict instead of declaring the rows inconsistent."""
    from zoframe_constrained.precision import _qp

    B, g = np.eye(2), np.array([-1.0, 0.0])  # pulls x up against x <= 0
    A = np.array([[1.0, 0.0], [-1.0, 1e-12]])
    b = np.array([0.0, -1e-3])
    with pytest.raises(RuntimeError):
        dual_qp(B, g, A, b)
    out = _qp(B, g, A, b)
    assert out is None or float(np.max(A @ out[0] - b)) <= 1e-6 * max(1.0, float(np.abs(out[0]).max()))


def test_the_same_row_twice_and_a_dependent_equality() -> None:
    """Dependent rows: a row repeated (inequality) and an equality twice (scaled): the solution and multipliers
    that satisfy the KKT conditions, the repeated equality skipped."""
    B, g = np.eye(3), np.array([-4.0, -4.0, -4.0])  # unconstrained minimum (4, 4, 4)
    A = np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    b = np.array([3.0, 6.0, 0.5, 0.5])
    p, lam = dual_qp(B, g, A, b, meq=2)
    np.testing.assert_allclose(p, [0.5, 1.25, 1.25], atol=1e-12)
    _kkt(B, g, A, b, 2, p, lam)


def test_an_unconstrained_minimum_inside_needs_no_row() -> None:
    B, g = 2.0 * np.eye(2), np.array([-2.0, 0.0])  # minimum at (1, 0)
    p, lam = dual_qp(B, g, np.array([[1.0, 0.0]]), np.array([5.0]))
    np.testing.assert_allclose(p, [1.0, 0.0], atol=1e-15)
    assert lam.tolist() == [0.0]


def test_a_non_positive_definite_matrix_is_refused() -> None:
    with pytest.raises(np.linalg.LinAlgError):
        dual_qp(np.diag([1.0, -1.0]), np.zeros(2), np.zeros((0, 2)), np.zeros(0))
