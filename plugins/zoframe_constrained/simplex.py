"""The constraint distribution ``p`` of DSZOG / ADSZOG: projections, ascent steps and sampling.

Two exact representations of a point ``p`` of the simplex ``Delta_m``:

dense
    the vector ``p`` itself (``m`` floats).
sparse ("floor + support")
    a sorted index array ``S``, the values ``p_S`` on it and one scalar ``floor``: every entry
    outside ``S`` equals ``floor``. The uniform distribution is ``S = {}``, ``floor = 1/m``; after
    the projection has zeroed most entries, ``floor = 0`` and ``S`` is the (small) support.

The ascent step of DSZOG (ICLR 2022 submission, Alg. 1 l.11) is
``p <- Proj_Delta(p + eta_p H)`` with ``H = (beta m / |M3|) sum_{j in M3} e_j phi_j - lambda p``, i.e.
``Proj_Delta(s p + delta)`` with the uniform scaling ``s = 1 - eta_p lambda`` and ``delta`` non-zero
on ``|M3|`` entries only. The Euclidean projection is ``max(v - tau, 0)`` with one threshold ``tau``
for all entries, so every entry outside ``S`` and outside ``M3`` maps to the same value
``max(s floor - tau, 0)``: the new floor. The representation is therefore closed under the step,
and the step costs ``O(|S| + |M3|)`` instead of ``O(m)`` (the sparse-update idea of Duchi, Shalev-Shwartz,
Singer & Chandra, *Efficient projections onto the l1-ball for learning in high dimensions*, ICML
2008, Sec. 5; here the untouched entries form one block of equal values instead of a tree, which is
exact because they all share the value ``floor``). The iterates are the same as the dense form's up
to floating-point rounding (tests/test_constrained_simplex.py checks it).

The threshold ``tau`` is found by Michelot's algorithm (1986) on weighted values (the floor block is
one value with weight ``m - |S u M3|``): start from the lower bounds ``max(v) - 1`` and
``(sum v - 1)/m``, keep only the values above the current ``tau``, recompute; it increases
monotonically to the exact threshold in a few passes over a shrinking candidate set, ``O(m)``
expected for a dense vector (no sort).

Sampling ``M2 ~ p`` inverts the cumulative distribution over the indices ``0..m-1`` in order. For
the dense form that is one cumulative sum (``O(m)``); for the sparse form the cumulative mass
before index ``j`` is ``floor * j + sum_{S_k < j} (p_{S_k} - floor)``, so a draw costs
``O(log |S|)`` after an ``O(|S|)`` prefix sum over the support. Both forms return the same index
for the same uniform variate (up to rounding at the boundaries).

With numba installed (``zoframe[fast]``), the floor + support form's work (:func:`sample_sparse`,
:func:`ascent_sparse`, :func:`pz_project_average`, :func:`pz_ema`) runs as compiled code
(:mod:`zoframe_constrained._kernels_numba`) with the same floating-point operations, hence the same
results bit for bit; ``ZOFRAME_KERNEL=numpy`` keeps the numpy code (:mod:`zoframe_constrained._kernels`).
The thresholds' sums are numpy's pairwise sums (``np.add.reduce``), never BLAS dot products, so that
the kernel can repeat them.

Entries below the smallest normal float are flushed to zero: otherwise entries that decay
geometrically become subnormal after some thousand iterations and every vector operation on them
runs several times slower.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import importlib
import math
from typing import Any
import warnings

import numpy as np
from numpy.typing import NDArray

from zoframe.protocols import Array, IntArray

from . import _kernels

__all__ = [
    "FLUSH",
    "PZ",
    "Ascent",
    "ascent_dense",
    "ascent_sparse",
    "densify",
    "flush",
    "project_simplex_dense",
    "pz_average",
    "pz_ema",
    "pz_flush",
    "pz_project",
    "pz_project_average",
    "pz_sample",
    "sample_dense",
    "sample_sparse",
    "simplex_threshold",
    "sparsify",
    "uniform_subset",
]

#: thresholds beyond this mean values near 2**52, where a unit of mass is lost to rounding
_HUGE = 2.0**50

#: values below the smallest normal double are set to zero (no subnormal floats in p or z_p)
FLUSH = float(np.finfo(np.float64).tiny)


def _c_einsum() -> Callable[..., Any]:
    """``np.einsum`` without its Python wrapper (which, with the default ``optimize=False``, calls this same
    function with the same operands): the same sums, about 0.8 us less per call; ``np.einsum`` itself
    where numpy keeps it elsewhere (``numpy.core`` before numpy 2)."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            fn = getattr(importlib.import_module(name), "c_einsum", None)
        except ImportError:
            continue
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    return np.einsum


_EINSUM: Callable[..., Any] = _c_einsum()

