"""Composite test problems of Huang, Gao, Chen & Huang (IJCAI 2019), section 6.

* :class:`FusedLassoToy` -- a small convex problem with a cvxpy-checkable solution: least squares
  plus ``tau1 ||x||_1 + tau2 ||D x||_1`` (``D`` first differences);
* :class:`FusedLasso` -- robust black-box binary classification with graph-guided fused lasso,
  eq. (8): correntropy loss ``(s^2/2)(1 - exp(-(l_i - a_i^T x)^2 / s^2))`` plus
  ``tau1 ||x||_1 + tau2 ||A~ x||_1``; ``A~`` is the incidence matrix (rows ``e_i - e_j``) of the
  graph of a sparse precision matrix estimated by graphical lasso;
* :class:`StructuredAttack` -- a universal structured perturbation, eq. (9), against a black-box
  classifier trained at run time on scikit-learn's 8x8 digits, with the overlapping 3x3 group
  lasso (stride 1) and ``tau2 ||x||_2^2``.

All three are stated in the form ``A x + sum_j B_j y_j = c`` with ``y_1 = x`` and ``y_2`` = the
second linear image of ``x`` (``B_j = -I`` on their rows, ``c = 0``). Their measures record
``fun`` (the objective at ``x``), ``residual`` ``||A x + B y - c||``, and ``stationarity`` =
``dist(0, dL(x, y, lam))^2`` of Definition 1 when the solver reports ``y`` and ``lam``
(white-box gradient for the smooth losses, high-accuracy central differences through the
monitor for the attack loss).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
import functools
import hashlib
import os
from pathlib import Path
from typing import Any, ClassVar
import warnings

import numpy as np
import scipy.sparse as sp

from zoframe.errors import InvalidInputError
from zoframe.measures import admm_stationarity, central_difference_gradient
from zoframe.oracle import MonitorOracle
from zoframe.penalties import L1, SquaredL2
from zoframe.problems import HalfSquaredResiduals
from zoframe.protocols import Array, IntArray, Penalty
from zoframe_admm.penalties import BlockGroupL2, overlapping_groups_matrix

__all__ = ["FusedLasso", "FusedLassoToy", "StructuredAttack", "graph_incidence", "two_block_coupling"]


def two_block_coupling(F: Array) -> tuple[Array, tuple[Array, Array], Array]:
    """``A = [I; F]``, ``B_1 = [-I; 0]``, ``B_2 = [0; -I]``, ``c = 0``: ``y_1 = x``, ``y_2 = F x``."""
    d, p = F.shape[1], F.shape[0]
    A = np.vstack([np.eye(d), F])
    B1 = np.vstack([-np.eye(d), np.zeros((p, d))])
    B2 = np.vstack([np.zeros((d, p)), -np.eye(p)])
    return A, (B1, B2), np.zeros(d + p)


def _composite_measures(
    prob: Any, outputs: Mapping[str, Array], grad: Array | None, f_value: float
) -> dict[str, float]:
    x = outputs["x"]
    ys = [outputs.get(f"y{j}") for j in range(len(prob.B))]
    images = [-(Bj.T @ (prob.A @ x - prob.c)) for Bj in prob.B]  # y_j(x): each B_j selects its rows with -I
    out = {"fun": f_value + sum(p.value(v) for p, v in zip(prob.penalties, images)), "loss": f_value}
    if all(y is not None for y in ys):
        yv = [np.asarray(y) for y in ys]
        r = prob.A @ x + sum(b @ y for b, y in zip(prob.B, yv)) - prob.c
        out["residual"] = float(np.linalg.norm(r))
        lam = outputs.get("lam")
        if lam is not None and grad is not None:
            out["stationarity"] = admm_stationarity(grad, prob.A, prob.B, prob.c, x, yv, np.asarray(lam), prob.penalties)
    return out


# --------------------------------------------------------------------------- toy problem
@dataclass(frozen=True, eq=False)
class FusedLassoToy(HalfSquaredResiduals):
    """``(1/n) sum_i (a_i^T x - b_i)^2 / 2 + tau1 ||x||_1 + tau2 ||D x||_1`` (convex, small).

    ``D`` is the ``(d-1) x d`` first-difference matrix; the data have a piecewise-constant sparse
    planted ``x``. White-box gradients (``component_gradients``) make Definition 1 computable;
    ``cvxpy_model()`` (used by tests and verification only) states the problem for a reference solve.
    """

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    fresh_results: ClassVar[bool] = True  # every call of its functions returns a new array, held by nothing else
    fresh_results: ClassVar[bool] = True  # every call of its functions returns a new array, held by nothing else
    kind: ClassVar[str] = "composite"
    dim: int = 8
    n: int = 60
    tau1: float = 0.05
    tau2: float = 0.05
    noise: float = 0.05
    seed: int = 0
    name: str = "fused-lasso-toy"
    data: Array = field(init=False, repr=False)
    target: Array = field(init=False, repr=False)
    F: Array = field(init=False, repr=False)
    A: Array = field(init=False, repr=False)
    B: tuple[Array, ...] = field(init=False, repr=False)
    c: Array = field(init=False, repr=False)
    penalties: tuple[Penalty, ...] = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)
    y0: tuple[Array, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.dim < 2 or self.n < 1:
            raise InvalidInputError(f"fused-lasso-toy needs dim >= 2 and n >= 1, got dim={self.dim}, n={self.n}")
        if self.tau1 < 0 or self.tau2 < 0:
            raise InvalidInputError("tau1 and tau2 must be >= 0")
        rng = np.random.default_rng(self.seed)
        data = rng.standard_normal((self.n, self.dim))
        planted = np.zeros(self.dim)
        planted[: self.dim // 2] = 1.0
        target = data @ planted + self.noise * rng.standard_normal(self.n)
        F = np.diff(np.eye(self.dim), axis=0)
        A, B, c = two_block_coupling(F)
        for arr in (data, target, F, A, c, *B):
            arr.setflags(write=False)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "F", F)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "B", B)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "penalties", (L1(self.tau1), L1(self.tau2)))
        object.__setattr__(self, "x0", np.zeros(self.dim))
        object.__setattr__(self, "y0", (np.zeros(self.dim), np.zeros(self.dim - 1)))

    def cvxpy_model(self) -> Any:
        """``(problem, x)`` as a cvxpy model (tests and verification only)."""
        from zoframe._optional import require

        cvx: Any = require("cvxpy", feature="the cvxpy model of this problem (its reference solution)")
        x = cvx.Variable(self.dim)
        obj = 0.5 * cvx.sum_squares(self.data @ x - self.target) / self.n
        obj = obj + self.tau1 * cvx.norm1(x) + self.tau2 * cvx.norm1(self.F @ x)
        return cvx.Problem(cvx.Minimize(obj)), x

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x = outputs["x"]
        f = float(monitor.objective(x).mean())
        return _composite_measures(self, outputs, self.full_gradient(x), f)


# --------------------------------------------------------------------------- graph-guided fused lasso
def _cache_root() -> Path:
    env = os.environ.get("ZOFRAME_CACHE", "")
    if env:
        return Path(env) / "admm"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "zoframe" / "admm"


def graph_incidence(
    features: Array, *, alphas: tuple[float, ...] = (0.2, 0.3, 0.4, 0.6), max_edges: int | None = None, cache_key: str | None = None
) -> Array:
    """Incidence matrix ``A~`` (one row ``e_i - e_j`` per edge) of a sparse precision-matrix graph.

    The precision matrix is estimated by scikit-learn's ``GraphicalLasso`` (Friedman et al. 2008)
    on the standardised ``features`` (constant columns get no edge), with the first penalty in
    ``alphas`` for which the solver succeeds. Edges are the nonzero off-diagonal entries, the
    ``max_edges`` strongest by absolute partial correlation (default ``2 d``). Cached on disk
    under ``cache_key`` (``$ZOFRAME_CACHE/admm`` or ``~/.cache/zoframe/admm``).
    """
    from zoframe._optional import require

    GraphicalLasso = require("sklearn.covariance", feature="the graph of the graph-guided problems").GraphicalLasso

    d = features.shape[1]
    cap = 2 * d if max_edges is None else int(max_edges)
    path = None
    if cache_key is not None:
        digest = hashlib.sha256(f"{cache_key}|{alphas}|{cap}".encode()).hexdigest()[:16]
        path = _cache_root() / f"graph-{digest}.npy"
        if path.exists():
            out: Array = np.load(path, allow_pickle=False)
            return out
    sd = features.std(axis=0)
    keep = np.flatnonzero(sd > 1e-8)
    Z = (features[:, keep] - features[:, keep].mean(axis=0)) / sd[keep]
    theta = None
    for alpha in alphas:
        with warnings.catch_warnings():
            # graphical lasso may stop at max_iter on binary data; its estimate is still a usable sparse graph
            warnings.simplefilter("ignore")
            try:
                theta = GraphicalLasso(alpha=alpha, max_iter=100, tol=1e-3).fit(Z).precision_
                break
            except (FloatingPointError, ValueError, np.linalg.LinAlgError):
                continue
    if theta is None:
        raise InvalidInputError(f"graphical lasso failed for every penalty in {alphas}; pass larger alphas")
    dg = np.sqrt(np.abs(np.diag(theta)))
    pc = -theta / np.outer(dg, dg)
    iu, ju = np.triu_indices(len(keep), 1)
    strength = np.abs(pc[iu, ju])
    nz = np.flatnonzero(strength > 1e-8)
    nz = nz[np.argsort(-strength[nz], kind="stable")][:cap]
    inc = np.zeros((nz.size, d))
    inc[np.arange(nz.size), keep[iu[nz]]] = 1.0
    inc[np.arange(nz.size), keep[ju[nz]]] = -1.0
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
        np.save(tmp, inc)
        os.replace(tmp, path)
    return inc


@functools.lru_cache(maxsize=8)
def _load_binary(dataset: str, group: int) -> tuple[sp.csr_matrix, Array]:
    from zoframe_datasets import binary_labels, load_libsvm

    X, y = load_libsvm(dataset)
    if dataset.startswith("20news"):
        labels = np.where(y == group, 1.0, -1.0)
    else:
        labels = binary_labels(y)
    return sp.csr_matrix(X, dtype=np.float64), labels


@dataclass(frozen=True, eq=False)
class FusedLasso:
    """Robust black-box binary classification with graph-guided fused lasso (IJCAI 2019, eq. 8).

    ``f_i(x) = (s^2/2)(1 - exp(-(l_i - a_i^T x)^2 / s^2))`` on half of the samples (train), test
    loss on the other half; penalties ``tau1 ||x||_1`` and ``tau2 ||A~ x||_1`` (``A~`` from
    :func:`graph_incidence`). ``dataset``: ``a9a``, ``w8a`` or ``20news`` (``20news_w100``, group
    ``group`` against the rest); ``n_samples`` subsamples the data before the split (``None``: all).
    """

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    kind: ClassVar[str] = "composite"
    dataset: str = "a9a"
    n_samples: int | None = None
    tau1: float = 1e-5
    tau2: float = 1e-5
    sigma: float = 1.0
    group: int = 1
    seed: int = 0
    name: str = "fused-lasso"
    dim: int = field(init=False)
    n: int = field(init=False)
    train: sp.csr_matrix = field(init=False, repr=False)
    labels: Array = field(init=False, repr=False)
    test: sp.csr_matrix = field(init=False, repr=False)
    test_labels: Array = field(init=False, repr=False)
    F: Array = field(init=False, repr=False)
    A: Array = field(init=False, repr=False)
    B: tuple[Array, ...] = field(init=False, repr=False)
    c: Array = field(init=False, repr=False)
    penalties: tuple[Penalty, ...] = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)
    y0: tuple[Array, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.dataset not in ("a9a", "w8a", "20news", "20news_w100"):
            raise InvalidInputError(
                f"unknown dataset {self.dataset!r} for fused-lasso: use 'a9a', 'w8a' or '20news' "
                "(covtype.binary is not available offline)"
            )
        if not (self.sigma > 0 and self.tau1 >= 0 and self.tau2 >= 0):
            raise InvalidInputError("fused-lasso needs sigma > 0, tau1 >= 0 and tau2 >= 0")
        name = "20news_w100" if self.dataset.startswith("20news") else self.dataset
        X, labels = _load_binary(name, self.group)
        rng = np.random.default_rng(self.seed)
        order = rng.permutation(X.shape[0])
        if self.n_samples is not None:
            if not (isinstance(self.n_samples, int) and 4 <= self.n_samples <= X.shape[0]):
                raise InvalidInputError(f"n_samples must be an integer in [4, {X.shape[0]}], got {self.n_samples!r}")
            order = order[: self.n_samples]
        half = order.shape[0] // 2
        tr, te = np.sort(order[:half]), np.sort(order[half:])
        train, test = X[tr], X[te]
        sub = tr[np.random.default_rng(self.seed + 1).permutation(tr.size)[:2000]]
        F = graph_incidence(
            np.asarray(X[np.sort(sub)].todense()), cache_key=f"{name}|{self.n_samples}|{self.seed}|{self.group}"
        )
        A, B, c = two_block_coupling(F)
        d = X.shape[1]
        for arr in (F, A, c, *B):
            arr.setflags(write=False)
        object.__setattr__(self, "dim", d)
        object.__setattr__(self, "n", int(half))
        object.__setattr__(self, "train", train)
        object.__setattr__(self, "labels", labels[tr])
        object.__setattr__(self, "test", test)
        object.__setattr__(self, "test_labels", labels[te])
        object.__setattr__(self, "F", F)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "B", B)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "penalties", (L1(self.tau1), L1(self.tau2)))
        object.__setattr__(self, "x0", np.zeros(d))
        object.__setattr__(self, "y0", (np.zeros(d), np.zeros(F.shape[0])))

    def _loss(self, data: sp.csr_matrix, labels: Array, X: Array) -> Array:
        s2 = self.sigma**2
        r = labels[:, None] - np.asarray(data @ X.T)  # (b, k)
        out: Array = (0.5 * s2 * (1.0 - np.exp(-(r * r) / s2))).T
        return out

    def components(self, X: Array, idx: IntArray) -> Array:
        return self._loss(self.train[idx], self.labels[idx], X)

    def component_gradients(self, x: Array, idx: IntArray) -> Array:
        data = self.train[idx]
        r = self.labels[idx] - data @ x
        w = -r * np.exp(-(r * r) / self.sigma**2)
        out: Array = np.asarray(data.multiply(w[:, None]).todense())
        return out

    def full_gradient(self, x: Array) -> Array:
        r = self.labels - self.train @ x
        w = -r * np.exp(-(r * r) / self.sigma**2)
        out: Array = np.asarray(self.train.T @ w) / self.n
        return out

    def smoothness(self) -> float:
        """``L = lambda_max((1/n) sum_i a_i a_i^T)``: an upper bound on the Hessian of the training loss.

        The correntropy loss has second derivative ``exp(-r^2/s^2)(1 - 2 r^2/s^2) <= 1`` in the residual.
        White-box information for choosing step sizes in experiments; solvers never see it.
        """
        gram = np.asarray((self.train.T @ self.train).todense()) / self.n
        return float(np.linalg.eigvalsh(gram)[-1])

    def test_loss(self, x: Array) -> float:
        return float(self._loss(self.test, self.test_labels, x[None, :]).mean())

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x = outputs["x"]
        f = float(monitor.objective(x).mean())
        out = _composite_measures(self, outputs, self.full_gradient(x), f)
        out["test_loss"] = self.test_loss(x)
        return out


# --------------------------------------------------------------------------- structured attack
@functools.lru_cache(maxsize=4)
def _digits_model(seed: int) -> tuple[Array, IntArray, tuple[Array, ...], float]:
    """8x8 digits in [0, 1] and a small MLP trained on the first 70 % (weights, test accuracy)."""
    from zoframe._optional import require

    require("sklearn", feature="the structured-attack problem (digits and its MLP)")
    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    digits = load_digits()
    images = np.asarray(digits.data, dtype=np.float64) / 16.0
    labels = np.asarray(digits.target, dtype=np.intp)
    perm = np.random.default_rng(seed).permutation(images.shape[0])
    cut = int(0.7 * perm.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        net = MLPClassifier(hidden_layer_sizes=(32,), max_iter=300, random_state=seed)
        net.fit(images[perm[:cut]], labels[perm[:cut]])
    acc = float(net.score(images[perm[cut:]], labels[perm[cut:]]))
    weights: tuple[Array, ...] = tuple(
        np.array(w, dtype=np.float64) for w in (net.coefs_[0], net.intercepts_[0], net.coefs_[1], net.intercepts_[1])
    )
    return images[perm[cut:]], labels[perm[cut:]], weights, acc


@dataclass(frozen=True, eq=False)
class StructuredAttack:
    """Universal structured perturbation against a black-box classifier (IJCAI 2019, eq. 9).

    ``f_i(x) = max(F_{l_i}(a_i + x) - max_{j != l_i} F_j(a_i + x), 0)`` over ``n`` held-out images
    of class ``target`` that the model classifies correctly, where ``F`` are the logits of a small
    MLP (32 ReLU units) trained at construction on scikit-learn's 8x8 digits (pixels in [0, 1]);
    only these values reach the solver. Penalties: ``tau1 sum_g ||x_g||_2`` over the overlapping
    ``kernel x kernel`` windows with stride 1 (``y_1 = G x``, disjoint groups after duplication) and
    ``tau2 ||x||_2^2`` (``y_2 = x``).
    """

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    fresh_results: ClassVar[bool] = True  # every call of its functions returns a new array, held by nothing else
    kind: ClassVar[str] = "composite"
    n: int = 20
    target: int = 3
    tau1: float = 1.0
    tau2: float = 2.0
    kernel: int = 3
    seed: int = 0
    name: str = "structured-attack"
    dim: int = field(init=False)
    images: Array = field(init=False, repr=False)
    labels: IntArray = field(init=False, repr=False)
    weights: tuple[Array, ...] = field(init=False, repr=False)
    accuracy: float = field(init=False)
    F: Array = field(init=False, repr=False)
    A: Array = field(init=False, repr=False)
    B: tuple[Array, ...] = field(init=False, repr=False)
    c: Array = field(init=False, repr=False)
    penalties: tuple[Penalty, ...] = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)
    y0: tuple[Array, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.target, int) and 0 <= self.target <= 9):
            raise InvalidInputError(f"target must be a digit 0..9, got {self.target!r}")
        if self.tau1 < 0 or self.tau2 < 0:
            raise InvalidInputError("tau1 and tau2 must be >= 0")
        images, labels, weights, acc = _digits_model(self.seed)
        logits = self._logits(weights, images)
        ok = np.flatnonzero((labels == self.target) & (logits.argmax(axis=1) == labels))
        if not (isinstance(self.n, int) and 1 <= self.n <= ok.size):
            raise InvalidInputError(
                f"n must be an integer in [1, {ok.size}]: there are {ok.size} correctly classified held-out "
                f"images of digit {self.target}"
            )
        chosen = ok[: self.n]
        G = overlapping_groups_matrix(8, 8, self.kernel, 1)
        # y_1 = G x (group lasso), y_2 = x (ridge): A = [G; I], B_1 = [-I; 0], B_2 = [0; -I]
        p, d = G.shape
        A = np.vstack([G, np.eye(d)])
        B = (np.vstack([-np.eye(p), np.zeros((d, p))]), np.vstack([np.zeros((p, d)), -np.eye(d)]))
        c = np.zeros(p + d)
        for arr in (G, A, c, *B):
            arr.setflags(write=False)
        object.__setattr__(self, "dim", d)
        object.__setattr__(self, "images", images[chosen].copy())
        object.__setattr__(self, "labels", labels[chosen].copy())
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "accuracy", acc)
        object.__setattr__(self, "F", G)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "B", B)
        object.__setattr__(self, "c", c)
        object.__setattr__(
            self, "penalties", (BlockGroupL2(self.kernel * self.kernel, self.tau1), SquaredL2(2.0 * self.tau2))
        )
        object.__setattr__(self, "x0", np.zeros(d))
        object.__setattr__(self, "y0", (np.zeros(p), np.zeros(d)))

    @staticmethod
    def _logits(weights: tuple[Array, ...], Z: Array) -> Array:
        W1, b1, W2, b2 = weights
        out: Array = np.maximum(Z @ W1 + b1, 0.0) @ W2 + b2
        return out

    def components(self, X: Array, idx: IntArray) -> Array:
        k, b = X.shape[0], idx.shape[0]
        Z = (self.images[idx][None, :, :] + X[:, None, :]).reshape(k * b, -1)
        L = self._logits(self.weights, Z).reshape(k, b, -1)
        lab = self.labels[idx]
        true = np.take_along_axis(L, np.broadcast_to(lab[None, :, None], (k, b, 1)), axis=2)[..., 0]
        others = L.copy()
        others[:, np.arange(b), lab] = -np.inf
        out: Array = np.maximum(true - others.max(axis=2), 0.0)
        return out

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x = outputs["x"]
        vals = monitor.objective(x)[0]
        grad = central_difference_gradient(lambda Z: monitor.objective(Z).mean(axis=1, keepdims=True), x)[0]
        out = _composite_measures(self, outputs, grad, float(vals.mean()))
        out["attack_loss"] = float(vals.mean())
        out["fooled"] = float(np.mean(vals <= 0.0))
        return out
