"""Fuzz the counting oracle with hostile user functions: a clear zoframe error or the exact value.

Every case builds a problem of one kind (FiniteSum n = 1 and n > 1, Constrained, Minimax n = 1 and
n > 1, Composite; vectorized and scalar forms; and protocol-level problem classes whose methods the
oracle calls directly, white-box gradients included) whose user function computes the right values
and then returns them damaged in one seeded-random way: a wrong shape, a scalar, a transposed or
padded array, complex, boolean, object or string values, ``None``, a list (ragged or not), a masked
array, NaN or infinities. The returned objects are recorded and judged here, independently of the
oracle, against the documented contract (a real numeric array of shape ``(k, b)``; ``(k,)`` when
``b == 1``; ``(b,)`` when ``k == 1``; one real number per call of a scalar function):

* an object outside the contract must make the oracle raise a :class:`zoframe.InvalidInputError`
  (``ShapeError`` included) whose message names what the function returned;
* inside the contract, non-finite values raise :class:`zoframe.NonFiniteValueError` under
  ``nonfinite="raise"`` and come back as ``+inf`` under ``nonfinite="inf"``;
* otherwise the oracle returns exactly the float64 values the function returned.

Anything else (a numpy ``ValueError``, a warning, a number that differs) fails the test.
"""

from __future__ import annotations

from collections.abc import Callable
import math
from typing import Any, Literal

import numpy as np
import pytest

import zoframe
from zoframe import CountingOracle
from zoframe.errors import InvalidInputError, NonFiniteValueError, ZoframeError

D, DY, N, M = 3, 2, 4, 5
W = np.linspace(-1.0, 1.0, D * max(N, M)).reshape(D, max(N, M))
A = np.linspace(0.5, 1.5, D * DY).reshape(D, DY)

ARRAY_MUTATIONS = (
    "ok", "ok", "ok", "list", "float32", "int", "transpose", "extra_col", "extra_row", "drop_row",
    "scalar", "np_scalar", "zero_d", "ravel", "3d", "k3", "complex", "complex0", "bool", "object", "str",
    "string", "none", "list_with_none", "ragged", "dict", "masked", "nan", "inf", "neg_inf", "huge",
)
SCALAR_MUTATIONS = (
    "ok", "ok", "ok", "int", "float32", "one_list", "zero_d", "one_array", "complex", "bool", "string",
    "none", "nan", "inf", "two", "huge_int", "matrix11",
)


# ------------------------------------------------------------------ the damage


def damage_array(v: np.ndarray, how: str, rng: np.random.Generator) -> Any:
    """``v`` (the right values, 1-D or 2-D) returned damaged in the way ``how``."""
    two = v if v.ndim == 2 else v[:, None]
    if how == "ok":
        return v
    if how == "list":
        return v.tolist()
    if how == "float32":
        return v.astype(np.float32)
    if how == "int":
        return np.round(v * 10).astype(np.int64)
    if how == "transpose":
        return two.T
    if how == "extra_col":
        return np.hstack([two, two[:, :1]])
    if how == "extra_row":
        return np.concatenate([v, v[:1]])
    if how == "drop_row":
        return v[:-1]
    if how == "scalar":
        return float(v.reshape(-1)[0])
    if how == "np_scalar":
        return np.float64(v.reshape(-1)[0])
    if how == "zero_d":
        return np.array(v.reshape(-1)[0])
    if how == "ravel":
        return v.reshape(-1)
    if how == "3d":
        return v[..., None]
    if how == "k3":
        return np.repeat(two[:, :1], 3, axis=1)
    if how == "complex":
        return v + 1j
    if how == "complex0":
        return v.astype(np.complex128)
    if how == "bool":
        return v > 0
    if how == "object":
        return v.astype(object)
    if how == "str":
        return v.astype(str)
    if how == "string":
        return "1.0"
    if how == "none":
        return None
    if how == "list_with_none":
        out = v.tolist()
        if v.ndim == 2:
            out[0][0] = None
        else:
            out[0] = None
        return out
    if how == "ragged":
        return [[1.0], [1.0, 2.0]]
    if how == "dict":
        return {"value": 1.0}
    if how == "masked":
        return np.ma.masked_array(v, mask=np.zeros(v.shape, dtype=bool))
    if how in ("nan", "inf", "neg_inf", "huge"):
        out = np.array(v, dtype=np.float64)
        flat = out.reshape(-1)
        flat[rng.integers(flat.size)] = {"nan": np.nan, "inf": np.inf, "neg_inf": -np.inf, "huge": 1e308}[how]
        with np.errstate(over="ignore"):
            return out * (10.0 if how == "huge" else 1.0)  # 1e309 overflows to inf inside the user's function
    raise AssertionError(how)