#: the compiled kernel (:mod:`zoframe_constrained._kernels`, ``ZOFRAME_KERNEL``), or ``None`` for the numpy code
_K: Any = _kernels.kernel()
#: ``ZOFRAME_KERNEL=auto``: the numpy code for the first this many calls that could use the kernel in a process
#: (about 2,000 sparse ADSZOG steps, 2,500 DSZOG ones: five and four calls per step), the kernel after them.
#: Loading numba and the cached kernel costs about 0.4 s of CPU, which the kernel's gain (about 50 us per
#: breast-cancer step) repays after some 7,000 steps: short runs never pay it. Both paths give the same results bit for bit, so when the switch happens changes no result.
AUTO_AFTER_CALLS = 10_000
_AUTO: Any = _K if getattr(_K, "auto", False) else None
_waited = 0


def _kernel_now() -> Any:
    """The kernel to use for this call, or ``None`` for the numpy code (see :data:`AUTO_AFTER_CALLS`)."""
    global _waited
    k = _K
    if k is not None and k is _AUTO and _waited < AUTO_AFTER_CALLS:
        _waited += 1
        return None
    return k


def _kernel_unavailable(exc: ImportError) -> None:
    """numba failed to import (``ZOFRAME_KERNEL`` auto): warn once, then the numpy code for good."""
    global _K
    _K = None
    warnings.warn(str(exc), RuntimeWarning, stacklevel=3)


def _compiled(name: str) -> Any:
    """The compiled function ``name`` of the kernel, or ``None`` for the numpy code (no kernel, or numba failed
    to import: then :func:`_kernel_unavailable`)."""
    k = _kernel_now()
    if k is None:
        return None
    try:
        return getattr(k, name)
    except _kernels.KernelUnavailable as exc:
        _kernel_unavailable(exc)
        return None


def dot_self(v: Array) -> float:
    """``np.einsum("i,i->", v, v)`` (not BLAS: no thread start-up; the same value bit for bit)."""
    return float(_EINSUM("i,i->", v, v))


@dataclass(frozen=True)
class Ascent:
    """The stochastic gradient ``H = sum_{j in idx} e_j gain_j - lam * p`` of L with respect to p.

    ``idx`` are the sampled constraints ``M3`` (duplicates allowed: their gains add up) and
    ``gain_j = beta m / |M3| * phi_j(w)``.
    """

    idx: IntArray
    gain: Array
    lam: float


def flush(v: Array) -> Array:
    """``v`` with the entries of magnitude below :data:`FLUSH` set to zero (in place, returned)."""
    v[np.abs(v) < FLUSH] = 0.0
    return v


def simplex_threshold(values: Array, counts: Array | None = None) -> float:
    """The ``tau`` with ``sum_k counts_k * max(values_k - tau, 0) = 1`` (Michelot 1986).

    ``counts`` (default all ones) lets one value stand for a block of equal entries. The sums are numpy's
    pairwise sums (``np.add.reduce``, of ``v * counts`` with weights), not BLAS dot products: the same
    rounding on every CPU, which the compiled kernel repeats (:func:`_kernels_numba.threshold`).
    """
    v = np.asarray(values, dtype=np.float64)
    if counts is None:  # unit weights: the same iteration without the weight vector
        return _unit_threshold(v)[0]
    c = np.asarray(counts, dtype=np.float64)
    mean_tau = (float(np.add.reduce(v * c)) - 1.0) / float(c.sum())
    tau = max(float(v.max()) - 1.0, mean_tau)  # two lower bounds of tau
    keep = v > tau
    kept = int(np.count_nonzero(keep))
    if kept == int(v.shape[0]):  # as for unit weights: the next pass would end at mean_tau
        return mean_tau
    while kept:
        v, c = v[keep], c[keep]
        n = kept
        tau = (float(np.add.reduce(v * c)) - 1.0) / float(c.sum())
        keep = v > tau
        kept = int(np.count_nonzero(keep))
        if kept == n:
            break
    return tau


def _unit_threshold(v: Array) -> tuple[float, int]:
    """``(simplex_threshold(v), entries of the last candidate set above it)`` for a float64 ``v``."""
    n = int(v.shape[0])
    mean_tau = (float(v.sum()) - 1.0) / n
    tau = max(float(v.max()) - 1.0, mean_tau)
    keep = v > tau
    kept = int(np.count_nonzero(keep))  # one C pass: any() is kept > 0, all() is kept == len(v)
    if kept == n:  # every entry above tau >= mean_tau: the next pass would keep v whole and stop at mean_tau
        return mean_tau, n
    while kept:  # empty only by rounding (values ~1e16): tau is then exact enough
        v = v[keep]
        n = kept
        tau = (float(v.sum()) - 1.0) / n
        keep = v > tau
        kept = int(np.count_nonzero(keep))
        if kept == n:
            break
    return tau, kept


