"""Minimax problems: the synthetic NC-SC problem ``ncsc`` and the DRO problem ``dro``.

Both compute, along a run, the stationarity of Wang et al. (section 2.2, SPEC section 4):
``g(x) = max_{y in Y} f(x, y)``, ``grad g(x) = grad_x f(x, y*(x))`` (Danskin), both exact through
a closed-form inner maximiser ``y*(x)``, and the projected-gradient mapping of the y block
``(y - Proj_Y(y + eta grad_y f)) / eta``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
import math
from typing import ClassVar, Protocol

import numpy as np

from zoframe.errors import InvalidInputError, ShapeError
from zoframe.measures import gradient_mapping
from zoframe.oracle import MonitorOracle
from zoframe.protocols import Array, IntArray
from zoframe.sets import Ball, Box, Simplex

__all__ = ["DRO", "NCSC", "PAPER_SIZES", "YSet", "dro", "y_set_by_name"]


class YSet(Protocol):
    """What the problems here need of Y: its dimension and the Euclidean projection.

    (``zoframe.protocols.ConvexSet`` declares ``dim`` as a settable attribute, which the frozen
    sets of ``zoframe.sets`` do not satisfy under mypy; a read-only property does.)
    """

    @property
    def dim(self) -> int: ...

    def project(self, x: Array) -> Array: ...


def y_set_by_name(name: str | None, dim: int) -> YSet | None:
    """``None``/``"reals"``: R^d; ``"box"``: [-1, 1]^d; ``"ball"``: the unit ball; ``"simplex"``."""
    if name is None or name == "reals":
        return None
    if name == "box":
        return Box(dim, -1.0, 1.0)
    if name == "ball":
        return Ball(dim, 1.0)
    if name == "simplex":
        return Simplex(dim)
    raise InvalidInputError(f"unknown y_set {name!r}; choose one of 'reals', 'box', 'ball', 'simplex'")


def _stationarity(
    x: Array, y: Array, gx: Array, gy: Array, y_star: Array, g: float, grad_g: Array, y_set: YSet | None, eta: float
) -> dict[str, float]:
    """The measures of a minimax run at ``(x, y)``.

    ``fun`` (set by the caller) is ``F(x, y)`` at the run's own ``y``; ``primal`` is the primal value
    ``g(x) = max_y F(x, y)`` (the quantity minimised; ``fun`` can lie below it), ``g`` the same value
    under the papers' name.
    """
    mapping = gradient_mapping(y, -gy, None if y_set is None else y_set.project, eta)
    return {
        "primal": g,
        "g": g,
        "grad_g_norm": float(np.linalg.norm(grad_g)),
        "grad_x_norm": float(np.linalg.norm(gx)),
        "y_mapping_norm": float(np.linalg.norm(mapping)),
        "dist_y_star": float(np.linalg.norm(y - y_star)),
    }


# --------------------------------------------------------------------------- synthetic NC-SC
@dataclass(frozen=True, eq=False)
class NCSC:
    """Synthetic nonconvex-strongly-concave problem with known ``kappa`` and closed-form ``y*(x)``.

    ``F_i(x, y) = w(x) + a_i^T x + y^T (B x + c_i) - (tau/2) ||y||^2``, ``f = (1/n) sum_i F_i``, with
    ``w(x) = (1/2) sum_j log(1 + x_j^2)`` (nonconvex, ``w'' in [-1/8, 1]``), ``||B||_2 = 1``,
    ``sum_i a_i = 0`` and ``c = mean_i c_i``. The Hessian of ``f`` has norm at most ``ell = 2`` for
    ``tau <= 1``, so ``tau = ell / kappa`` gives the condition number ``kappa`` (``kappa >= 2``).
    ``y*(x) = Proj_Y((B x + c) / tau)`` for every Y here (``f`` is isotropic in y), hence
    ``g(x) = w(x) + y*^T (B x + c) - tau/2 ||y*||^2`` and ``grad g(x) = w'(x) + B^T y*(x)``.
    ``g`` is nonconvex when ``d2 < d1`` and bounded below. ``n > 1`` adds sample noise (``noise``)
    for the stochastic solvers. ``c ~ N(0, I)``; ``offset_norm`` rescales it to a fixed norm, which
    keeps the landscape comparable across dimensions (complexity studies).
    """

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    fresh_results: ClassVar[bool] = True  # every call of its functions returns a new array, held by nothing else
    kind: ClassVar[str] = "minimax"
    ell: ClassVar[float] = 2.0
    d1: int = 10
    d2: int = 5
    kappa: float = 10.0
    n: int = 1
    noise: float = 0.5
    y_set_name: str | None = None
    offset_norm: float | None = None
    seed: int = 0
    name: str = "ncsc"
    dim: int = field(init=False)
    dim_y: int = field(init=False)
    tau: float = field(init=False)
    B: Array = field(init=False, repr=False)
    a: Array = field(init=False, repr=False)
    c: Array = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)
    y0: Array = field(init=False, repr=False)
    y_set: YSet | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for nm in ("d1", "d2", "n"):
            v = getattr(self, nm)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise InvalidInputError(f"ncsc: {nm} must be a positive integer, got {v!r}")
        if not (isinstance(self.kappa, (int, float)) and 2.0 <= self.kappa < math.inf):
            raise InvalidInputError(
                f"ncsc: kappa must be a finite number >= 2 (ell = 2 and tau = ell/kappa <= 1), got {self.kappa!r}"
            )
        if not self.noise >= 0:
            raise InvalidInputError(f"ncsc: noise must be >= 0, got {self.noise!r}")
        rng = np.random.default_rng(self.seed)
        B = rng.standard_normal((self.d2, self.d1))
        B /= np.linalg.norm(B, 2)
        a = self.noise * rng.standard_normal((self.n, self.d1))
        a -= a.mean(axis=0)
        c0 = rng.standard_normal(self.d2)
        if self.offset_norm is not None:
            if not self.offset_norm >= 0:
                raise InvalidInputError(f"ncsc: offset_norm must be >= 0, got {self.offset_norm!r}")
            c0 *= self.offset_norm / np.linalg.norm(c0)
        ci = c0 + self.noise * rng.standard_normal((self.n, self.d2))
        x0 = 3.0 * rng.standard_normal(self.d1)
        y_set = y_set_by_name(self.y_set_name, self.d2)
        y0 = np.zeros(self.d2) if y_set is None or isinstance(y_set, (Box, Ball)) else np.full(self.d2, 1.0 / self.d2)
        for arr in (B, a, ci, x0, y0):
            arr.setflags(write=False)
        object.__setattr__(self, "dim", int(self.d1))
        object.__setattr__(self, "dim_y", int(self.d2))
        object.__setattr__(self, "tau", self.ell / float(self.kappa))
        object.__setattr__(self, "B", B)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "c", ci)
        object.__setattr__(self, "x0", x0)
        object.__setattr__(self, "y0", y0)
        object.__setattr__(self, "y_set", y_set)

    # ---- oracle
    def values(self, X: Array, Y: Array, idx: IntArray) -> Array:
        w = 0.5 * np.log1p(X * X).sum(axis=1)  # (k,)
        BX = X @ self.B.T  # (k, d2)
        common = w + np.einsum("kj,kj->k", Y, BX) - 0.5 * self.tau * np.einsum("kj,kj->k", Y, Y)
        out: Array = common[:, None] + X @ self.a[idx].T + Y @ self.c[idx].T
        return out

    def minimax_gradients(self, x: Array, y: Array, idx: IntArray) -> tuple[Array, Array]:
        gx = x / (1.0 + x * x) + self.B.T @ y
        gy = self.B @ x - self.tau * y
        return gx[None, :] + self.a[idx], gy[None, :] + self.c[idx]

    # ---- white-box stationarity
    def y_star(self, x: Array) -> Array:
        v = (self.B @ x + self.c.mean(axis=0)) / self.tau
        out: Array = v if self.y_set is None else self.y_set.project(v)
        return out

    def g(self, x: Array) -> float:
        ys = self.y_star(x)
        w = 0.5 * float(np.log1p(x * x).sum())
        return w + float(ys @ (self.B @ x + self.c.mean(axis=0))) - 0.5 * self.tau * float(ys @ ys)

    def grad_g(self, x: Array) -> Array:
        out: Array = x / (1.0 + x * x) + self.B.T @ self.y_star(x)
        return out

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x, y = outputs["x"], outputs["y"]
        gx, gy = (v.mean(axis=0) for v in self.minimax_gradients(x, y, np.arange(self.n)))
        out = {"fun": float(monitor.minimax(x, y).mean())}
        out.update(_stationarity(x, y, gx, gy, self.y_star(x), self.g(x), self.grad_g(x), self.y_set, 1.0 / self.ell))
        return out


# --------------------------------------------------------------------------- DRO (section 5)
#: samples per dataset in the paper's Table 2 (colon-cancer: only 62 rows exist, all are used)
PAPER_SIZES: dict[str, int] = {"a9a": 200, "mushrooms": 100, "w8a": 100, "colon-cancer": 62}


@dataclass(frozen=True, eq=False)
class DRO:
    """Distributionally robust loss of Wang et al., section 5 (after Namkoong & Duchi 2016).

    ``min_x max_{y in simplex} sum_i y_i l_i(x) - lam sum_i (y_i - 1/n)^2`` with ``lam = 10`` and
    ``l_i(x) = f1(f2(x)) = log(1 + log(1 + exp(-z_i x^T s_i)))``: nonconvex in x, ``2 lam``-strongly
    concave in y. As a finite sum ``f = (1/n) sum_i F_i`` with ``F_i(x, y) = n y_i l_i(x) - r(y)``.
    ``y*(x) = Proj_simplex(1/n + l(x) / (2 lam))`` in closed form, so ``g`` and ``grad g`` are exact.
    """

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    fresh_results: ClassVar[bool] = True  # every call of its functions returns a new array, held by nothing else
    kind: ClassVar[str] = "minimax"
    features: Array
    labels: Array
    lam: float = 10.0
    name: str = "dro"
    dim: int = field(init=False)
    dim_y: int = field(init=False)
    n: int = field(init=False)
    x0: Array = field(init=False, repr=False)
    y0: Array = field(init=False, repr=False)
    y_set: Simplex = field(init=False, repr=False)

    def __post_init__(self) -> None:
        S = np.array(self.features, dtype=np.float64, copy=True)
        z = np.array(self.labels, dtype=np.float64, copy=True).reshape(-1)
        if S.ndim != 2 or S.shape[0] < 2:
            raise ShapeError(f"dro: features must be an (n, d) matrix with n >= 2, got shape {S.shape}")
        if z.shape[0] != S.shape[0]:
            raise ShapeError(f"dro: {z.shape[0]} labels for {S.shape[0]} samples")
        if not np.all(np.isin(z, (-1.0, 1.0))):
            raise InvalidInputError("dro: labels must be -1 or +1 (map them with zoframe_datasets.binary_labels)")
        if not np.all(np.isfinite(S)):
            raise InvalidInputError("dro: features contain NaN or infinity")
        if not self.lam > 0:
            raise InvalidInputError(f"dro: the regulariser weight lam must be > 0 (strong concavity), got {self.lam}")
        n, d = S.shape
        x0, y0 = np.zeros(d), np.full(n, 1.0 / n)
        for arr in (S, z, x0, y0):
            arr.setflags(write=False)
        object.__setattr__(self, "features", S)
        object.__setattr__(self, "labels", z)
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "dim", d)
        object.__setattr__(self, "dim_y", n)
        object.__setattr__(self, "x0", x0)
        object.__setattr__(self, "y0", y0)
        object.__setattr__(self, "y_set", Simplex(n))

    # ---- pieces
    def losses(self, X: Array, idx: IntArray | None = None) -> Array:
        """``l_i(x)`` for the rows of ``X`` (``(k, d)``) and samples ``idx``: ``(k, b)``."""
        S = self.features if idx is None else self.features[idx]
        z = self.labels if idx is None else self.labels[idx]
        m = -(X @ S.T) * z  # -z_i x^T s_i
        out: Array = np.log1p(np.logaddexp(0.0, m))
        return out

    def reg(self, Y: Array) -> Array:
        """``r(y) = lam sum_i (y_i - 1/n)^2`` for each row of ``Y``."""
        D = Y - 1.0 / self.n
        out: Array = self.lam * np.einsum("kj,kj->k", D, D)
        return out

    def values(self, X: Array, Y: Array, idx: IntArray) -> Array:
        out: Array = self.n * Y[:, idx] * self.losses(X, idx) - self.reg(Y)[:, None]
        return out

    def _loss_grads(self, x: Array, idx: IntArray | None = None) -> tuple[Array, Array]:
        S = self.features if idx is None else self.features[idx]
        z = self.labels if idx is None else self.labels[idx]
        m = -(S @ x) * z
        f2 = np.logaddexp(0.0, m)
        sig = np.exp(m - f2)  # sigmoid(m), stable
        coef = -z * sig / (1.0 + f2)  # d l_i / d (x^T s_i)
        grads: Array = coef[:, None] * S
        return np.log1p(f2), grads

    def minimax_gradients(self, x: Array, y: Array, idx: IntArray) -> tuple[Array, Array]:
        l_i, gl = self._loss_grads(x, idx)
        gx: Array = (self.n * y[idx])[:, None] * gl
        gy = np.repeat((-2.0 * self.lam * (y - 1.0 / self.n))[None, :], len(idx), axis=0)
        gy[np.arange(len(idx)), idx] += self.n * l_i
        return gx, gy

    # ---- white-box stationarity
    def y_star(self, x: Array) -> Array:
        l_all = self.losses(x[None, :])[0]
        out: Array = self.y_set.project(1.0 / self.n + l_all / (2.0 * self.lam))
        return out

    def f(self, x: Array, y: Array) -> float:
        return float(y @ self.losses(x[None, :])[0] - self.reg(y[None, :])[0])

    def g(self, x: Array) -> float:
        return self.f(x, self.y_star(x))

    def grad_g(self, x: Array) -> Array:
        _, gl = self._loss_grads(x)
        out: Array = self.y_star(x) @ gl
        return out

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x, y = outputs["x"], outputs["y"]
        l_all, gl = self._loss_grads(x)
        gx = y @ gl
        gy = l_all - 2.0 * self.lam * (y - 1.0 / self.n)
        ys = self.y_star(x)
        out = {"fun": float(monitor.minimax(x, y).mean())}
        g = float(ys @ l_all - self.reg(ys[None, :])[0])
        out.update(_stationarity(x, y, gx, gy, ys, g, ys @ gl, self.y_set, 1.0 / (2.0 * self.lam)))
        return out


def dro(
    dataset: str = "a9a", n: int | None = None, seed: int = 0, lam: float = 10.0, data_dir: str | None = None
) -> DRO:
    """The DRO problem of section 5 on a LIBSVM dataset, subsampled with a 1:3 positive:negative ratio.

    ``n`` defaults to the paper's Table 2 size (a9a 200, mushrooms 100, w8a 100); colon-cancer has only
    62 rows, so all 62 are used (22 positive, 40 negative: the 1:3 ratio is not attainable there).
    The subsample is drawn with ``seed``; labels are mapped to -1/+1 (the larger label is +1).
    """
    from zoframe_datasets import binary_labels, load_libsvm, stratified_subsample

    X, labels = load_libsvm(dataset, data_dir=data_dir)
    z = binary_labels(labels)
    rows = X.shape[0]
    size = PAPER_SIZES.get(dataset, 200) if n is None else int(n)
    if isinstance(size, bool) or size < 2:
        raise InvalidInputError(f"dro: n must be an integer >= 2, got {n!r}")
    if size >= rows:
        idx = np.arange(rows)
    else:
        idx = stratified_subsample(z, size, 0.25, rng=np.random.default_rng(seed))
    dense = np.asarray(X[idx].toarray(), dtype=np.float64)
    return DRO(dense, z[idx], lam=lam, name=f"dro-{dataset}")
