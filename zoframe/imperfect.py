"""Imperfect black boxes: noise, rounding and failed evaluations on the values of any problem.

Real black boxes are simulations and measurements: their values carry noise, are printed to a few
digits, and some points return NaN. The wrappers here turn a clean problem of any kind
(``finite_sum`` with or without a ``feasible_set``, ``constrained`` with inequalities and
equalities, ``minimax``, ``composite``) into a problem of the same kind whose function values are
transformed, in the manner of OptiProfiler's *features* (Huang, Ragonneau and Zhang, OptiProfiler:
a platform for benchmarking optimization solvers; its ``noisy``, ``truncated`` and ``random_nan``
features), so that a solver or a benchmark suite can be run under controlled imperfections:

* :func:`noisy`: ``f + level z`` (``kind="absolute"``) or ``f (1 + level z)`` (``"relative"``),
  ``z`` standard normal;
* :func:`truncated`: values rounded to ``digits`` significant decimal digits (correctly rounded:
  the double nearest to the decimal the value prints as with ``digits`` digits);
* :func:`with_nan`: NaN at a ``fraction`` of the points (every value of the functions named at such
  a point: a simulation that failed there).

The randomness depends only on ``(seed, the point's float64 bytes, the component index, the
function)``, never on the order or the grouping of the calls: the same point gives the same value
in a batch of one or of a million, in any chunk, on any process, through ask/tell. Each point's
row (for a minimax problem the pair ``(x, y)``) is hashed by a fixed random projection of its
64-bit patterns (a multilinear hash ``sum_c bits_c K_c mod 2^64`` with odd random keys ``K_c``,
then splitmix64's finaliser); the key of a value mixes that hash with the seed, the function and
the component index, and its 53 high bits give a uniform number, mapped to a normal one by the
inverse normal CDF. Vectorised over rows and components: no Python loop over points. ``-0.0`` is
hashed as ``0.0``.

The wrapped problem keeps the clean one's structure: ``kind``, ``dim``, ``n``, ``m``, ``m_eq``,
``x0``, ``y0``, ``dim_y``, ``y_set``, ``feasible_set``, ``A``, ``B``, ``c``, ``penalties``, the
constraint flags, ``violation_tol``, ``monitor_free``, its ``measures`` (evaluated through the
oracle of the wrapped problem: values the problem takes from the oracle carry the imperfection,
closed-form ones do not) and ``known_solution``. It drops the white-box capabilities (gradients,
linear-constraint data, cvxpy models): an imperfect black box has none, and a first-order or
projection method must not see through the noise. ``.clean`` is the clean problem (for the true gap
and the exact KKT residual of a benchmark), ``.imperfection`` the transforms as plain data
(``[{"transform": "noise", "level": ..., ...}, ...]``), ``.transforms`` as objects, and
:func:`apply` rebuilds a wrapped problem from that plain data. Wrapping a wrapped problem adds to
its list of transforms (applied in order). Wrapped problems pickle (process pools) when the clean
one does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
import functools
import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri

from zoframe.errors import InvalidInputError, InvalidParameterError
from zoframe.protocols import Array, ConvexSet, IntArray, Penalty

__all__ = [
    "FUNCTIONS",
    "Failures",
    "ImperfectProblem",
    "Noise",
    "Transform",
    "Truncation",
    "apply",
    "noisy",
    "read",
    "truncated",
    "with_nan",
]

#: the functions a transform can act on: the objective (finite-sum components, minimax values),
#: the inequality constraints and the equality constraints
FUNCTIONS = ("objective", "constraints", "equalities")
_FUNCTION_CODE = {"objective": 1, "constraints": 2, "equalities": 3}

U64 = NDArray[np.uint64]

_GOLD = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_NOISE_TAG = np.uint64(0x6E6F697365000001)  # the noise's stream
_NAN_TAG = np.uint64(0x6E616E0000000002)  # the failures' stream


def _mix(z: U64) -> U64:
    """splitmix64's finaliser (Steele, Lea and Flood, OOPSLA 2014), elementwise on uint64 (wrapping)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    out: U64 = z ^ (z >> np.uint64(31))
    return out