def _floor_threshold(values: Array, n_floor: int) -> float:
    """``simplex_threshold(values, counts)`` for ``values = [v_S, v_floor]`` (the support entries, then the
    floor block) and ``counts = [1, .., 1, n_floor]``: the same value bit for bit.

    The sums of the weights are whole numbers below ``2**53``, exact in any order, so they are counted
    (the kept support entries, plus ``n_floor`` while the floor block is kept) instead of summed. The
    weighted sums are :func:`simplex_threshold`'s ``np.add.reduce(v * c)``: the products are the values
    themselves (times 1.0) but the floor block's, so that entry alone is multiplied, in place, for the sum
    and put back (``values`` ends as it came; a read-only one is copied first).
    """
    n = int(values.shape[0])
    nf = float(n_floor)
    v = values if values.flags.writeable else values.copy()
    last = float(v[n - 1])
    v[n - 1] = last * nf  # the products v * counts
    total = float(np.add.reduce(v))
    v[n - 1] = last
    mean_tau = (total - 1.0) / float(n - 1 + n_floor)
    tau = max(float(v.max()) - 1.0, mean_tau)
    keep = v > tau
    kept = int(np.count_nonzero(keep))
    if kept == n:  # as in simplex_threshold: the next pass would keep every entry and end at mean_tau
        return mean_tau
    floor_in = True  # the floor block is the last entry while it is kept
    while kept:
        floor_in = floor_in and bool(keep[n - 1])
        v = v[keep]  # a new array
        n = kept
        if floor_in:
            last = float(v[n - 1])
            v[n - 1] = last * nf
            total = float(np.add.reduce(v))
            v[n - 1] = last
        else:
            total = float(np.add.reduce(v))
        tau = (total - 1.0) / float(n - 1 + n_floor if floor_in else n)
        keep = v > tau
        kept = int(np.count_nonzero(keep))
        if kept == n:
            break
    return tau


def project_simplex_dense(v: Array, *, overwrite: bool = False) -> Array:
    """Euclidean projection of the vector ``v`` onto the simplex (subnormals flushed).

    A new array, or with ``overwrite=True`` ``v`` itself (a float64 array the caller owns; no second
    ``m``-vector), with the same values.
    """
    if type(v) is np.ndarray and v.dtype == np.float64 and v.ndim == 1:
        tau, kept = _unit_threshold(v)
    else:
        tau, kept = simplex_threshold(v), -1
    if abs(tau) > _HUGE:  # only for |v| ~ 2**52 (a diverged run): rounding would eat the unit mass
        top = int(np.argmax(v))
        out = v if overwrite else np.zeros_like(v)
        out[:] = 0.0
        out[top] = 1.0
        return out
    if 0 < kept and 8 * kept < v.shape[0]:  # few entries left: only those are subtracted, the rest is zero
        sel = np.flatnonzero(v > tau)  # an entry v_j <= tau maps to v_j - tau <= 0, i.e. to 0
        vals = v.take(sel)
        vals -= tau
        vals[vals < FLUSH] = 0.0
        if overwrite:
            out = v
            out.fill(0.0)
        else:
            out = np.zeros(v.shape[0])
        out[sel] = vals
        return out
    out = np.subtract(v, tau, out=v) if overwrite else v - tau
    out[out < FLUSH] = 0.0
    return out


def _gains(h: Ascent) -> tuple[IntArray, Array]:
    """Sorted distinct indices of ``h`` with the gains of repeated indices summed."""
    idx = np.asarray(h.idx, dtype=np.intp)
    gain = np.asarray(h.gain, dtype=np.float64)
    order = idx.argsort(kind="stable")
    idx, gain = idx[order], gain[order]
    if idx.shape[0] < 2 or not np.count_nonzero(idx[1:] == idx[:-1]):
        return idx, gain
    first = np.concatenate([[True], idx[1:] != idx[:-1]])
    summed: Array = np.add.reduceat(gain, np.flatnonzero(first))
    return idx[first], summed


def _merge(support: IntArray, idx: IntArray, *fills: tuple[Array, float]) -> tuple[IntArray, list[Array]]:
    """Insert the sorted distinct ``idx`` missing from the sorted ``support``; new slots get the fill values.

    ``O(|support| + |idx| log |support|)`` with ``searchsorted`` and one scatter per array (no hashing,
    no sort of the support). The ``k`` new entries, inserted before the old positions ``where``
    (sorted), land at ``where + arange(k)`` of the result; the old entries fill the other slots in
    order. Same result as ``np.insert`` at ``where``, 1.8-2.5x cheaper (128 new indices, two filled
    arrays, a support of 3000 / 50 entries: 27 -> 15 us / 22 -> 9 us, numpy 2.4; ``np.insert`` sorts
    its positions and builds its masks for every array anew).
    """
    union, filled, _ = _merge_at(support, idx, *fills)
    return union, filled


