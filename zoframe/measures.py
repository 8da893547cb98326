"""Stationarity and KKT measures (numpy and scipy only; no cvxpy here).

* :func:`gradient_mapping`: ``(x - Proj(x - eta g)) / eta``, the projected-gradient mapping.
* :func:`fit_multipliers`: non-negative least-squares multipliers over the nearly active set.
* :func:`kkt_residuals`: eps1, eps2, eps3 of Shi et al. (ICML 2022), Definition 5.3.
* :func:`admm_stationarity`: ``dist(0, dL(x, y, lam))^2`` of Huang et al. (IJCAI 2019), Definition 1.
* :func:`central_difference_gradient`: high-accuracy central differences for black-box parts.
* :func:`max_violation_full`: one pass over ALL ``m`` constraints in fixed blocks (bounded memory),
  serially or as executor tasks, with the max violation, the count violated and the throughput.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
import itertools
import math
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from zoframe._shipping import ship
from zoframe.errors import InvalidInputError, NonFiniteValueError, ShapeError
from zoframe.oracle import CountingOracle, MonitorOracle, checked_values
from zoframe.protocols import Array, Penalty

__all__ = [
    "FullPass",
    "KKTResiduals",
    "admm_stationarity",
    "central_difference_gradient",
    "fit_multipliers",
    "gradient_mapping",
    "kkt_residuals",
    "max_violation_full",
]


def gradient_mapping(x: Array, g: Array, project: Callable[[Array], Array] | None, eta: float = 1.0) -> Array:
    """``(x - Proj(x - eta g)) / eta`` (descent convention; pass ``g = -grad_y f`` for an ascent block).

    With ``project=None`` (unconstrained) this is ``g`` itself.
    """
    if not eta > 0:
        raise InvalidInputError(f"eta must be > 0, got {eta}")
    x = np.asarray(x, dtype=np.float64)
    g = np.asarray(g, dtype=np.float64)
    if x.shape != g.shape:
        raise ShapeError(f"x and g must have the same shape, got {x.shape} and {g.shape}")
    if project is None:
        return g.copy()
    out: Array = (x - project(x - eta * g)) / eta
    return out


def central_difference_gradient(
    fun: Callable[[Array], Array], x: Array, h: float | None = None
) -> Array:
    """Central-difference gradients of a batched function at ``x``.

    ``fun(X)`` maps ``(k, d)`` points to ``(k, b)`` values; the result is ``(b, d)`` (one gradient per
    output column). All ``2 d`` points go in one call. The default step ``h = eps^(1/3) max(1, |x|_inf)``
    balances truncation and rounding error (about 1e-10 relative accuracy on smooth functions).
    """
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[0]
    step = float(np.finfo(float).eps ** (1 / 3) * max(1.0, float(np.abs(x).max(initial=0.0)))) if h is None else h
    E = step * np.eye(d)
    vals = np.asarray(fun(np.vstack([x + E, x - E])), dtype=np.float64)
    if vals.ndim == 1:
        vals = vals[:, None]
    out: Array = ((vals[:d] - vals[d:]) / (2.0 * step)).T
    return out


def fit_multipliers(grad_f0: Array, active_grads: Array) -> Array:
    """``alpha >= 0`` minimising ``||grad_f0 + active_grads^T alpha||_2`` (non-negative least squares).

    ``active_grads`` is ``(a, d)``: the gradients of the nearly active constraints.
    """
    grad_f0 = np.asarray(grad_f0, dtype=np.float64)
    G = np.asarray(active_grads, dtype=np.float64)
    if G.size == 0:
        return np.zeros(0)
    if G.ndim != 2 or G.shape[1] != grad_f0.shape[0]:
        raise ShapeError(f"active_grads must be (a, {grad_f0.shape[0]}), got {G.shape}")
    from scipy.optimize import nnls  # imported on use: scipy.optimize costs about 0.25 s at import

    alpha, _ = nnls(G.T, -grad_f0, maxiter=50 * max(G.shape))
    out: Array = np.asarray(alpha, dtype=np.float64)
    return out


@dataclass(frozen=True)
class KKTResiduals:
    """Residuals of Definition 5.3 (Shi, Gao & Gu, ICML 2022) at a candidate point.

    ``eps1``: stationarity ``||grad f0 + sum_j alpha_j grad f_j||``; ``eps2``: violation
    ``sqrt(sum_j max(f_j, 0)^2)``; ``eps3``: complementarity ``sqrt(sum_j (alpha_j f_j)^2)``;
    ``max_violation``: ``max_j f_j^+``; ``multipliers``: ``alpha`` (length m, zero off the active set);
    ``active``: indices of the constraints treated as nearly active; ``fitted``: whether ``alpha`` was
    fitted by NNLS (False when supplied).
    """

    eps1: float
    eps2: float
    eps3: float
    max_violation: float
    multipliers: Array
    active: NDArray[np.intp]
    fitted: bool


def kkt_residuals(
    grad_f0: Array,
    constraint_values: Array,
    constraint_grads: Array | Callable[[NDArray[np.intp]], Array],
    multipliers: Array | None = None,
    *,
    active_tol: float = 1e-6,
    max_active: int | None = None,
) -> KKTResiduals:
    """KKT residuals of ``min f0 s.t. f_j <= 0`` (ICML DSZOG Definition 5.3, SPEC section 6).

    Parameters
    ----------
    grad_f0:
        ``(d,)`` gradient of the objective at the candidate.
    constraint_values:
        ``(m,)`` values ``f_j`` at the candidate.
    constraint_grads:
        ``(m, d)`` gradients, or a callable ``idx -> (len(idx), d)`` so that only the nearly active
        constraints' gradients are ever formed (m may be huge).
    multipliers:
        ``(m,)`` known multipliers (e.g. a reference solver's duals); fitted by NNLS over the nearly
        active set ``{j: f_j >= -active_tol}`` when ``None``.
    max_active:
        cap on the size of the active set used for the fit (largest ``f_j`` first).
    """
    g0 = np.asarray(grad_f0, dtype=np.float64)
    fv = np.asarray(constraint_values, dtype=np.float64)
    if fv.ndim != 1:
        raise ShapeError(f"constraint_values must be 1-D, got shape {fv.shape}")
    m = fv.shape[0]

    def grads(idx: NDArray[np.intp]) -> Array:
        if callable(constraint_grads):
            return np.asarray(constraint_grads(idx), dtype=np.float64).reshape(len(idx), g0.shape[0])
        G = np.asarray(constraint_grads, dtype=np.float64)
        if G.shape != (m, g0.shape[0]):
            raise ShapeError(f"constraint_grads must be ({m}, {g0.shape[0]}), got {G.shape}")
        out: Array = G[idx]
        return out

    viol = np.maximum(fv, 0.0)
    if multipliers is None:
        active = np.flatnonzero(fv >= -active_tol)
        if max_active is not None and active.size > max_active:
            active = active[np.argsort(-fv[active])[:max_active]]
        alpha = np.zeros(m)
        if active.size:
            alpha[active] = fit_multipliers(g0, grads(active))
        fitted = True
    else:
        alpha = np.asarray(multipliers, dtype=np.float64).copy()
        if alpha.shape != (m,):
            raise ShapeError(f"multipliers must have shape ({m},), got {alpha.shape}")
        if np.any(alpha < 0):
            raise InvalidInputError("multipliers must be >= 0 (sign convention: L = f0 + sum alpha_j f_j)")
        active = np.flatnonzero(alpha > 0)
        fitted = False
    support = np.flatnonzero(alpha > 0)
    stat = g0 + (grads(support).T @ alpha[support] if support.size else 0.0)
    return KKTResiduals(
        eps1=float(np.linalg.norm(stat)),
        eps2=float(np.linalg.norm(viol)),
        eps3=float(np.linalg.norm(alpha * fv)),
        max_violation=float(viol.max(initial=0.0)),
        multipliers=alpha,
        active=active,
        fitted=fitted,
    )


def admm_stationarity(
    grad_f: Array,
    A: Array,
    B: Sequence[Array],
    c: Array,
    x: Array,
    ys: Sequence[Array],
    lam: Array,
    penalties: Sequence[Penalty],
) -> float:
    """``dist(0, dL(x, y, lam))^2`` (Huang et al., IJCAI 2019, Definition 1).

    ``L = f(x) + sum_j psi_j(y_j) - <lam, A x + sum_j B_j y_j - c>``, so
    ``dist^2 = ||grad f - A^T lam||^2 + sum_j dist(B_j^T lam, d psi_j(y_j))^2 + ||A x + sum_j B_j y_j - c||^2``.
    """
    if not (len(B) == len(ys) == len(penalties)):
        raise ShapeError("B, ys and penalties must have one entry per block")
    lam = np.asarray(lam, dtype=np.float64)
    gx = np.asarray(grad_f, dtype=np.float64) - A.T @ lam
    total = float(gx @ gx)
    resid = A @ x - c
    for Bj, yj, psi in zip(B, ys, penalties):
        total += psi.subdifferential_distance(yj, Bj.T @ lam) ** 2
        resid = resid + Bj @ yj
    total += float(resid @ resid)
    return total if math.isfinite(total) else math.inf


# ====================================================================== full feasibility pass
#: constraints per block of :func:`max_violation_full` (8 MiB of values per block)
FULL_PASS_BLOCK = 1 << 20


@dataclass(frozen=True)
class FullPass:
    """The result of :func:`max_violation_full`: one exact pass over all ``m`` constraints at ``x``.

    ``max_violation``: ``max_j max(f_j(x), 0)``; ``max_value``: ``max_j f_j(x)`` (negative when
    every constraint holds strictly) and ``argmax`` its (first) index; ``violated``: how many
    ``f_j(x) > tol``; ``sum_violation``: ``sum_j max(f_j, 0)`` (so the mean violation is
    ``sum_violation / checked``); ``sumsq_violation``: ``sum_j max(f_j, 0)^2`` (its square root is
    eps2 of the KKT residuals); ``checked``: ``m``; ``blocks``: blocks evaluated; ``seconds`` and
    ``evaluations_per_second``: wall-clock time of the pass and ``m / seconds``; ``top_indices`` /
    ``top_values``: the ``top`` largest ``f_j`` (largest first, ties by index), empty unless asked;
    ``above_indices`` / ``above_values``: every ``f_j > above`` in index order, empty unless asked.
    """

    max_violation: float
    max_value: float
    argmax: int
    violated: int
    sum_violation: float
    sumsq_violation: float
    checked: int
    blocks: int
    seconds: float
    evaluations_per_second: float
    top_indices: NDArray[np.intp]
    top_values: Array
    above_indices: NDArray[np.intp]
    above_values: Array

    @property
    def mean_violation(self) -> float:
        return self.sum_violation / self.checked

    @property
    def frac_violated(self) -> float:
        return self.violated / self.checked


#: (max value, its index, count > tol, sum of positive parts, top indices, top values, indices above,
#: values above) of one block
_BlockStats = tuple[float, int, int, tuple[float, float], NDArray[np.intp], Array, NDArray[np.intp], Array]

_NO_IDS: NDArray[np.intp] = np.zeros(0, dtype=np.intp)
_NO_VALS: Array = np.zeros(0)


def _top_of(vals: Array, k: int) -> NDArray[np.intp]:
    """Positions of the ``k`` largest of ``vals``, in index order; ties at the k-th value by index
    (``argpartition`` alone would pick any of them)."""
    n = vals.shape[0]
    if k >= n:
        return np.arange(n, dtype=np.intp)
    kth = np.partition(vals, n - k)[n - k]
    over = np.flatnonzero(vals > kth)
    out: NDArray[np.intp] = np.sort(np.concatenate([over, np.flatnonzero(vals == kth)[: k - over.shape[0]]]))
    return out


def _block_stats(vals: Array, lo: int, tol: float, top: int, above: float | None, floor: float) -> _BlockStats:
    """The reductions of one block; its top among the values ``> floor`` only (the running top's
    smallest value once it is full: nothing at or below it can enter, a tie losing on its index)."""
    pos = int(np.argmax(vals))
    count = int(np.count_nonzero(vals > tol))
    total = (0.0, 0.0)
    if vals[pos] > 0.0:
        viol = np.maximum(vals, 0.0)
        total = (float(viol.sum()), float(np.einsum("i,i->", viol, viol)))  # einsum: no BLAS threads
    top_ids, top_vals, above_ids, above_vals = _NO_IDS, _NO_VALS, _NO_IDS, _NO_VALS
    if top:
        if floor == -math.inf:
            sel = _top_of(vals, top)
        else:  # one cheap comparison leaves few candidates: no partition of the whole block
            cand = np.flatnonzero(vals > floor)
            sel = cand[_top_of(vals[cand], top)]
        top_ids, top_vals = (sel + lo).astype(np.intp), vals[sel]
    if above is not None:
        sel = np.flatnonzero(vals > above)
        above_ids, above_vals = (sel + lo).astype(np.intp), vals[sel]
    return float(vals[pos]), lo + pos, count, total, top_ids, top_vals, above_ids, above_vals


def _pass_blocks(
    fn: Callable[[Array, NDArray[np.intp]], Any],
    point: Array,
    ranges: Sequence[tuple[int, int]],
    tol: float,
    top: int,
    above: float | None,
    nonfinite: str,
    name: str,
) -> list[_BlockStats]:
    """One task of :func:`max_violation_full`: the blocks ``[lo, hi)`` of ``ranges``, one call each."""
    out: list[_BlockStats] = []
    floor = -math.inf
    for lo, hi in ranges:
        ids = np.arange(lo, hi, dtype=np.intp)
        ids.setflags(write=False)
        vals = checked_values(fn(point, ids), 1, hi - lo, name)[0]  # read only: the function's array, checked
        if not (math.isfinite(float(vals.max())) and math.isfinite(float(vals.min()))):
            bad = ~np.isfinite(vals)
            if nonfinite != "inf":
                j = int(np.flatnonzero(bad)[0])
                raise NonFiniteValueError(
                    f"{name} returned {vals[j]} for constraint index {lo + j} in the full feasibility pass; "
                    "fix the function, or use an oracle with nonfinite='inf' to count such values as violated"
                )
            vals = np.where(bad, np.inf, vals)  # a new array: the function's is left as it was
        stats = _block_stats(vals, lo, tol, top, above, floor)
        if top and out:  # one running top per task: O(top) kept, not O(top) per block
            prev = out[-1]
            ids = np.concatenate([prev[4], stats[4]])
            kept = np.concatenate([prev[5], stats[5]])
            order = np.lexsort((ids, -kept))[:top]  # largest first, ties by index
            out[-1] = (*prev[:4], _NO_IDS, _NO_VALS, *prev[6:])
            stats = (*stats[:4], ids[order], kept[order], *stats[6:])
        if top and stats[5].shape[0] == top:
            floor = float(stats[5].min())
        out.append(stats)
    return out


_Source = tuple[
    Callable[[Array, NDArray[np.intp]], Any], int, int, str, CountingOracle | None, bool, Callable[[int], None] | None
]


def _pass_source(source: Any) -> _Source:
    """``(function, m, dim, nonfinite policy, oracle to charge or None, budgeted, monitor's check)``.

    The monitor's check is the ``_take(cost)`` of a monitor whose evaluations count against the run's
    budget (:class:`zoframe.observers.trace.MonitorBudget`): it refuses the pass before it runs.
    """
    budgeted = True
    take: Callable[[int], None] | None = None
    if isinstance(source, MonitorOracle):
        found = getattr(source, "_take", None)
        take = found if callable(found) else None
        source = source._p  # the monitor's parent oracle: charged outside the budget
        budgeted = False
    if isinstance(source, CountingOracle):
        if source.kind != "constrained":
            raise InvalidInputError(f"max_violation_full needs a constrained problem, the oracle's is {source.kind!r}")
        problem = source._problem  # the oracle's own problem (same package): evaluated block by block
        return problem.constraints, source.m, source.dim, source.nonfinite, source, budgeted, take
    fn = getattr(source, "constraints", None)
    m = getattr(source, "m", None)
    alone = int(getattr(source, "m_eq", 0) or 0) > 0  # equality constraints alone: m = 0 is an empty pass
    if not callable(fn) or not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < (0 if alone else 1):
        raise InvalidInputError(
            "max_violation_full needs a CountingOracle, its monitor, or a constrained problem with "
            f"constraints(X, idx) and m >= 1 (m = 0 with equality constraints); got {type(source).__name__}"
        )
    return fn, int(m), int(getattr(source, "dim", -1)), "raise", None, False, None


def max_violation_full(
    source: Any,
    x: Array,
    *,
    block: int = FULL_PASS_BLOCK,
    tol: float = 0.0,
    top: int = 0,
    above: float | None = None,
    executor: Executor | None = None,
    tasks: int | None = None,
    purpose: str = "verify",
) -> FullPass:
    """One exact pass over ALL ``m`` constraints at ``x``, in blocks of ``block`` constraints.

    ``source``: a :class:`~zoframe.oracle.CountingOracle` (the ``m`` evaluations are charged to its
    budget under ``purpose`` before anything is evaluated), its ``monitor`` (counted as
    ``"monitor"`` (or the monitor's own ``purpose``), outside the budget; a monitor that counts against the run's budget refuses the
    whole pass before it runs) or a constrained problem (anything with ``constraints(X, idx)`` and
    ``m``). An oracle's ``user_calls`` grows by the number of blocks. Each block ``[lo, lo + block)`` is one call of the constraint function with
    the consecutive indices of the block, reduced at once to its max, count violated (``f_j > tol``),
    sum of violations and, with ``top > 0``, its ``top`` largest values (with ``above``, every value
    ``> above`` is kept too, e.g. ``above=0.0``: the violated constraints): memory is ``O(block +
    tasks * top)`` (each task keeps one running top) plus what ``above`` keeps, whatever ``m`` is (10^8 constraints are never held at
    once).

    ``executor``: a :class:`concurrent.futures.Executor` (thread or process pool, a
    ``dask.distributed`` client's ``get_executor()``); the blocks are grouped into ``tasks``
    contiguous tasks (default: 2 per worker) and submitted. Blocks and their reductions do not
    depend on the executor, and the partial results are combined in block order, so the result is
    identical (bit for bit) serially and on any executor; only ``seconds`` differs. With a process
    pool or dask, the problem must be picklable.

    The restoration's check (R1 of DSZOG / ADSZOG) and the verification report's feasibility
    measure are such full passes.
    """
    unbudgeted = str(getattr(source, "purpose", "monitor"))  # a monitor's purpose ("certify" for the certificate)
    fn, m, dim, nonfinite, oracle, budgeted, take = _pass_source(source)
    if not isinstance(block, (int, np.integer)) or isinstance(block, bool) or block < 1:
        raise InvalidInputError(f"block must be a positive integer (constraints per call), got {block!r}")
    if not isinstance(top, (int, np.integer)) or isinstance(top, bool) or top < 0:
        raise InvalidInputError(f"top must be an integer >= 0 (how many of the largest values to keep), got {top!r}")
    if tasks is not None and (not isinstance(tasks, (int, np.integer)) or isinstance(tasks, bool) or tasks < 1):
        raise InvalidInputError(f"tasks must be a positive integer or None, got {tasks!r}")
    if not math.isfinite(tol):
        raise InvalidInputError(f"tol must be a finite number, got {tol!r}")
    if above is not None and math.isnan(above):
        raise InvalidInputError("above must be a number (keep every f_j > above) or None, got nan")
    cut = None if above is None else float(above)
    point = np.array(x, dtype=np.float64, copy=True).reshape(1, -1)
    if dim > 0 and point.shape[1] != dim:
        raise ShapeError(f"x must have {dim} entries (the problem's dimension), got shape {np.shape(x)}")
    point.setflags(write=False)
    name = f"the constraint function ({type(getattr(fn, '__self__', fn)).__name__}.constraints)"
    edges = [*range(0, m, int(block)), m]
    ranges = list(itertools.pairwise(edges))
    if oracle is not None:  # the budget is checked before anything is evaluated
        if take is not None:
            take(m)
        oracle._charge(m, "constraint", purpose if budgeted else unbudgeted, budgeted)
        oracle.user_calls += len(ranges)  # one call of the user's function per block
    t0 = time.perf_counter()
    if executor is None:
        stats = _pass_blocks(fn, point, ranges, float(tol), int(top), cut, nonfinite, name)
    else:
        workers = getattr(executor, "_max_workers", None) or 2
        n_tasks = max(1, min(len(ranges), int(tasks) if tasks is not None else 2 * int(workers)))
        cuts = np.linspace(0, len(ranges), n_tasks + 1).astype(int)
        shipped = ship(fn, executor)  # the problem's arrays arrive aligned (BLAS-eligible) on any transport
        futures = [
            executor.submit(_pass_blocks, shipped, point, ranges[c0:c1], float(tol), int(top), cut, nonfinite, name)
            for c0, c1 in itertools.pairwise(cuts.tolist()) if c1 > c0
        ]
        stats = [s for fut in futures for s in fut.result()]
    seconds = time.perf_counter() - t0
    if oracle is not None:
        oracle.seconds += seconds
    if stats:
        best = max(range(len(stats)), key=lambda b: (stats[b][0], -b))  # the first block holding the max
        max_value, argmax = stats[best][0], stats[best][1]
    else:  # m = 0 (equality constraints alone): an empty pass, nothing violated
        max_value, argmax = -math.inf, -1
    total, total_sq = 0.0, 0.0
    for s in stats:  # block order: the same sum serially and on any executor
        total += s[3][0]
        total_sq += s[3][1]
    if top and stats:
        ids = np.concatenate([s[4] for s in stats])
        vals = np.concatenate([s[5] for s in stats])
        order = np.lexsort((ids, -vals))[:top]  # largest first, ties by index
        top_ids, top_vals = ids[order], vals[order]
    else:
        top_ids, top_vals = _NO_IDS.copy(), _NO_VALS.copy()
    if cut is not None and stats:
        above_ids = np.concatenate([s[6] for s in stats])
        above_vals = np.concatenate([s[7] for s in stats])
    else:
        above_ids, above_vals = _NO_IDS.copy(), _NO_VALS.copy()
    return FullPass(
        max_violation=max(max_value, 0.0), max_value=max_value, argmax=argmax,
        violated=sum(s[2] for s in stats), sum_violation=total, sumsq_violation=total_sq, checked=m, blocks=len(ranges),
        seconds=seconds, evaluations_per_second=m / seconds if seconds > 0 else math.inf,
        top_indices=top_ids, top_values=top_vals, above_indices=above_ids, above_values=above_vals,
    )  # fmt: skip