@functools.lru_cache(maxsize=64)
def _row_keys(width: int) -> U64:
    """The fixed odd random keys of the row hash for rows of ``width`` numbers (the same in every process)."""
    keys = np.random.SeedSequence([0x7A6F6672616D65, width]).generate_state(width, dtype=np.uint64) | np.uint64(1)
    keys.setflags(write=False)
    return keys


@functools.lru_cache(maxsize=256)
def _seed_key(seed: int, tag: int) -> np.uint64:
    """A well-mixed 64-bit key of ``seed`` for one stream (``tag``)."""
    return np.uint64(np.random.SeedSequence([seed, tag]).generate_state(1, dtype=np.uint64)[0])


def row_hash(*blocks: Array) -> U64:
    """A 64-bit hash of each row of the points (the rows of ``blocks`` side by side), ``(k,)`` uint64.

    A fixed random projection of the rows' float64 bit patterns (``sum_c bits_c K_c mod 2^64``, odd
    keys), then splitmix64's finaliser: two rows that differ in any bit differ in the sum (an odd key
    times a nonzero difference is nonzero mod ``2^64``), and the finaliser spreads it over all bits.
    """
    width = sum(int(b.shape[1]) for b in blocks)
    keys = _row_keys(width)
    acc = np.zeros(blocks[0].shape[0], dtype=np.uint64)
    lo = 0
    with np.errstate(over="ignore"):
        for b in blocks:
            bits = np.ascontiguousarray(np.asarray(b, dtype=np.float64) + 0.0).view(np.uint64)  # + 0.0: -0.0 -> 0.0
            acc += (bits * keys[lo : lo + b.shape[1]]).sum(axis=1, dtype=np.uint64)
            lo += int(b.shape[1])
        return _mix(acc ^ np.uint64(width))