def _merge_at(support: IntArray, idx: IntArray, *fills: tuple[Array, float]) -> tuple[IntArray, list[Array], IntArray]:
    """:func:`_merge`, and the positions of ``idx`` in the union (``searchsorted(union, idx)``): when every
    index is present already they are the positions found in ``support``, with no second search."""
    n = support.shape[0]
    pos = support.searchsorted(idx)
    if n:
        present = support.take(np.minimum(pos, n - 1)) == idx
    else:
        present = np.zeros(idx.shape[0], dtype=bool)
    if np.count_nonzero(present) == present.shape[0]:
        return support, [arr for arr, _ in fills], pos
    absent = ~present
    new = idx[absent]
    slots = pos[absent] + np.arange(new.shape[0])
    old = np.empty(n + new.shape[0], dtype=bool)
    old.fill(True)
    old[slots] = False
    union = np.empty(n + new.shape[0], dtype=support.dtype)
    union[old] = support
    union[slots] = new
    filled: list[Array] = []
    for arr, fill in fills:
        out = np.empty(n + new.shape[0], dtype=arr.dtype)
        out[old] = arr
        out[slots] = fill
        filled.append(out)
    return union, filled, union.searchsorted(idx)


def ascent_dense(p: Array, eta: float, h: Ascent) -> Array:
    """``Proj_Delta(p + eta H)`` for a dense ``p`` (a new array)."""
    idx, gain = _gains(h)
    v = (1.0 - eta * h.lam) * p
    v[idx] += eta * gain
    return project_simplex_dense(v, overwrite=True)  # v is this step's own array


def ascent_sparse(
    support: IntArray, values: Array, floor: float, m: int, eta: float, h: Ascent
) -> tuple[IntArray, Array, float]:
    """``Proj_Delta(p + eta H)`` for ``p`` in the floor + support form; returns the new form.

    With the compiled kernel: the same operations (and threshold) in one call, the same result bit for bit."""
    fn = _compiled("ascent_sparse") if support.dtype == np.intp and values.dtype == np.float64 else None
    if fn is not None:
        idx_k = np.asarray(h.idx, dtype=np.intp)
        gain_k = np.asarray(h.gain, dtype=np.float64)
        out_s, out_v, out_f, status = fn(support, values, float(floor), int(m), float(eta), idx_k, gain_k,
                                         float(h.lam), FLUSH)  # fmt: skip
        if status == 0:
            return out_s, out_v, float(out_f)
    idx, gain = _gains(h)
    s = 1.0 - eta * h.lam
    union, (v,), where = _merge_at(support, idx, (s * values, s * floor))
    v[where] += eta * gain
    n_floor = m - union.shape[0]
    if n_floor > 0:
        k = int(v.shape[0])
        vals = np.empty(k + 1)
        vals[:k] = v
        vals[k] = s * floor
        tau = _floor_threshold(vals, n_floor)
    else:
        tau = simplex_threshold(v)
    if abs(tau) > _HUGE:  # see project_simplex_dense
        return union[np.argmax(v)].reshape(1), np.ones(1), 0.0
    new_floor = s * floor - tau
    new_floor = new_floor if new_floor >= FLUSH else 0.0
    v -= tau  # v - tau (v is this step's own array)
    v[v < FLUSH] = 0.0
    keep = v > new_floor
    return union[keep], v[keep], float(new_floor)


#: per ``(m, block)``: the block starts, the column of in-block offsets, the last block's number and
#: whether that block is a partial one (m not a multiple of block)
_BLOCKS: dict[tuple[int, int], tuple[IntArray, IntArray, int, bool]] = {}


def _blocks(m: int, block: int) -> tuple[IntArray, IntArray, int, bool]:
    known = _BLOCKS.get((m, block))
    if known is None:
        if len(_BLOCKS) >= 16:
            _BLOCKS.clear()
        starts = np.arange(0, m, block)
        offsets = np.arange(block).reshape(block, 1)
        known = _BLOCKS[(m, block)] = (starts, offsets, int(starts.shape[0]) - 1, m % block != 0)
    return known


