"""``zoframe.imperfect``: noisy, truncated and failing black boxes of every problem kind.

The values of a wrapped problem depend on (seed, point, component, function) only: the same in any
batch, chunk, order, process and through ask/tell; their statistics are those asked for; every kind
keeps its structure and runs with a solver; rounding is exact.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
import pickle
import re
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe.driver import RunFailedError
from zoframe.errors import InvalidInputError, InvalidParameterError
from zoframe.imperfect import (
    ImperfectProblem,
    Noise,
    apply,
    noisy,
    round_significant,
    row_hash,
    truncated,
    with_nan,
)
from zoframe.protocols import HasConstraintGradient, HasGradient
from zoframe_bench.suites import BallConstrainedQuadratic, RandomQP, smoke_instances


def _eq_problem() -> zoframe.Constrained:
    """Inequalities and equalities (``m = 3``, ``m_eq = 2``) in d = 4, n = 5 components, bounds."""
    return zoframe.Constrained(
        _eq_obj, _eq_cons, m=3, x0=np.full(4, 0.1), n=5, equality_fun=_eq_eq, m_eq=2, bounds=(-2.0, 2.0)
    )


def _eq_obj(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return ((X[:, :, None] - 0.1 * idx[None, None, :]) ** 2).sum(axis=1) + 1.0


def _eq_cons(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return X[:, idx] - 0.5


def _eq_eq(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.stack([X.sum(axis=1) - 1.0, X[:, 0] - X[:, 1]], axis=1)[:, idx]


def _points(k: int, d: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((k, d))


# --------------------------------------------------------------------------- independence of batching
def test_values_do_not_depend_on_batching_order_or_subsets() -> None:
    prob = noisy(_eq_problem(), 1e-3, kind="relative", seed=7)
    X = _points(300, 4)
    idx = np.arange(5)
    full = prob.components(X, idx)
    rows = np.vstack([prob.components(X[r : r + 1], idx) for r in range(X.shape[0])])
    chunks = np.vstack([prob.components(X[lo : lo + 37], idx) for lo in range(0, 300, 37)])
    perm = np.random.default_rng(1).permutation(300)
    shuffled = prob.components(X[perm], idx)
    assert np.array_equal(full, rows) and np.array_equal(full, chunks)
    assert np.array_equal(full[perm], shuffled)
    sub = np.array([4, 1, 1])  # a subset, out of order, repeated: each column is its index's value
    assert np.array_equal(prob.components(X, sub), full[:, sub])
    g = prob.constraints(X, np.arange(3))
    assert np.array_equal(prob.constraints(X[::-1], np.array([2, 0])), g[::-1][:, [2, 0]])
    h = prob.equalities(X, np.arange(2))
    assert np.array_equal(prob.equalities(X[:10], np.array([1])), h[:10, [1]])


def test_the_same_point_written_differently_gets_the_same_value() -> None:
    """Only the point's float64 value counts: a copy, a Fortran-ordered view, -0.0 for 0.0."""
    prob = noisy(BallConstrainedQuadratic(dim=3, n=2), 1e-2)
    X = np.array([[0.0, 1.0, -2.0], [0.5, 0.25, 0.125]])
    idx = np.arange(2)
    a = prob.components(X, idx)
    assert np.array_equal(a, prob.components(np.asfortranarray(X), idx))
    assert np.array_equal(a, prob.components(np.array([[-0.0, 1.0, -2.0], [0.5, 0.25, 0.125]]), idx))
    assert not np.array_equal(a[0], prob.components(X + np.array([1e-15, 0, 0]), idx)[0])  # another point


def test_minimize_is_bit_identical_serially_in_chunks_and_on_a_process_pool() -> None:
    prob = noisy(BallConstrainedQuadratic(dim=4, n=4), 1e-4, kind="relative", seed=3)
    kw: dict[str, Any] = {"rng": 5, "max_iter": 40, "progress": False}
    serial = zoframe.minimize(prob, "adszog", **kw)
    with ProcessPoolExecutor(2) as pool:
        pooled = zoframe.minimize(prob, "adszog", executor=pool, chunks=3, block_rows=8, **kw)
    small = zoframe.minimize(prob, "adszog", block_rows=8, **kw)
    for other in (pooled, small):
        assert np.array_equal(serial.x, other.x) and serial.fun == other.fun and serial.nfev == other.nfev


def _told(prob: Any, solver: str, **kw: Any) -> Any:
    """A run of ``solver`` through ask/tell, each request's values computed point by point."""
    run = zoframe.Run(prob, solver, rng=0, **kw)
    fns = {"objective": prob.components, "constraint": getattr(prob, "constraints", None),
           "equality": getattr(prob, "equalities", None)}
    while (req := run.ask()) is not None:
        fn = fns[req.kind]
        run.tell(req, np.vstack([fn(req.points[r : r + 1], req.indices) for r in range(req.points.shape[0])]))
    return run.result()