def _uniform(keys: U64) -> Array:
    """Uniform numbers in (0, 1) from the 53 high bits of well-mixed keys."""
    out: Array = ((keys >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53
    return out


def _which(which: Any, name: str) -> tuple[str, ...]:
    if isinstance(which, str):
        which = (which,)
    try:
        items = tuple(str(w) for w in which)
    except TypeError:
        raise InvalidParameterError(f"{name}: which must be a sequence of function names from {FUNCTIONS}, got {which!r}") from None
    bad = [w for w in items if w not in FUNCTIONS]
    if bad or not items:
        raise InvalidParameterError(
            f"{name}: which names the functions to transform, a non-empty subset of {FUNCTIONS}; got {which!r}"
        )
    return tuple(w for w in FUNCTIONS if w in items)


def _seed(seed: Any, name: str) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidParameterError(f"{name}: seed must be an integer >= 0, got {seed!r}")
    return int(seed)


class Transform:
    """A transform of function values: ``apply(values, rows, idx, function)`` and ``describe()``."""

    which: tuple[str, ...]
    #: whether :meth:`apply` needs the rows' hash
    needs_hash: ClassVar[bool] = True

    def apply(self, values: Array, rows: U64 | None, idx: IntArray, function: str) -> Array:
        """Transform ``values`` ``(k, b)`` in place (rows' hashes ``(k,)``, component indices ``(b,)``); return them."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """The transform as plain data (JSON), the inverse of :func:`apply`'s reading."""
        raise NotImplementedError

    def tag(self) -> str:
        """A short label for names and directories (``noise-rel-1e-08``)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Noise(Transform):
    """Gaussian noise: ``f + level z`` (``kind="absolute"``) or ``f (1 + level z)`` (``"relative"``)."""

    level: float
    kind: str = "absolute"
    seed: int = 0
    which: tuple[str, ...] = FUNCTIONS

    def __post_init__(self) -> None:
        lv = self.level
        if isinstance(lv, bool) or not isinstance(lv, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(lv)) or float(lv) < 0:
            raise InvalidParameterError(
                f"noisy: level must be a finite number >= 0 (the standard deviation of the noise), got {lv!r}"
            )
        if self.kind not in ("absolute", "relative"):
            raise InvalidParameterError(
                f"noisy: kind must be 'absolute' (f + level z) or 'relative' (f (1 + level z)), got {self.kind!r}"
            )
        object.__setattr__(self, "level", float(lv))
        object.__setattr__(self, "seed", _seed(self.seed, "noisy"))
        object.__setattr__(self, "which", _which(self.which, "noisy"))

    def normals(self, rows: U64, idx: IntArray, function: str) -> Array:
        """The standard normal numbers ``z`` ``(k, b)`` of the rows' hashes, the component indices and the function."""
        base = _seed_key(self.seed, int(_NOISE_TAG)) ^ np.uint64(_FUNCTION_CODE[function])
        with np.errstate(over="ignore"):
            col = _mix(np.asarray(idx, dtype=np.uint64) * _GOLD + base)  # (b,)
            keys = _mix(rows[:, None] ^ col[None, :])
        out: Array = ndtri(_uniform(keys))
        return out

    def apply(self, values: Array, rows: U64 | None, idx: IntArray, function: str) -> Array:
        if function not in self.which or self.level == 0.0 or rows is None:
            return values
        z = self.normals(rows, idx, function)
        if self.kind == "absolute":
            values += self.level * z
        else:
            values *= 1.0 + self.level * z
        return values

    def describe(self) -> dict[str, Any]:
        return {"transform": "noise", "level": self.level, "kind": self.kind, "seed": self.seed, "which": list(self.which)}

    def tag(self) -> str:
        return f"noise-{'rel' if self.kind == 'relative' else 'abs'}-{self.level:g}"


def round_significant(values: Array, digits: int) -> Array:
    """``values`` rounded to ``digits`` significant decimal digits, correctly: the double nearest to
    the decimal ``format(v, f".{digits - 1}e")`` (ties of the exact binary value to even).

    Vectorised: ``v`` times (or divided by) an exact power of ten ``10^p`` (``|p| <= 22``), rounded to
    an integer, divided (multiplied) back: the last operation is one correctly rounded operation on
    exact numbers. Where the first product may have rounded across a half-integer (a near tie), or
    the power is beyond ``10^22``, the value is formatted by Python's correctly rounded conversion
    instead (rare: a share of about ``2^-52 10^digits`` of the values). Zeros, infinities and NaN
    are kept.
    """
    v = np.asarray(values, dtype=np.float64)
    out = v.copy()
    fin = np.isfinite(v) & (v != 0.0)
    if not fin.any():
        return out
    a = np.abs(v[fin])
    e = np.floor(np.log10(a)).astype(np.int64)
    with np.errstate(over="ignore", under="ignore"):
        e -= (a < _pow10(e)).astype(np.int64)  # log10 may round up just below a power of ten
        e += (a >= _pow10(e + 1)).astype(np.int64)  # ... or down just above one
    p = digits - 1 - e  # scale by 10^p: digits before the point
    exact = np.abs(p) <= 22
    vf = v[fin]
    res = np.empty_like(vf)
    pe = p[exact]
    ve = vf[exact]
    up = pe >= 0
    scaled = np.where(up, ve * _pow10(np.where(up, pe, 0)), ve / _pow10(np.where(up, 0, -pe)))
    r = np.round(scaled)
    res_e = np.where(up, r / _pow10(np.where(up, pe, 0)), r * _pow10(np.where(up, 0, -pe)))
    frac = np.abs(scaled - np.trunc(scaled))
    near_tie = np.abs(frac - 0.5) <= np.spacing(np.abs(scaled))  # the product's rounding is at most half of this
    res[exact] = res_e
    slow = np.flatnonzero(~exact)
    slow = np.concatenate([slow, np.flatnonzero(exact)[near_tie]])
    for i in slow:  # rare: exact decimal rounding by Python's formatting
        res[i] = float(format(float(vf[i]), f".{digits - 1}e"))
    out[fin] = res
    return out


def _pow10(p: NDArray[np.int64]) -> Array:
    out: Array = np.power(10.0, p.astype(np.float64))
    return out


@dataclass(frozen=True)
class Truncation(Transform):
    """Values rounded to ``digits`` significant decimal digits (1 to 15): the output of a program
    that prints its result with ``digits`` digits."""

    digits: int
    which: tuple[str, ...] = FUNCTIONS
    needs_hash: ClassVar[bool] = False

    def __post_init__(self) -> None:
        dg = self.digits
        if isinstance(dg, bool) or not isinstance(dg, (int, np.integer)) or not 1 <= dg <= 15:
            raise InvalidParameterError(
                f"truncated: digits must be an integer from 1 to 15 (significant decimal digits kept), got {dg!r}"
            )
        object.__setattr__(self, "digits", int(dg))
        object.__setattr__(self, "which", _which(self.which, "truncated"))

    def apply(self, values: Array, rows: U64 | None, idx: IntArray, function: str) -> Array:
        if function not in self.which:
            return values
        values[...] = round_significant(values, self.digits)
        return values

    def describe(self) -> dict[str, Any]:
        return {"transform": "truncation", "digits": self.digits, "which": list(self.which)}

    def tag(self) -> str:
        return f"digits-{self.digits}"


@dataclass(frozen=True)
class Failures(Transform):
    """NaN at a ``fraction`` of the points: every value of the functions in ``which`` at such a point."""

    fraction: float
    seed: int = 0
    which: tuple[str, ...] = FUNCTIONS

    def __post_init__(self) -> None:
        fr = self.fraction
        if isinstance(fr, bool) or not isinstance(fr, (int, float, np.integer, np.floating)) \
                or not 0.0 <= float(fr) < 1.0:
            raise InvalidParameterError(
                f"with_nan: fraction must be a number in [0, 1) (the share of points whose values are NaN), got {fr!r}"
            )
        object.__setattr__(self, "fraction", float(fr))
        object.__setattr__(self, "seed", _seed(self.seed, "with_nan"))
        object.__setattr__(self, "which", _which(self.which, "with_nan"))

    def failed(self, rows: U64) -> NDArray[np.bool_]:
        """Which rows fail, from their hashes ``(k,)``: each with probability ``fraction``."""
        with np.errstate(over="ignore"):
            u = _uniform(_mix(rows ^ _seed_key(self.seed, int(_NAN_TAG))))
        out: NDArray[np.bool_] = u < self.fraction
        return out

    def apply(self, values: Array, rows: U64 | None, idx: IntArray, function: str) -> Array:
        if function not in self.which or self.fraction == 0.0 or rows is None:
            return values
        values[self.failed(rows)] = np.nan
        return values

    def describe(self) -> dict[str, Any]:
        return {"transform": "nan", "fraction": self.fraction, "seed": self.seed, "which": list(self.which)}

    def tag(self) -> str:
        return f"nan-{self.fraction:g}"


#: structural attributes kept from the clean problem (where it has them)
_STRUCTURE = (
    "kind", "dim", "n", "m", "m_eq", "x0", "y0", "dim_y", "y_set", "feasible_set", "A", "B", "c", "penalties",
    "convex_constraints", "black_box_constraints", "violation_tol", "monitor_free", "bounds",
)  # fmt: skip
#: the clean problem's methods kept as they are
_FORWARDED = ("measures", "known_solution")
#: the evaluation methods and the function each one is
_METHODS = {"components": "objective", "constraints": "constraints", "equalities": "equalities", "values": "objective"}


class ImperfectProblem:
    """A problem whose function values are those of ``clean`` passed through ``transforms`` in order.

    Built by :func:`noisy`, :func:`truncated`, :func:`with_nan` and :func:`apply`; read-only. See
    :mod:`zoframe.imperfect` for what is kept, what is dropped and how the randomness is made.
    """

    kind: str
    dim: int
    n: int
    m: int
    m_eq: int
    x0: Array
    y0: Any
    dim_y: int
    y_set: ConvexSet | None
    feasible_set: ConvexSet | None
    A: Array
    B: Sequence[Array]
    c: Array
    penalties: Sequence[Penalty]
    convex_constraints: bool
    black_box_constraints: bool
    violation_tol: float
    name: str
    #: every call returns a new array that nothing else holds
    fresh_results: ClassVar[bool] = True

    def __init__(self, clean: Any, transforms: Sequence[Transform]) -> None:
        self._setup(clean, tuple(transforms))

    def _setup(self, clean: Any, transforms: tuple[Transform, ...]) -> None:
        if isinstance(clean, ImperfectProblem):
            clean, transforms = clean.clean, clean.transforms + transforms
        kind = getattr(clean, "kind", None)
        if kind not in ("finite_sum", "constrained", "minimax", "composite"):
            raise InvalidInputError(
                f"an imperfect problem wraps a zoframe problem (kind 'finite_sum', 'constrained', 'minimax' or "
                f"'composite'); {type(clean).__name__} has kind={kind!r}"
            )
        for t in transforms:
            if not isinstance(t, Transform):
                raise InvalidInputError(f"transforms must be Noise, Truncation or Failures objects, got {type(t).__name__}")
        d = self.__dict__
        d["_clean"], d["_transforms"] = clean, transforms
        d["_hash"] = any(t.needs_hash for t in transforms)
        for name in _STRUCTURE:
            if hasattr(clean, name):
                d[name] = getattr(clean, name)
        for name in _FORWARDED:
            fn = getattr(clean, name, None)
            if callable(fn):
                d[name] = fn
        for name in _METHODS:
            if callable(getattr(clean, name, None)):
                d[name] = getattr(self, f"_{name}")
        base = str(getattr(clean, "name", "") or type(clean).__name__)
        d["name"] = base + "".join(f"+{t.tag()}" for t in transforms)

    # -------------------------------------------------------------------- plain data and pickling
    @property
    def clean(self) -> Any:
        """The clean problem (the innermost one when wrappers were stacked)."""
        return self.__dict__["_clean"]

    @property
    def transforms(self) -> tuple[Transform, ...]:
        """The transforms, applied in this order."""
        out: tuple[Transform, ...] = self.__dict__["_transforms"]
        return out

    @property
    def imperfection(self) -> list[dict[str, Any]]:
        """The transforms as plain data (a new list of JSON-safe dicts; :func:`apply` reads it back)."""
        return [t.describe() for t in self.transforms]

    def __getstate__(self) -> dict[str, Any]:
        return {"clean": self.clean, "transforms": self.transforms}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self._setup(state["clean"], tuple(state["transforms"]))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"an ImperfectProblem is read-only (cannot set {name!r}); build a new one")

    def __repr__(self) -> str:
        return f"ImperfectProblem({self.name!r}, kind={self.kind!r}, imperfection={self.imperfection!r})"

    # -------------------------------------------------------------------- evaluations
    def _transform(self, raw: Any, blocks: tuple[Array, ...], idx: IntArray, function: str) -> Any:
        k, b = blocks[0].shape[0], len(idx)
        values = np.array(raw, dtype=np.float64, copy=True)
        if values.ndim == 1 and values.shape[0] == k and b == 1:
            values = values.reshape(k, 1)
        if values.shape != (k, b):  # not what the clean problem should return: the oracle's checks say so
            return raw
        rows = row_hash(*blocks) if self.__dict__["_hash"] else None
        ids = np.asarray(idx, dtype=np.intp)
        for t in self.transforms:
            values = t.apply(values, rows, ids, function)
        return values

    def _components(self, X: Array, idx: IntArray) -> Any:
        return self._transform(self.clean.components(X, idx), (X,), idx, "objective")

    def _constraints(self, X: Array, idx: IntArray) -> Any:
        return self._transform(self.clean.constraints(X, idx), (X,), idx, "constraints")

    def _equalities(self, X: Array, idx: IntArray) -> Any:
        return self._transform(self.clean.equalities(X, idx), (X,), idx, "equalities")

    def _values(self, X: Array, Y: Array, idx: IntArray) -> Any:
        return self._transform(self.clean.values(X, Y, idx), (X, Y), idx, "objective")


def noisy(
    problem: Any, level: float, *, kind: str = "absolute", seed: int = 0, which: Sequence[str] = FUNCTIONS
) -> ImperfectProblem:
    """``problem`` with Gaussian noise on its values: ``f + level z`` (``kind="absolute"``) or
    ``f (1 + level z)`` (``"relative"``), ``z`` standard normal, a function of ``(seed, point, component
    index, function)`` only; ``which``: the functions that get noise (default all of
    ``("objective", "constraints", "equalities")``)."""
    return ImperfectProblem(problem, (Noise(level, kind, seed, tuple(which)),))


def truncated(problem: Any, digits: int, *, which: Sequence[str] = FUNCTIONS) -> ImperfectProblem:
    """``problem`` with its values rounded to ``digits`` significant decimal digits (1 to 15)."""
    return ImperfectProblem(problem, (Truncation(digits, tuple(which)),))


def with_nan(problem: Any, fraction: float, *, seed: int = 0, which: Sequence[str] = FUNCTIONS) -> ImperfectProblem:
    """``problem`` whose values are NaN at a ``fraction`` of the points (chosen by ``(seed, point)``);
    a solver sees them through the oracle's ``nonfinite`` policy (``minimize(..., nonfinite="inf")``
    to treat them as ``+inf`` instead of stopping the run)."""
    return ImperfectProblem(problem, (Failures(fraction, seed, tuple(which)),))


_READERS: dict[str, Callable[[Mapping[str, Any]], Transform]] = {
    "noise": lambda d: Noise(d["level"], d.get("kind", "absolute"), d.get("seed", 0), tuple(d.get("which", FUNCTIONS))),
    "truncation": lambda d: Truncation(d["digits"], tuple(d.get("which", FUNCTIONS))),
    "nan": lambda d: Failures(d["fraction"], d.get("seed", 0), tuple(d.get("which", FUNCTIONS))),
}


def read(imperfection: Sequence[Mapping[str, Any]] | Mapping[str, Any]) -> tuple[Transform, ...]:
    """The transforms described as plain data (``ImperfectProblem.imperfection``), checked."""
    items = [imperfection] if isinstance(imperfection, Mapping) else list(imperfection)
    transforms: list[Transform] = []
    for item in items:
        if not isinstance(item, Mapping) or item.get("transform") not in _READERS:
            raise InvalidInputError(
                f"a transform is a mapping with 'transform' one of {sorted(_READERS)} (as ImperfectProblem.imperfection "
                f"gives), got {item!r}"
            )
        try:
            transforms.append(_READERS[str(item["transform"])](item))
        except KeyError as exc:
            raise InvalidInputError(f"transform {item!r} lacks the field {exc}") from None
    return tuple(transforms)


def apply(problem: Any, imperfection: Sequence[Mapping[str, Any]] | Mapping[str, Any]) -> Any:
    """``problem`` under the transforms described as plain data (``ImperfectProblem.imperfection``);
    an empty description gives ``problem`` itself."""
    transforms = read(imperfection)
    return ImperfectProblem(problem, transforms) if transforms else problem