def sample_dense(p: Array, u: Array, block: int = 32) -> IntArray:
    """Indices drawn from ``p`` by inverting its cumulative distribution at the uniforms ``u``.

    Two levels instead of one ``O(m)`` cumulative sum (a sequential scan, ~5 ns per entry): block
    sums (one vectorised reduction), a cumulative sum over the ``m / block`` blocks, then cumulative
    sums inside the ``len(u)`` chosen blocks only. Same index as ``searchsorted(cumsum(p), u *
    sum(p))`` up to rounding at the boundaries.

    The chosen blocks are gathered as the columns of a ``(block, len(u))`` matrix (entries past
    ``m`` are zero) and summed down the columns: each column's running sum is the same sequence of
    additions as along a row of the transposed matrix.
    """
    m = p.shape[0]
    starts, offsets, last, partial = _blocks(m, block)
    sums = np.add.reduceat(p, starts)
    cum = np.cumsum(sums)
    t = u * cum[-1]
    b = cum.searchsorted(t, "right")
    np.minimum(b, last, out=b)
    before = cum.take(b)
    before -= sums.take(b)
    rest = t - before  # mass to cover inside block b
    first = starts.take(b)
    idx = offsets + first  # (block, len(u)): column i holds block b_i's indices
    W = p.take(idx, mode="clip")
    if partial and int(b.max()) == last:
        W[idx >= m] = 0.0
    below = np.cumsum(W, axis=0) <= rest
    k = np.add.reduce(below, axis=0)
    first += k
    out: IntArray = np.minimum(first, m - 1)
    if out.dtype != np.intp:
        out = out.astype(np.intp)
    # rounding can step past the last non-zero entry of a block: move back to one with mass
    bad = p.take(out) == 0.0
    if bad.any():
        out[bad] = np.minimum(np.searchsorted(np.cumsum(p), t[bad], side="right"), m - 1)
    return out


def sample_sparse(support: IntArray, values: Array, floor: float, m: int, u: Array) -> IntArray:
    """:func:`sample_dense` for the floor + support form, in ``O(|S| + len(u) log |S|)``.

    The mass before index ``j`` is ``floor * j`` plus the excess ``p_{S_k} - floor`` of the support entries
    before it: the draw ``t`` falls in the support entry ``S_k`` (the last one starting at or before
    ``t``) when ``t`` is below its end, else in the floor gap after it (or before ``S_0``). With a small
    floor mass almost every draw lands on a support entry: the gap arithmetic runs on the few draws
    that need it only (the same operations, element for element, as on the whole batch).
    """
    fn = _compiled("sample_sparse") if support.dtype == np.intp and values.dtype == u.dtype == np.float64 else None
    if fn is not None:  # the compiled kernel: the same indices (other dtypes keep numpy's arithmetic)
        res_k: IntArray = fn(support, values, float(floor), int(m), u)
        return res_k
    # the excess over the floor (values - floor; with a floor of +0.0 the values themselves, bit for bit)
    r = values if floor == 0.0 and math.copysign(1.0, floor) > 0.0 else values - floor
    cum_r = r.cumsum()
    total = floor * m + (float(cum_r[-1]) if r.shape[0] else 0.0)
    t = u * total
    if support.shape[0] == 0:
        out0: IntArray = np.minimum(t / floor, m - 1.0).astype(np.intp)
        return out0
    cum_r -= r  # the excess mass before each support entry (cum_r - r, element for element)
    if not floor > 0.0:  # floor 0, all the mass on S: the k-th entry holds [cum_r - r, cum_r) (0 * S adds nothing)
        kz = cum_r.searchsorted(t, "right")
        kz -= 1
        np.maximum(kz, 0, out=kz)
        res0: IntArray = support.take(kz)  # valid indices already: no clipping needed
        return res0
    start = floor * support + cum_r  # mass of the indices before S_k
    end = start + values
    k = start.searchsorted(t, "right")
    low = bool(k.min() == 0)  # some draws before S_0
    k -= 1
    kk = np.maximum(k, 0) if low else k
    ek = end.take(kk)
    out: IntArray = support.take(kk)
    if out.dtype != np.intp:
        out = out.astype(np.intp)
    odd = t < ek
    if not low and np.count_nonzero(odd) == odd.shape[0]:  # every draw on its support entry
        return out
    np.logical_not(odd, out=odd)
    if low:
        odd |= k < 0  # before S_0 or in a gap: the rest keeps S_k
    n_odd = int(np.count_nonzero(odd))
    n = support.shape[0]
    nxt = np.empty(n + 1, dtype=np.intp)  # first index of the next support entry (or m): np.append(support, m)
    nxt[:n] = support
    nxt[n] = m
    if 4 * n_odd <= out.shape[0]:  # few odd draws: the arithmetic on them only
        j = np.flatnonzero(odd)
        t, k, kk, ek, sk = t[j], k[j], kk[j], ek[j], out[j]
    else:  # a large floor mass: on the whole batch, then picked
        sk = out
    # the draws between S_k and S_{k+1} (clipped in floating point before the cast: t / floor may overflow)
    gap = sk + 1 + np.minimum(np.maximum(np.floor((t - ek) / floor), 0.0), float(m)).astype(np.intp)
    gap = np.minimum(gap, nxt[kk + 1] - 1)
    if low:  # and those before S_0
        before = np.minimum(t / floor, support[0] - 1.0).astype(np.intp)
        gap = np.where(k < 0, before, gap)
    fix = np.minimum(np.maximum(gap, 0), m - 1)
    if sk is out:
        res: IntArray = np.where(odd, fix, out)
        return res
    out[j] = fix
    return out


