"""Bad input for the composite solvers fails clearly and before any evaluation; penalties are exact."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pytest

import zoframe
from zoframe.errors import IncompatibleProblemError, InvalidInputError, InvalidParameterError, ShapeError
from zoframe.penalties import L1, GroupL2, SquaredL2
from zoframe_admm.coupling import RankDeficientCouplingWarning
from zoframe_admm.penalties import BlockGroupL2, PenaltySum, WeightedL1, overlapping_groups_matrix
from zoframe_admm.problems import FusedLassoToy

ALL = ["zo-svrg-admm", "zo-saga-admm", "zo-admm", "zo-sgd-admm", "zo-prox-svrg", "zo-prox-saga"]
ADMM = ALL[:4]


@dataclass(frozen=True, eq=False)
class RawComposite:
    """A composite problem NOT built with zoframe.Composite (so nothing is pre-validated)."""

    kind: ClassVar[str] = "composite"
    A: Any
    B: Any
    c: Any
    penalties: Any
    y0: Any
    dim: int = 3
    n: int = 5
    x0: np.ndarray = field(default_factory=lambda: np.zeros(3))

    def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        raise AssertionError("no evaluation may happen on invalid input")


def _good(**over: Any) -> RawComposite:
    kw: dict[str, Any] = {
        "A": np.eye(3),
        "B": (-np.eye(3),),
        "c": np.zeros(3),
        "penalties": (L1(0.1),),
        "y0": (np.zeros(3),),
    }
    kw.update(over)
    return RawComposite(**kw)


class NoProx:
    def value(self, y: np.ndarray) -> float:
        return 0.0


@pytest.mark.parametrize("solver", ALL)
@pytest.mark.parametrize(
    ("problem", "error", "match"),
    [
        (_good(A=np.eye(4, 3), c=np.zeros(3)), ShapeError, "c must have shape"),
        (_good(A=np.ones((3, 2))), ShapeError, "A must have shape"),
        (_good(B=(-np.eye(4),)), ShapeError, "B_0 must have 3 rows"),
        (_good(y0=(np.zeros(2),)), ShapeError, "y0"),
        (_good(penalties=(NoProx(),)), InvalidInputError, "no value\\(\\)/prox\\(\\)"),
        (_good(penalties=(L1(0.1), L1(0.1))), InvalidInputError, "1 blocks B_j but 2 penalties"),
        (_good(B=()), InvalidInputError, "k >= 1"),
        (_good(c=np.array([0.0, np.nan, 0.0])), InvalidInputError, "NaN"),
    ],
)
def test_bad_structure_is_rejected_before_any_evaluation(solver: str, problem: RawComposite, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        zoframe.minimize(problem, solver, rng=0, max_iter=5)


@pytest.mark.parametrize("solver", ALL)
@pytest.mark.parametrize(("param", "value"), [("eta", 0.0), ("eta", -1.0), ("b", 0), ("mu", -1e-3)])
def test_bad_common_parameters(solver: str, param: str, value: float) -> None:
    with pytest.raises(InvalidInputError, match=param):
        zoframe.minimize(_good(), solver, rng=0, max_iter=5, **{param: value})


@pytest.mark.parametrize("solver", ADMM)
@pytest.mark.parametrize(("param", "value"), [("rho", 0.0), ("rho", -2.0), ("rank_check", "maybe")])
def test_bad_admm_parameters(solver: str, param: str, value: object) -> None:
    with pytest.raises(InvalidInputError, match=param):
        zoframe.minimize(_good(), solver, rng=0, max_iter=5, **{param: value})


@pytest.mark.parametrize("solver", ADMM)
def test_r_below_the_paper_bound_is_rejected(solver: str) -> None:
    with pytest.raises(InvalidParameterError, match="G = r I - rho eta A\\^T A must exceed I"):
        zoframe.minimize(_good(), solver, rng=0, max_iter=5, r=1.0)
    with pytest.raises(InvalidParameterError, match="H_j"):
        zoframe.minimize(_good(), solver, rng=0, max_iter=5, r_y=1.5)


@pytest.mark.parametrize("solver", ADMM)
def test_rank_deficient_a_warns_or_errors(solver: str) -> None:
    toy = FusedLassoToy()  # A = [I; D] is 15 x 8: not of full row rank
    with pytest.warns(RankDeficientCouplingWarning, match="Assumption 4"):
        zoframe.minimize(toy, solver, rng=0, max_iter=1, b=2, steps="paper")
    with pytest.raises(InvalidInputError, match="not of full row rank"):
        zoframe.minimize(toy, solver, rng=0, max_iter=1, rank_check="error")


@pytest.mark.parametrize("solver", ["zo-prox-svrg", "zo-prox-saga"])
def test_prox_baselines_need_y_determined_by_x(solver: str) -> None:
    two_blocks_same_rows = _good(B=(-np.eye(3), -np.eye(3)), penalties=(L1(0.1), L1(0.1)), y0=(np.zeros(3), np.zeros(3)))
    with pytest.raises(IncompatibleProblemError, match="full column rank"):
        zoframe.minimize(two_blocks_same_rows, solver, rng=0, max_iter=5)
    restricts_x = _good(A=np.vstack([np.eye(3), np.ones((1, 3))]), B=(np.vstack([-np.eye(3), np.zeros((1, 3))]),), c=np.zeros(4))
    with pytest.raises(IncompatibleProblemError, match="restricts x"):
        zoframe.minimize(restricts_x, solver, rng=0, max_iter=5)


def test_non_composite_problem_is_refused() -> None:
    prob = zoframe.FiniteSum(lambda X: (X**2).sum(1), x0=np.zeros(3))
    with pytest.raises(IncompatibleProblemError, match="composite"):
        zoframe.minimize(prob, "zo-svrg-admm", rng=0, max_iter=5)


def test_caller_arrays_untouched() -> None:
    toy = FusedLassoToy()
    x0 = np.full(toy.dim, 0.3)
    keep = x0.copy()
    zoframe.minimize(toy, "zo-saga-admm", rng=0, max_iter=20, x0=x0, rank_check="ignore")
    np.testing.assert_array_equal(x0, keep)


def test_custom_penalty_with_value_and_prox() -> None:
    """A user penalty (a box indicator via its projection) plugs in as psi."""

    class BoxIndicator:
        def value(self, y: np.ndarray) -> float:
            return 0.0 if np.all(np.abs(y) <= 0.5 + 1e-9) else float("inf")

        def prox(self, v: np.ndarray, t: float) -> np.ndarray:
            return np.clip(v, -0.5, 0.5)

        def subdifferential_distance(self, y: np.ndarray, g: np.ndarray) -> float:
            inner = np.abs(y) < 0.5
            r = np.where(inner, g, np.where(np.sign(g) == np.sign(y), 0.0, g))
            return float(np.linalg.norm(r))

    prob = zoframe.Composite(
        lambda X, idx: ((X[:, None, :] - 1.0) ** 2).sum(-1).repeat(len(idx), 1)[:, : len(idx)],
        x0=np.zeros(3), A=np.eye(3), B=[-np.eye(3)], c=np.zeros(3), penalties=[BoxIndicator()], n=4,
    )
    res = zoframe.minimize(prob, "zo-svrg-admm", rng=0, max_iter=400, b=2, eta=0.2)
    np.testing.assert_allclose(res.outputs["y0"], 0.5, atol=1e-6)
    np.testing.assert_allclose(res.x, 0.5, atol=1e-4)


# --------------------------------------------------------------------------- penalties
def _prox_brute(psi: Any, v: np.ndarray, t: float) -> np.ndarray:
    from scipy.optimize import minimize

    res = minimize(lambda y: psi.value(y) + np.sum((y - v) ** 2) / (2 * t), v, method="Powell",
                   options={"xtol": 1e-10, "ftol": 1e-14, "maxiter": 20000})
    return np.asarray(res.x)


PENALTIES = [
    WeightedL1(np.array([0.1, 0.5, 0.0, 1.0, 0.3, 0.2])),
    BlockGroupL2(3, 0.7),
    PenaltySum(l1=L1(0.2), ridge=SquaredL2(0.5)),
    PenaltySum(l1=WeightedL1(np.full(6, 0.1)), group=BlockGroupL2(2, 0.4)),
    PenaltySum(l1=L1(0.1), group=GroupL2.from_groups([[0, 1, 2], [3, 4]], 0.3), ridge=SquaredL2(1.0)),
]


@pytest.mark.parametrize("psi", PENALTIES, ids=lambda p: type(p).__name__)
def test_prox_is_the_minimiser_and_satisfies_the_optimality_condition(psi: Any) -> None:
    rng = np.random.default_rng(0)
    for _ in range(3):
        v, t = rng.standard_normal(6), 0.7
        y = psi.prox(v, t)
        obj = psi.value(y) + np.sum((y - v) ** 2) / (2 * t)
        brute = _prox_brute(psi, v, t)
        assert obj <= psi.value(brute) + np.sum((brute - v) ** 2) / (2 * t) + 1e-9
        # optimality: (v - y) / t is a subgradient of psi at y
        assert psi.subdifferential_distance(y, (v - y) / t) < 1e-9
        assert psi.subdifferential_distance(y, (v - y) / t + 0.3) > 1e-3


def test_block_group_matches_core_group_l2() -> None:
    rng = np.random.default_rng(1)
    v = rng.standard_normal(12)
    core = GroupL2.from_groups([list(range(i, i + 4)) for i in range(0, 12, 4)], 0.9)
    fast = BlockGroupL2(4, 0.9)
    np.testing.assert_allclose(fast.prox(v, 0.8), core.prox(v, 0.8))
    assert fast.value(v) == pytest.approx(core.value(v))
    y = fast.prox(v, 3.0)
    assert fast.subdifferential_distance(y, v) == pytest.approx(core.subdifferential_distance(y, v))


def test_overlapping_groups_matrix() -> None:
    G = overlapping_groups_matrix(8, 8, 3, 1)
    assert G.shape == (36 * 9, 64)
    assert np.all(G.sum(axis=1) == 1)
    first = np.flatnonzero(G[:9].sum(axis=0))
    np.testing.assert_array_equal(first, [0, 1, 2, 8, 9, 10, 16, 17, 18])
    assert G.sum(axis=0)[27] == 9 and G.sum(axis=0)[0] == 1  # an interior pixel sits in 9 windows
    with pytest.raises(InvalidInputError, match="larger than the image"):
        overlapping_groups_matrix(2, 2, 3)


@pytest.mark.parametrize("bad", [lambda: WeightedL1(np.array([-1.0])), lambda: BlockGroupL2(0), lambda: PenaltySum(),
                                 lambda: PenaltySum(l1=SquaredL2(1.0))])
def test_bad_penalties(bad: Any) -> None:
    with pytest.raises(InvalidInputError):
        bad()