def damage_scalar(v: float, how: str) -> Any:
    return {
        "ok": v, "int": round(v * 10), "float32": np.float32(v), "one_list": [v], "zero_d": np.array(v),
        "one_array": np.array([v]), "complex": complex(v, 1.0), "bool": v > 0, "string": str(v), "none": None,
        "nan": math.nan, "inf": math.inf, "two": [v, v], "huge_int": 10**400, "matrix11": np.array([[v]]),
    }[how]


# ------------------------------------------------------------------ the contract, judged here


def contract(raw: Any, k: int, b: int) -> np.ndarray | None:
    """The ``(k, b)`` float64 values a vectorized result stands for, or ``None`` if it breaks the contract."""
    if raw is None or isinstance(raw, np.ma.MaskedArray):
        return None
    try:
        a = np.asarray(raw)
    except (ValueError, TypeError):
        return None
    if a.dtype.kind not in "fiu":
        return None
    if a.shape == (k, b) or (a.ndim == 1 and ((a.shape[0] == k and b == 1) or (a.shape[0] == b and k == 1))):
        return a.astype(np.float64).reshape(k, b)
    return None


def scalar_contract(raw: Any) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return float(raw) if abs(raw) < 2**1023 else (math.inf if raw > 0 else -math.inf)
    if isinstance(raw, (float, np.floating, np.integer)):
        return float(raw)
    a = contract(raw.reshape(1) if isinstance(raw, np.ndarray) and raw.ndim == 0 else raw, 1, 1)
    return None if a is None else float(a[0, 0])


class Recorder:
    """A user function: the true values, damaged; every returned object is kept for judging."""

    def __init__(self, true: Callable[..., np.ndarray], how: str, rng: np.random.Generator, scalar: bool) -> None:
        self.true, self.how, self.rng, self.scalar = true, how, rng, scalar
        self.calls: list[tuple[Any, tuple[int, ...]]] = []  # (returned object, shape of the true values)

    def __call__(self, *args: Any) -> Any:
        v = self.true(*args)
        raw = damage_scalar(float(v), self.how) if self.scalar else damage_array(v, self.how, self.rng)
        self.calls.append((raw, np.shape(v)))
        return raw


# true functions: vectorized forms; the scalar forms apply them to one row


def f_point(X: np.ndarray) -> np.ndarray:
    return np.asarray(X @ W[:, 0] + (X**2).sum(1))