# ---------------------------------------------------------------------- uniform batches (M1, M3)
def uniform_subset(n: int, k: int, rng: np.random.Generator, *, compiled: bool = False) -> IntArray:
    """``k`` distinct indices of ``0..n-1``, every ``k``-subset equally likely, in increasing order (read-only).

    The uniform batches of DSZOG / ADSZOG (ICML 2022, Alg. 1 l.9 and l.11: index *sets* ``M1 subset [n]``,
    ``M3 subset [m]``, drawn uniformly without replacement). The set is the first ``j`` distinct values of
    an i.i.d. sequence of uniform indices ``floor(u_i n)`` (``u_i`` from one vectorised ``rng.random`` call
    per round), with ``j = k``, or for ``k > n / 2`` ``j = n - k`` and the set its complement. A round draws
    ``j`` indices when ``4 j < n`` (no more are needed with probability about ``exp(-j^2 / (2 n))``), else
    the expected number of draws for ``j`` distinct values, ``n log(n / (n - j))``, plus four standard
    deviations (``4 sqrt(n)``); while fewer than ``j`` distinct values have come, another round draws as
    many as are missing. The distinct values of an i.i.d. uniform sequence, stopped by a rule that looks at
    their number only, form a uniform subset (the law is invariant under any permutation of ``0..n-1``),
    and so does the complement of one; ``floor(u n)`` of a 53-bit uniform ``u`` is uniform on ``0..n-1``
    to a relative ``n 2^-53``.

    The batches are sorted sets: the order of the draws plays no part in the estimates' sums. ``compiled``:
    the compiled kernel (``ZOFRAME_KERNEL``): the same indices from the same variates. ``k == n`` is the
    whole range (no draw); ``k > n`` raises :class:`ValueError`. :func:`uniform_subsets`: two batches from
    one call.
    """
    u = rng.random(_first_count(n, k))
    fn = _compiled("subset_first") if compiled and u.shape[0] and 4 * min(k, n - k) >= n else None
    first = None if fn is None else fn(u, n, min(k, n - k))
    return _subset(n, k, u, rng, first)


def uniform_subsets(
    n1: int, k1: int, n2: int, k2: int, rng: np.random.Generator, *, compiled: bool = False
) -> tuple[IntArray, IntArray]:
    """:func:`uniform_subset` of ``k1`` out of ``n1`` and of ``k2`` out of ``n2``, the first rounds of both from
    one ``rng.random`` call (the first batch's variates, then the second's; further rounds, rare, the
    first batch's before the second's). ``compiled``: both first rounds in one call of the kernel
    (:func:`~zoframe_constrained._kernels_numba.subset_pair`), the same indices."""
    r1 = _first_count(n1, k1)
    u = rng.random(r1 + _first_count(n2, k2))
    u1, u2 = u[:r1], u[r1:]
    fn = _compiled("subset_pair") if compiled and u1.shape[0] and u2.shape[0] else None
    if fn is None:
        return _subset(n1, k1, u1, rng, None), _subset(n2, k2, u2, rng, None)
    a1, a2 = fn(u, r1, n1, min(k1, n1 - k1), n2, min(k2, n2 - k2))
    return _subset(n1, k1, u1, rng, a1), _subset(n2, k2, u2, rng, a2)


def _first_count(n: int, k: int) -> int:
    """The variates of the first round of :func:`uniform_subset` (0: the whole range, no draw)."""
    if k >= n:
        if k > n:
            raise ValueError(f"cannot draw {k} distinct indices out of {n}")
        return 0
    j = min(k, n - k)
    return j if 4 * j < n else _first_round(n, j)


def _subset(n: int, k: int, u: Array, rng: np.random.Generator, first: IntArray | None) -> IntArray:
    """:func:`uniform_subset` from its first round's variates ``u`` (``first``: their distinct values as the
    kernel found them, else found here), with the further rounds drawn from ``rng``."""
    if k >= n:
        whole = np.arange(n, dtype=np.intp)
        whole.setflags(write=False)
        return whole
    j = min(k, n - k)
    few = 4 * j < n
    out: IntArray = first if first is not None else (_distinct_draws(u * n) if few else _first_distinct(u, n, j))
    while out.shape[0] < j:  # as many more draws as values are missing
        u = np.concatenate((u, rng.random(j - out.shape[0])))
        out = _distinct_draws(u * n) if few else _first_distinct(u, n, j)
    if j < k:  # the complement of the j-set
        rest = np.ones(n, dtype=bool)
        rest[out] = False
        out = np.flatnonzero(rest).astype(np.intp, copy=False)
    out.setflags(write=False)
    return out