@pytest.mark.parametrize("case", ["zo-sgd", "cobyla", "adszog"])
def test_ask_tell_with_the_wrapped_values_point_by_point_matches_minimize(case: str) -> None:
    """Values computed point by point by the caller (as on a cluster) give the run minimize gives.

    (The clean functions here compute each row on its own, with no matrix product whose rounding
    depends on the number of rows, so that the point-by-point values are those of the batches.)
    """
    if case == "adszog":
        prob: Any = noisy(_eq_problem(), 1e-6, kind="relative", seed=2)
        kw: dict[str, Any] = {"max_iter": 4}
    else:
        prob = noisy(zoframe.FiniteSum(_eq_obj, x0=np.full(4, 0.1), n=5), 1e-3, kind="relative", seed=2)
        kw = {"max_iter": 40, **({"eta": 0.05, "batch": 3} if case == "zo-sgd" else {})}
    res = zoframe.minimize(prob, case, rng=0, progress=False, **kw)
    told = _told(prob, case, **kw)
    assert np.array_equal(told.x, res.x) and told.fun == res.fun and told.nfev == res.nfev and res.nit >= 2


def test_row_hash_is_vectorised_and_tells_rows_apart() -> None:
    X = _points(20000, 7)
    h = row_hash(X)
    assert h.shape == (20000,) and h.dtype == np.uint64
    assert np.unique(h).size == 20000
    assert np.array_equal(row_hash(X[:, :3], X[:, 3:]), h)  # a minimax pair hashes as the concatenated row


# --------------------------------------------------------------------------- statistics
def test_absolute_and_relative_noise_have_the_level_asked_for() -> None:
    clean = RandomQP(dim=5, m=50, seed=0)
    X = _points(4000, 5, 1)
    idx = np.arange(50)
    g0 = clean.constraints(X, idx)
    for kind, level in (("absolute", 1e-3), ("relative", 1e-6)):
        g = noisy(clean, level, kind=kind, seed=11).constraints(X, idx)
        z = (g - g0) / level if kind == "absolute" else (g / g0 - 1.0) / level
        assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01, (kind, z.mean(), z.std())
        tol = 5.0 / np.sqrt(z.shape[0])  # 5 standard deviations of a correlation of independent samples
        assert abs(np.corrcoef(z[:, 0], z[:, 1])[0, 1]) < tol  # components independent
        assert abs(np.corrcoef(z[:-1, 0], z[1:, 0])[0, 1]) < tol  # points independent
    # the objective's noise is not the constraints' and another seed gives other noise
    p = noisy(clean, 1.0, seed=11)
    zo = p.components(X, np.array([0]))[:, 0] - clean.components(X, np.array([0]))[:, 0]
    zc = p.constraints(X, np.array([0]))[:, 0] - g0[:, 0]
    zs = noisy(clean, 1.0, seed=12).constraints(X, np.array([0]))[:, 0] - g0[:, 0]
    tol = 5.0 / np.sqrt(zo.shape[0])
    assert abs(np.corrcoef(zo, zc)[0, 1]) < tol and abs(np.corrcoef(zc, zs)[0, 1]) < tol


def test_which_limits_the_noise_to_the_functions_named() -> None:
    clean = RandomQP(dim=3, m=5, seed=0)
    X = _points(10, 3)
    p = noisy(clean, 1e-2, which=("constraints",))
    assert np.array_equal(p.components(X, np.array([0])), clean.components(X, np.array([0])))
    assert not np.array_equal(p.constraints(X, np.arange(5)), clean.constraints(X, np.arange(5)))


def test_nan_at_the_fraction_of_points_asked_for_the_same_points_for_every_function() -> None:
    clean = RandomQP(dim=3, m=4, seed=0)
    p = with_nan(clean, 0.2, seed=4)
    X = _points(20000, 3, 2)
    f = p.components(X, np.array([0]))[:, 0]
    g = p.constraints(X, np.arange(4))
    bad = np.isnan(f)
    assert abs(bad.mean() - 0.2) < 4 * np.sqrt(0.2 * 0.8 / 20000)
    assert np.array_equal(np.isnan(g).all(axis=1), bad) and not np.isnan(g[~bad]).any()
    assert np.array_equal(g[~bad], clean.constraints(X[~bad], np.arange(4)))


def test_truncation_is_exact_decimal_rounding() -> None:
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.standard_normal(20000) * 10.0 ** rng.integers(-40, 40, 20000),
                        [0.125, 0.375, 2.5, -2.5, 1.2345, 999.9999999999999, 1e-300, 0.0, np.inf, -np.inf]])
    for digits in (1, 3, 6, 12, 15):
        got = round_significant(v, digits)
        want = np.array([float(format(a, f".{digits - 1}e")) if np.isfinite(a) else a for a in v])
        assert np.array_equal(got, want), digits
    clean = RandomQP(dim=3, m=4, seed=0)
    X = _points(50, 3)
    g = truncated(clean, 4).constraints(X, np.arange(4))
    assert np.array_equal(g, round_significant(clean.constraints(X, np.arange(4)), 4))
    assert all(float(f"{a:.3e}") == a for a in g.ravel())


