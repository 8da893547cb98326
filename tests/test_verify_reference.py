"""cvxpy reference solutions: accuracy, sign conventions, status checks and the disk cache."""

from __future__ import annotations

from dataclasses import dataclass
import importlib
from typing import Any, ClassVar

import numpy as np
import pytest

from zoframe.errors import InvalidInputError
from zoframe_verify import CvxpyModel, ReferenceSolveError, reference_solution
from zoframe_verify.problems import KKTQP, LassoComposite


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOFRAME_CACHE", str(tmp_path / "cache"))


def test_box_qp_matches_closed_form_and_sign_convention() -> None:
    prob = KKTQP(dim=8, m=6, constraints_kind="box", seed=3)
    known = prob.known_solution()
    ref = reference_solution(prob)
    assert ref.status == "optimal"
    assert ref.solver == "CLARABEL" and ref.solver_version != "unknown" and ref.cvxpy_version != "unknown"
    np.testing.assert_allclose(ref.x, known["x"], atol=1e-8)
    assert abs(ref.fun - known["fun"]) < 1e-8
    # multipliers >= 0 for f_j <= 0, equal to max(c_bar - u, 0) in closed form
    assert np.all(ref.duals >= 0)
    np.testing.assert_allclose(ref.duals, known["multipliers"], atol=1e-7)
    assert (known["multipliers"] > 0.05).sum() >= 2  # the test exercises active constraints


def test_random_qp_duals_satisfy_stationarity() -> None:
    prob = KKTQP(dim=10, m=50, seed=1)
    ref = reference_solution(prob)
    grad = ref.x - prob.c_bar  # gradient of the mean of ||x - c_i||^2 / 2
    resid = grad + prob.D.T @ ref.duals  # grad f0 + sum_j alpha_j grad f_j = 0 with alpha >= 0
    assert np.linalg.norm(resid) < 1e-7
    g = prob.D @ ref.x - prob.e
    assert g.max() < 1e-9
    assert np.abs(ref.duals * g).max() < 1e-8  # complementarity
    assert (ref.duals > 1e-6).sum() >= 2


def test_composite_lambda_follows_admm_convention() -> None:
    prob = LassoComposite(dim=12, n=60, seed=2)
    ref = reference_solution(prob)
    grad = prob.data.T @ (prob.data @ ref.x - prob.target) / prob.n
    # L = f + psi - <lam, A x + B y - c> with A = I: lam = grad f(x*)
    np.testing.assert_allclose(ref.duals, grad, atol=1e-6)
    assert len(ref.y) == 1 and np.count_nonzero(ref.y[0] == 0.0) >= 1  # polished exact zeros


def test_cache_is_reused_and_keyed_by_problem(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "c"
    prob = KKTQP(dim=6, m=20, seed=0)
    first = reference_solution(prob, cache_dir=cache)
    assert not first.cached
    assert len(list(cache.glob("*.json"))) == 1
    cp = importlib.import_module("cvxpy")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the solver must not run on a cache hit")

    monkeypatch.setattr(cp.Problem, "solve", refuse)
    again = reference_solution(KKTQP(dim=6, m=20, seed=0), cache_dir=cache)
    assert again.cached and again.key == first.key
    np.testing.assert_array_equal(again.x, first.x)
    np.testing.assert_array_equal(again.duals, first.duals)
    with pytest.raises(AssertionError, match="must not run"):
        reference_solution(KKTQP(dim=6, m=20, seed=1), cache_dir=cache)  # other data: other key, a new solve


@dataclass(frozen=True, eq=False)
class _Infeasible:
    kind: ClassVar[str] = "constrained"
    dim: int = 2
    m: int = 2
    n: int = 1

    def cvxpy_model(self) -> CvxpyModel:
        cp = importlib.import_module("cvxpy")
        x = cp.Variable(2)
        return CvxpyModel(x=x, objective=cp.sum_squares(x), constraints=[x[0] <= -1.0, -x[0] <= -1.0])


def test_only_optimal_is_accepted(tmp_path: Any) -> None:
    with pytest.raises(ReferenceSolveError, match="only 'optimal' is accepted"):
        reference_solution(_Infeasible(), cache_dir=tmp_path)


def test_bad_models_are_refused_with_a_reason(tmp_path: Any) -> None:
    @dataclass(frozen=True, eq=False)
    class WrongM(_Infeasible):
        m: int = 5

    with pytest.raises(ReferenceSolveError, match="m=5"):
        reference_solution(WrongM(), cache_dir=tmp_path)
    with pytest.raises(InvalidInputError, match="no cvxpy model"):
        reference_solution(object(), cache_dir=tmp_path)
    with pytest.raises(ReferenceSolveError, match="not installed"):
        reference_solution(KKTQP(), solver="NO_SUCH_SOLVER", cache_dir=tmp_path)