def _first_round(n: int, j: int) -> int:
    """Draws of the first round for ``j`` distinct values out of ``n`` (``4 j >= n``, ``j <= n / 2``)."""
    return j + math.ceil(n * math.log(n / (n - j)) - j + 4.0 * math.sqrt(n))


def _distinct_draws(v: Array) -> IntArray:
    """The distinct values of ``floor(v)`` for ``v = u n``, sorted (:func:`uniform_subset`, ``4 j < n``).
    ``u <= 1 - 2^-53`` and ``n < 2^53`` round ``u n`` below ``n``: the values lie in ``0..n-1``."""
    t = v.astype(np.intp)  # truncation: floor of a non-negative number
    t.sort()
    if t.shape[0] > 1 and np.count_nonzero(t[1:] == t[:-1]):
        keep = np.empty(t.shape[0], dtype=bool)
        keep[0] = True
        np.not_equal(t[1:], t[:-1], out=keep[1:])
        t = t[keep]
    return t


def _first_distinct(u: Array, n: int, j: int) -> IntArray:
    """The first ``j`` distinct values of ``min(floor(u n), n - 1)`` in the order of ``u`` (fewer when ``u``
    has fewer), sorted (:func:`uniform_subset`, ``4 j >= n``): each index's first draw, then the ``j``
    indices drawn first."""
    r = u.shape[0]
    t = (u * n).astype(np.intp)  # in 0..n-1, as in _distinct_draws
    first = np.full(n, r, dtype=np.intp)  # r: never drawn
    np.minimum.at(first, t, np.arange(r))
    cut = min(int(np.partition(first, j - 1)[j - 1]), r - 1)
    out: IntArray = np.flatnonzero(first <= cut)
    if out.dtype != np.intp:
        out = out.astype(np.intp)
    return out


def densify(support: IntArray, values: Array, floor: float, m: int) -> Array:
    """The dense vector of a floor + support form."""
    p = np.full(m, floor)
    p[support] = values
    return p


def sparsify(p: Array) -> tuple[IntArray, Array, float]:
    """The floor + support form of a dense ``p`` (floor = its smallest entry)."""
    floor = float(p.min())
    support: NDArray[np.intp] = np.flatnonzero(p > floor).astype(np.intp)
    return support, p[support].copy(), floor


# ---------------------------------------------------------------------- ADSZOG: p and z_p together
@dataclass(frozen=True)
class PZ:
    """ADSZOG's ``p`` and ``z_p`` in one form: dense (``support is None``) or floor + support.

    In the floor + support form, the entries outside ``support`` all have ``p_j = p_floor`` and
    ``z_pj = z_floor``. ADSZOG treats every such entry alike (same projection threshold, same
    averaging, same moving average) unless ``M3`` gives it a positive gain, so the form is closed
    under its step: the untouched entries stay one block. The per-step work is
    ``O(|support| + |M|)``; entries whose ``(p_j, z_pj)`` become equal to the floor again (both
    flushed to zero) leave the support.
    """

    p: Array
    z: Array
    support: IntArray | None
    p_floor: float
    z_floor: float
    m: int

    def norm_z(self) -> float:
        """``||z_p||_2``."""
        extra = 0.0 if self.support is None else (self.m - self.support.shape[0]) * self.z_floor * self.z_floor
        return math.sqrt(dot_self(self.z) + extra)  # not BLAS: no thread start-up

    def dense_p(self) -> Array:
        return self.p if self.support is None else densify(self.support, self.p, self.p_floor, self.m)


def _pz(p: Array, z: Array, support: IntArray | None, p_floor: float, z_floor: float, m: int) -> PZ:
    """``PZ(p, z, support, p_floor, z_floor, m)`` without the frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field): the same instance, about 2 us less per step's form."""
    out = object.__new__(PZ)
    out.__dict__.update(p=p, z=z, support=support, p_floor=p_floor, z_floor=z_floor, m=m)
    return out


def pz_project(pz: PZ, eta: float) -> PZ:
    """``p_hat = Proj_Delta(p + eta z_p)`` (returned in the ``p`` slot; ``z`` unchanged)."""
    if pz.support is None:  # p + eta z in one new array, projected in place
        v = pz.z * eta
        v += pz.p
        return _pz(project_simplex_dense(v, overwrite=True), pz.z, None, 0.0, 0.0, pz.m)
    k = int(pz.p.shape[0])
    n_floor = pz.m - k
    v_floor = pz.p_floor + eta * pz.z_floor
    if n_floor > 0:  # the support values and the floor block's value in one array
        values = np.empty(k + 1)
        v = values[:k]
        np.multiply(pz.z, eta, out=v)
        v += pz.p  # p + eta z, element for element
        values[k] = v_floor
        tau = _floor_threshold(values, n_floor)
    else:
        v = pz.p + eta * pz.z
        tau = simplex_threshold(v)
    p_hat = v - tau
    p_hat[p_hat < FLUSH] = 0.0
    floor = v_floor - tau
    return _pz(p_hat, pz.z, pz.support, floor if floor >= FLUSH else 0.0, pz.z_floor, pz.m)


