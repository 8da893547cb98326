"""Compiled (numba) versions of the hot loops of :mod:`zoframe_constrained.simplex` for the floor + support form of p.

Used through :mod:`zoframe_constrained._kernels` (the switch); imported only when the kernel is active,
numba being installed. No randomness here: the functions receive the uniforms the numpy path draws.
Only the sparse form's work is compiled (the form ``p_form="auto"`` picks from 10,000 constraints on,
where it was measured to pay); the dense form keeps the numpy code, so that runs on small problems
never import numba.

* :func:`sample_sparse`: ``M2 ~ p`` (DSZOG Alg. 1 l.6, ADSZOG Alg. 1 l.10), one binary search per
  draw instead of a dozen vector operations; the same floating-point operations as the numpy code (a
  sequential cumulative sum, the same products and sums element for element): the same indices.
* :func:`merge1`, :func:`merge2`: the insertion of the sampled constraints ``M3`` into the support
  (DSZOG's ascent step, ADSZOG's moving average of ``z_p``, Alg. 1 l.15); data movement only, the same
  arrays as the numpy code.

Both give the numpy code's results bit for bit, so the iterates are the same with and without the
kernel. The projection's threshold is not compiled: it cost under 5% of a step (breast-cancer
pairwise, 4%), and a compiled sum cannot repeat the BLAS dot product's rounding, which the step-length
tests of ``steps="auto"`` then amplify into different accept / reject decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba
import numpy as np

__all__ = ["merge1", "merge2", "sample_sparse"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _jit(fn: _F) -> _F:
    """Compiled on the first call, the machine code cached on disk for the next processes."""
    return cast(_F, numba.njit(cache=True, nogil=True)(fn))


@_jit
def sample_sparse(support: Any, values: Any, floor: float, m: int, u: Any) -> Any:
    """:func:`zoframe_constrained.simplex.sample_sparse`: the same indices for the same uniforms."""
    n = support.shape[0]
    nu = u.shape[0]
    out = np.empty(nu, dtype=np.intp)
    before = np.empty(n)  # the excess mass before each support entry
    acc = 0.0
    for k in range(n):
        r = values[k] - floor  # values - floor (with floor +0.0: the values themselves)
        acc = r if k == 0 else acc + r  # np.cumsum: sequential
        before[k] = acc - r  # cum_r - r, element for element
    total = floor * m + (acc if n else 0.0)
    top = m - 1.0
    if n == 0:
        for i in range(nu):
            out[i] = int(min(u[i] * total / floor, top))
        return out
    if not floor > 0.0:  # all the mass on the support: the k-th entry holds [before_k, before_k + r_k)
        for i in range(nu):
            k = np.searchsorted(before, u[i] * total, side="right") - 1
            out[i] = support[max(k, 0)]
        return out
    start = np.empty(n)  # mass of the indices before S_k
    end = np.empty(n)
    for k in range(n):
        start[k] = floor * support[k] + before[k]
        end[k] = start[k] + values[k]
    first = support[0] - 1.0
    for i in range(nu):
        t = u[i] * total
        k = np.searchsorted(start, t, side="right") - 1
        if k < 0:  # before S_0
            j = int(min(t / floor, first))
        else:
            ek = end[k]
            if t < ek:  # on the support entry S_k
                out[i] = support[k]
                continue
            # in the floor gap after S_k (clipped in floating point before the cast: t / floor may overflow)
            j = support[k] + 1 + int(min(max(np.floor((t - ek) / floor), 0.0), float(m)))
            nxt = support[k + 1] if k + 1 < n else m
            j = min(j, nxt - 1)
        out[i] = min(max(j, 0), m - 1)
    return out


@_jit
def _absent(support: Any, idx: Any) -> tuple[Any, Any, int]:
    """``searchsorted(support, idx)``, which of ``idx`` are missing from ``support``, and how many."""
    n = support.shape[0]
    pos = np.searchsorted(support, idx)
    absent = np.zeros(idx.shape[0], dtype=np.bool_)
    new = 0
    for j in range(idx.shape[0]):
        if n == 0 or support[min(pos[j], n - 1)] != idx[j]:
            absent[j] = True
            new += 1
    return pos, absent, new


@_jit
def _scatter(src: Any, vals: Any, pos: Any, absent: Any, new: int) -> Any:
    """``src`` with ``vals[j]`` inserted before the old position ``pos[j]`` for each absent ``j`` (in order)."""
    n = src.shape[0]
    out = np.empty(n + new, dtype=src.dtype)
    o = 0
    old = 0
    for j in range(pos.shape[0]):
        if absent[j]:
            slot = pos[j] + o - old  # the old position plus the entries inserted so far
            while o < slot:
                out[o] = src[old]
                o += 1
                old += 1
            out[o] = vals[j]
            o += 1
    while old < n:
        out[o] = src[old]
        o += 1
        old += 1
    return out


@_jit
def merge1(support: Any, idx: Any, a: Any, fill_a: float) -> tuple[Any, Any, Any]:
    """:func:`zoframe_constrained.simplex._merge_at` with one filled array: the same arrays, bit for bit."""
    pos, absent, new = _absent(support, idx)
    if new == 0:
        return support, a, pos
    union = _scatter(support, idx, pos, absent, new)
    return union, _scatter(a, np.full(idx.shape[0], fill_a), pos, absent, new), np.searchsorted(union, idx)


@_jit
def merge2(support: Any, idx: Any, a: Any, fill_a: float, b: Any, fill_b: float) -> tuple[Any, Any, Any, Any]:
    """:func:`zoframe_constrained.simplex._merge_at` with two filled arrays: the same arrays, bit for bit."""
    pos, absent, new = _absent(support, idx)
    if new == 0:
        return support, a, b, pos
    union = _scatter(support, idx, pos, absent, new)
    out_a = _scatter(a, np.full(idx.shape[0], fill_a), pos, absent, new)
    out_b = _scatter(b, np.full(idx.shape[0], fill_b), pos, absent, new)
    return union, out_a, out_b, np.searchsorted(union, idx)