# --------------------------------------------------------------------------- kinds and structure
_SOLVERS = {"finite_sum": "zo-sgd", "constrained": "adszog", "minimax": "zo-gda", "composite": "zo-svrg-admm"}
_KEPT = ("kind", "dim", "n", "m", "m_eq", "x0", "y0", "dim_y", "y_set", "feasible_set", "A", "B", "c", "penalties",
         "convex_constraints", "black_box_constraints", "violation_tol")


def _kinds() -> list[tuple[str, Any]]:
    out = [(inst.name, inst.build()) for inst in smoke_instances()]
    out.append(("equalities", _eq_problem()))
    out.append(("boxed-finite-sum", zoframe.FiniteSum(_box_fun, x0=np.zeros(3), bounds=(-1.0, 0.5))))
    return out


def _box_fun(X: np.ndarray) -> np.ndarray:
    return ((X - 1.0) ** 2).sum(axis=1)


@pytest.mark.parametrize("wrap", ["noise", "digits", "nan"])
def test_every_kind_keeps_its_structure_and_runs(wrap: str) -> None:
    for name, clean in _kinds():
        prob = {"noise": lambda p: noisy(p, 1e-6, kind="relative"), "digits": lambda p: truncated(p, 8),
                "nan": lambda p: with_nan(p, 0.05)}[wrap](clean)
        assert isinstance(prob, ImperfectProblem) and prob.clean is clean
        for attr in _KEPT:
            assert hasattr(prob, attr) == hasattr(clean, attr), (name, attr)
            if hasattr(clean, attr):
                assert getattr(prob, attr) is getattr(clean, attr), (name, attr)
        for attr in ("measures", "known_solution", "components", "constraints", "equalities", "values"):
            assert hasattr(prob, attr) == callable(getattr(clean, attr, None)), (name, attr)
        if hasattr(clean, "known_solution"):
            assert prob.known_solution()["fun"] == clean.known_solution()["fun"]
        solver = "adszog" if name == "equalities" else _SOLVERS[clean.kind]
        try:
            res = zoframe.minimize(prob, solver, rng=0, max_iter=5, nonfinite="inf", progress=False)
        except RunFailedError as exc:  # a solver that cannot digest +inf values: said, never a structural error
            assert wrap == "nan" and re.search("invalid value|not finite|overflow", str(exc)), (name, str(exc))
            res = exc.result
        assert res.x.shape == clean.x0.shape and (res.nit >= 1 or wrap == "nan"), (name, res.message)


def test_white_box_capabilities_are_dropped() -> None:
    clean = RandomQP(dim=3, m=4, seed=0)
    assert isinstance(clean, HasGradient) and isinstance(clean, HasConstraintGradient)
    prob = noisy(clean, 1e-6)
    assert not isinstance(prob, HasGradient) and not isinstance(prob, HasConstraintGradient)
    assert not hasattr(prob, "cvxpy_model") and not hasattr(prob, "linear_constraints")


def test_plain_description_pickling_and_stacking() -> None:
    clean = RandomQP(dim=3, m=4, seed=0)
    prob = with_nan(truncated(noisy(clean, 1e-3, kind="relative", seed=2), 5), 0.1, seed=3)
    assert prob.clean is clean and len(prob.transforms) == 3
    assert prob.imperfection == [
        {"transform": "noise", "level": 1e-3, "kind": "relative", "seed": 2,
         "which": ["objective", "constraints", "equalities"]},
        {"transform": "truncation", "digits": 5, "which": ["objective", "constraints", "equalities"]},
        {"transform": "nan", "fraction": 0.1, "seed": 3, "which": ["objective", "constraints", "equalities"]},
    ]
    X = _points(200, 3)
    idx = np.arange(4)
    want = prob.constraints(X, idx)
    again = apply(clean, prob.imperfection)
    back = pickle.loads(pickle.dumps(prob))
    for other in (again, back):
        assert np.array_equal(other.constraints(X, idx), want, equal_nan=True)
    assert apply(clean, []) is clean
    assert prob.name == "random-qp+noise-rel-0.001+digits-5+nan-0.1"
    with pytest.raises(AttributeError, match="read-only"):
        prob.dim = 4  # type: ignore[misc]


def test_bad_arguments_say_what_is_expected() -> None:
    clean = RandomQP(dim=3, m=4, seed=0)
    with pytest.raises(InvalidParameterError, match="level must be a finite number >= 0"):
        noisy(clean, -1.0)
    with pytest.raises(InvalidParameterError, match="kind must be 'absolute'"):
        noisy(clean, 1e-3, kind="multiplicative")
    with pytest.raises(InvalidParameterError, match="which names the functions"):
        noisy(clean, 1e-3, which=("gradient",))
    with pytest.raises(InvalidParameterError, match="digits must be an integer from 1 to 15"):
        truncated(clean, 17)
    with pytest.raises(InvalidParameterError, match=r"fraction must be a number in \[0, 1\)"):
        with_nan(clean, 1.0)
    with pytest.raises(InvalidInputError, match="wraps a zoframe problem"):
        noisy(object(), 1e-3)
    with pytest.raises(InvalidInputError, match="'transform' one of"):
        apply(clean, [{"transform": "blur"}])
    assert Noise(0.0).apply(np.ones((2, 1)), None, np.arange(1), "objective").tolist() == [[1.0], [1.0]]