def f_idx(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.asarray(X @ W[:, idx] + idx[None, :])


def mm_point(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    return np.asarray(((X @ A) * Y).sum(1) - (Y**2).sum(1))


def mm_idx(X: np.ndarray, Y: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.asarray(mm_point(X, Y)[:, None] + idx[None, :] * X[:, :1])


def scalar_form(fn: Callable[..., np.ndarray], with_index: bool) -> Callable[..., float]:
    if with_index:
        return lambda *a: float(fn(*(r[None, :] for r in a[:-1]), np.array([a[-1]]))[0, 0])
    return lambda *a: float(fn(*(r[None, :] for r in a))[0])


# ------------------------------------------------------------------ protocol-level problems


class RawFiniteSum:
    """The oracle's own checks, with no builder in between: components() returns what it is given."""

    kind = "finite_sum"
    dim = D
    n = N

    def __init__(self, fn: Recorder, grad: Recorder) -> None:
        self.fn, self.grad = fn, grad

    def components(self, X: np.ndarray, idx: np.ndarray) -> Any:
        return self.fn(X, idx)

    def component_gradients(self, x: np.ndarray, idx: np.ndarray) -> Any:
        return self.grad(x, idx)


class RawMinimax:
    kind = "minimax"
    dim = D
    dim_y = DY
    n = N
    y0 = np.zeros(DY)
    y_set = None

    def __init__(self, fn: Recorder, grad: Recorder) -> None:
        self.fn, self.grad = fn, grad

    def values(self, X: np.ndarray, Y: np.ndarray, idx: np.ndarray) -> Any:
        return self.fn(X, Y, idx)

    def minimax_gradients(self, x: np.ndarray, y: np.ndarray, idx: np.ndarray) -> Any:
        return self.grad(x, y, idx), np.zeros((idx.size, DY))  # grad_x damaged, grad_y right


def grad_true(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.asarray(W[:, idx].T + 2 * x[None, :])


def mm_grad_true(x: np.ndarray, y: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.asarray(np.tile(A @ y + idx.size, (idx.size, 1)))


# ------------------------------------------------------------------ one case


def build(kind: str, vectorized: bool, fn: Recorder, g: Recorder) -> tuple[Any, str, int]:
    """(problem, oracle entry point, number of indices) for a case."""
    x0 = np.zeros(D)
    if kind == "fs1":
        return zoframe.FiniteSum(fn, x0=x0, vectorized=vectorized), "objective", 1
    if kind == "fsn":
        return zoframe.FiniteSum(fn, x0=x0, n=N, vectorized=vectorized), "objective", N
    if kind == "con_obj":
        return zoframe.Constrained(fn, g, m=M, x0=x0, vectorized=vectorized), "objective", 1
    if kind == "con":
        return zoframe.Constrained(g, fn, m=M, x0=x0, vectorized=vectorized), "constraints", M
    if kind == "mm1":
        return zoframe.Minimax(fn, x0, np.zeros(DY), vectorized=vectorized), "minimax", 1
    if kind == "mmn":
        return zoframe.Minimax(fn, x0, np.zeros(DY), n=N, vectorized=vectorized), "minimax", N
    if kind == "comp":
        prob = zoframe.Composite(
            fn, x0, np.eye(D), [np.eye(D)], np.zeros(D), [zoframe.penalties.L1(1.0)], n=N, vectorized=vectorized
        )
        return prob, "objective", N
    if kind == "raw_fs":
        return RawFiniteSum(fn, g), "objective", N
    if kind == "raw_mm":
        return RawMinimax(fn, g), "minimax", N
    raise AssertionError(kind)


def true_function(kind: str, vectorized: bool) -> Callable[..., np.ndarray]:
    indexed = kind in ("fsn", "con", "mmn", "comp", "raw_fs", "raw_mm")
    minimax = kind in ("mm1", "mmn", "raw_mm")
    vec: Callable[..., np.ndarray] = (mm_idx if indexed else mm_point) if minimax else (f_idx if indexed else f_point)
    if vectorized or kind.startswith("raw"):
        return vec
    return scalar_form(vec, indexed)  # type: ignore[return-value]


def expected(rec: Recorder, per_point: bool) -> np.ndarray | None:
    """The values the recorded returns stand for (rows of all calls, in order), or None if one breaks the contract."""
    if rec.scalar:
        vals = [scalar_contract(raw) for raw, _ in rec.calls]
        return None if any(v is None for v in vals) else np.array(vals, dtype=np.float64)
    blocks = []
    for raw, shape in rec.calls:
        k = shape[0]
        b = 1 if per_point else shape[1]
        a = contract(raw, k, b)
        if a is None:
            return None
        blocks.append(a)
    return np.concatenate(blocks, axis=0)


KINDS = ("fs1", "fsn", "con_obj", "con", "mm1", "mmn", "comp", "raw_fs", "raw_mm")


def run_case(seed: int) -> str:
    rng = np.random.default_rng(seed)
    kind = KINDS[seed % len(KINDS)]
    vectorized = bool(rng.integers(2)) or kind.startswith("raw")
    scalar = not vectorized
    how = str(rng.choice(SCALAR_MUTATIONS if scalar else ARRAY_MUTATIONS))
    fn = Recorder(true_function(kind, vectorized), how, rng, scalar)
    good: Callable[..., Any]
    if kind.startswith("raw"):
        g_how = str(rng.choice(ARRAY_MUTATIONS))
        good = Recorder(grad_true if kind == "raw_fs" else mm_grad_true, g_how, rng, False)
    else:
        good = true_function("fsn" if kind == "con_obj" else "fs1", vectorized)
    problem, entry, size = build(kind, vectorized, fn, good)  # type: ignore[arg-type]
    policy: Literal["raise", "inf"] = "raise" if rng.integers(2) else "inf"
    oracle = CountingOracle(problem, nonfinite=policy, block_rows=int(rng.choice([2, 256])))
    k = int(rng.choice([1, 2, 5]))
    X = rng.standard_normal((k, D))
    Y = rng.standard_normal((k, DY))
    idx = None if size == 1 or rng.integers(3) == 0 else np.sort(rng.choice(size, size=int(rng.integers(1, size + 1)), replace=False))
    via_monitor = bool(rng.integers(4) == 0)
    target: Any = oracle.monitor if via_monitor else oracle
    args = (X, Y) if entry == "minimax" else (X,)
    err: ZoframeError | None = None
    got = None
    try:
        got = getattr(target, entry)(*args, idx)
    except ZoframeError as exc:
        err = exc
    b = size if idx is None else len(idx)
    per_point = size == 1
    ref = expected(fn, per_point)
    if ref is None:
        assert isinstance(err, InvalidInputError), (kind, how, err, fn.calls[-1][0])
        assert "returned" in str(err), str(err)
        return "refused"
    ref = ref.reshape(k, -1)
    if per_point and b != ref.shape[1]:
        ref = np.repeat(ref[:, :1], b, axis=1)
    finite = np.isfinite(ref)
    if not finite.all() and policy == "raise":
        assert isinstance(err, NonFiniteValueError), (kind, how, err)
        assert "nonfinite='inf'" in str(err)
        return "non-finite raised"
    assert err is None, (kind, how, err)
    assert got is not None and got.shape == (k, b) and got.dtype == np.float64
    np.testing.assert_array_equal(got, np.where(finite, ref, np.inf))
    if kind.startswith("raw") and not via_monitor:
        return "value " + white_box_case(oracle, kind, good, rng)  # type: ignore[arg-type]
    return "value" if finite.all() else "flagged inf"


def white_box_case(oracle: CountingOracle, kind: str, grad: Recorder, rng: np.random.Generator) -> str:
    """The white-box gradient entry points: the same contract, and non-finite gradients always raise."""
    x = rng.standard_normal(D)
    idx = np.array([0, 2])
    err: ZoframeError | None = None
    try:
        if kind == "raw_fs":
            out = oracle.gradient(x, idx)
        else:
            out = oracle.minimax_gradients(x, rng.standard_normal(DY), idx)[0]
    except ZoframeError as exc:
        err = exc
    raw, shape = grad.calls[-1]
    ref = contract(raw, *shape)
    if ref is None:
        assert isinstance(err, InvalidInputError) and "returned" in str(err), (grad.how, err)
        return "gradient refused"
    if not np.isfinite(ref).all():
        assert isinstance(err, NonFiniteValueError), (grad.how, err)
        return "gradient non-finite"
    assert err is None, (grad.how, err)
    np.testing.assert_array_equal(out, ref)
    return "gradient value"


def test_hostile_user_functions_give_a_clear_error_or_the_exact_value() -> None:
    outcomes: dict[str, int] = {}
    for seed in range(600):
        try:
            outcome = run_case(seed)
        except AssertionError as exc:
            raise AssertionError(f"case seed={seed}: {exc}") from exc
        outcomes[outcome.split()[0]] = outcomes.get(outcome.split()[0], 0) + 1
    # the draw covers every outcome, many times
    assert min(outcomes.get(k, 0) for k in ("refused", "non-finite", "value", "flagged")) >= 20, outcomes


@pytest.mark.parametrize(
    "X",
    [np.zeros((2, D)) + 1j, np.array([["a"] * D]), None, [[None] * D], np.zeros((2, D + 1)), [[1.0, 2.0], [3.0]],
     np.ma.masked_array(np.zeros((2, D)))],
)
def test_hostile_points_are_refused_before_any_call(X: Any) -> None:
    rec = Recorder(f_point, "ok", np.random.default_rng(0), False)
    oracle = CountingOracle(zoframe.FiniteSum(rec, x0=np.zeros(D)))
    with pytest.raises(InvalidInputError, match="points"):
        oracle.objective(X)
    assert rec.calls == [] and oracle.calls == 0