def pz_average(pz: PZ, p_hat: PZ, a: float) -> PZ:
    """``p <- (1 - a) p + a p_hat``."""
    p = (1.0 - a) * pz.p
    p += a * p_hat.p
    return _pz(p, pz.z, pz.support, (1.0 - a) * pz.p_floor + a * p_hat.p_floor, pz.z_floor, pz.m)


def pz_project_average(pz: PZ, eta: float, a: float) -> PZ:
    """``pz_average(pz, pz_project(pz, eta), a)``: ``p <- (1 - a) p + a Proj_Delta(p + eta z_p)`` (ADSZOG Alg. 1
    l.6-7); with the compiled kernel and the floor + support form in one call (the same operations, the same
    values bit for bit)."""
    if pz.support is None:
        return pz_average(pz, pz_project(pz, eta), a)
    fn = _compiled("pz_project_average_sparse") if pz.p.dtype == pz.z.dtype == np.float64 else None
    if fn is None:
        return pz_average(pz, pz_project(pz, eta), a)
    p, p_floor = fn(pz.p, pz.z, float(pz.p_floor), float(pz.z_floor), int(pz.m), float(eta), float(a), FLUSH)
    return _pz(p, pz.z, pz.support, float(p_floor), pz.z_floor, pz.m)


def pz_sample(pz: PZ, u: Array) -> IntArray:
    """``M2 ~ p`` by inverse CDF (both forms give the same indices up to rounding)."""
    if pz.support is None:
        return sample_dense(pz.p, u)
    return sample_sparse(pz.support, pz.p, pz.p_floor, pz.m, u)


def pz_ema(pz: PZ, h: Ascent, b: float) -> PZ:
    """``z_p <- (1 - b) z_p + b H`` with ``H = -lambda p + sum_{j in M3} e_j gain_j`` (M3 distinct)."""
    if pz.support is None:  # (1 - b) z + b (-lambda p), element for element, in two m-vectors instead of four
        z = pz.z * (1.0 - b)
        lam_p = pz.p * -h.lam
        lam_p *= b
        z += lam_p
        z[h.idx] += b * h.gain
        return _pz(pz.p, z, None, 0.0, 0.0, pz.m)
    z_floor = (1.0 - b) * pz.z_floor + b * (-h.lam * pz.p_floor)
    fn = (
        _compiled("pz_ema_sparse")
        if h.idx.dtype == pz.support.dtype == np.intp and h.gain.dtype == np.float64
        else None
    )
    if fn is not None:  # the same operations in one call
        union, p_k, z_k, merged = fn(pz.support, pz.p, pz.z, float(pz.p_floor), float(pz.z_floor), h.idx, h.gain,
                                     float(b), float(h.lam))  # fmt: skip
        if not merged:  # the support and p stay these arrays, as below
            union, p_k = pz.support, pz.p
        return _pz(p_k, z_k, union, pz.p_floor, z_floor, pz.m)
    positive = h.gain > 0.0
    support, p, z = pz.support, pz.p, pz.z
    where: IntArray | None = None
    if np.count_nonzero(positive):  # else no entry leaves the floor block: the support stays
        idx = h.idx[positive]
        order = idx.argsort()
        gained, gain = idx[order], h.gain[positive][order]
        # entries leaving the floor block start from the floor values
        support, (p, z), where = _merge_at(support, gained, (p, pz.p_floor), (z, pz.z_floor))
    z = (1.0 - b) * z + b * (-h.lam * p)
    if where is not None:
        z[where] += b * gain
    return _pz(p, z, support, pz.p_floor, z_floor, pz.m)


def pz_flush(pz: PZ, threshold: float, *, overwrite: bool = False) -> PZ:
    """Zero the entries below ``threshold`` in magnitude; drop support entries equal to the floor.

    ``overwrite=True``: ``pz.p`` and ``pz.z`` are arrays the caller owns, zeroed in place (no copies).
    """
    p, z = (pz.p, pz.z) if overwrite else (pz.p.copy(), pz.z.copy())
    p[p < threshold] = 0.0
    z[np.abs(z) < threshold] = 0.0
    p_floor = pz.p_floor if pz.p_floor >= threshold else 0.0
    z_floor = pz.z_floor if abs(pz.z_floor) >= threshold else 0.0
    if pz.support is None:
        return PZ(p, z, None, 0.0, 0.0, pz.m)
    keep = (p != p_floor) | (z != z_floor)
    return PZ(p[keep], z[keep], pz.support[keep], p_floor, z_floor, pz.m)
