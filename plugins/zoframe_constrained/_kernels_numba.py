"""The compiled (numba) kernel of DSZOG / ADSZOG's step: the work on p and the arithmetic of G_L.

Used through :mod:`zoframe_constrained._kernels` (the switch); imported only when the kernel is active,
numba being installed. No randomness here: the functions receive what the numpy path draws (uniforms,
directions, batches), so both paths draw the same random numbers. Every function performs the numpy
code's floating-point operations in the same order, including numpy's pairwise summation
(:func:`add_reduce`), hence **the same results bit for bit** and the same iterates with and without
the kernel (``tests/test_kernels.py``). The sums the numpy code used to take as BLAS dot products
(the projection's threshold) are numpy's pairwise sums on both paths, so that they can be repeated
here, and so that they no longer depend on the CPU's BLAS kernel.

* :func:`subset_first`: a uniform batch ``M1`` / ``M3`` (DSZOG Alg. 1 l.5, l.7; ADSZOG Alg. 1 l.9, l.11) where
  it is at least a quarter of its population: the first distinct indices of the uniforms, one mark per index;
* :func:`sample_sparse`: ``M2 ~ p`` (DSZOG Alg. 1 l.6, ADSZOG Alg. 1 l.10), one binary search per draw;
* :func:`pz_project_average_sparse`: ADSZOG Alg. 1 l.6-7 (projection with its threshold, averaging);
* :func:`pz_ema_sparse`: ADSZOG Alg. 1 l.15 (the moving average of ``z_p``, new support entries merged);
* :func:`ascent_sparse`: DSZOG Alg. 1 l.11 (``Proj_Delta(p + eta H)``);
* :func:`lagrangian_sums`: G_L's weighting ``[l_M1, phi_M2] * weights``, differences and their sums
  (DSZOG Alg. 1 l.8, ADSZOG Alg. 1 l.12); the product with the directions stays numpy's (BLAS).

The floor + support form of p is compiled (the form ``p_form="auto"`` picks from 10,000 constraints on)
and G_L from the same number of constraints on; the dense form of p keeps the numpy code, so that runs
on small problems never import numba. Not compiled: the random draws, the user's functions and the
counting oracle around them, the norms (``einsum``), the state records, and the uniform batches that are a small
part of their population (numpy's sort of a few hundred integers is the faster one there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba
import numpy as np

__all__ = [
    "add_reduce", "ascent_sparse", "lagrangian_sums", "pz_ema_sparse", "pz_project_average_sparse", "sample_sparse",
    "subset_first", "subset_pair", "subset_sorted", "threshold",
]

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
def subset_first(u: Any, n: int, j: int) -> Any:
    """:func:`zoframe_constrained.simplex._first_distinct`: the first ``j`` distinct ``floor(u n)``
    in the order of ``u``, sorted (one mark per index, read in order)."""
    seen = np.zeros(n, dtype=np.bool_)
    c = 0
    for i in range(u.shape[0]):
        v = int(u[i] * n)
        if not seen[v]:
            seen[v] = True
            c += 1
            if c == j:
                break
    out = np.empty(c, dtype=np.intp)
    c = 0
    for v in range(n):
        if seen[v]:
            out[c] = v
            c += 1
    return out


@_jit
def subset_sorted(u: Any, n: int) -> Any:
    """:func:`zoframe_constrained.simplex._distinct_draws` of ``u n``: the distinct ``floor(u n)``, sorted. The
    variates are sorted by buckets (``floor(u k)`` of ``k`` buckets, then by insertion within a bucket:
    expected linear time for uniforms); ``floor(u n)`` is non-decreasing in ``u``, so equal indices are
    neighbours."""
    k = u.shape[0]
    count = np.zeros(k + 1, dtype=np.intp)
    for i in range(k):
        count[int(u[i] * k) + 1] += 1
    for b in range(k):
        count[b + 1] += count[b]
    s = np.empty(k)
    fill = count[:k].copy()
    for i in range(k):
        b = int(u[i] * k)
        s[fill[b]] = u[i]
        fill[b] += 1
    for b in range(k):  # insertion sort within each bucket
        for i in range(count[b] + 1, count[b + 1]):
            x = s[i]
            j = i - 1
            while j >= count[b] and s[j] > x:
                s[j + 1] = s[j]
                j -= 1
            s[j + 1] = x
    out = np.empty(k, dtype=np.intp)
    c = 0
    for i in range(k):
        t = int(s[i] * n)
        if c == 0 or t != out[c - 1]:
            out[c] = t
            c += 1
    return out[:c]


@_jit
def _subset_round(u: Any, n: int, j: int) -> Any:
    return subset_sorted(u, n) if 4 * j < n else subset_first(u, n, j)


@_jit
def subset_pair(u: Any, r1: int, n1: int, j1: int, n2: int, j2: int) -> Any:
    """The first rounds of :func:`zoframe_constrained.simplex.uniform_subsets` in one call: ``u[:r1]`` for the
    first batch (``j1`` values out of ``n1``), the rest for the second (``j2`` out of ``n2``)."""
    return _subset_round(u[:r1], n1, j1), _subset_round(u[r1:], n2, j2)


# ---------------------------------------------------------------------- numpy's sums, the same rounding
@_jit
def _block(a: Any, lo: int, n: int) -> float:
    """numpy's ``pairwise_sum`` of ``a[lo:lo + n]`` for ``n <= 128``: sequential below 8 entries, else eight
    running sums combined as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))`` and the rest added."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    stop = n - n % 8
    while i < stop:
        j = lo + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    tot: float = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        tot += a[lo + i]
        i += 1
    return tot


@_jit
def _pairwise(a: Any, lo: int, n: int) -> float:
    """numpy's pairwise summation of ``a[lo:lo + n]`` (``pairwise_sum`` in numpy's loops): above 128 entries
    the sum of the two halves, split at a multiple of 8; the same additions in the same order. The
    recursion runs on an explicit stack (numba's on-disk cache does not keep recursive functions)."""
    if n <= 128:
        return _block(a, lo, n)
    los = np.empty(64, dtype=np.intp)
    ns = np.empty(64, dtype=np.intp)
    stage = np.zeros(64, dtype=np.intp)  # 1: the left half is being summed, 2: the right half
    left = np.empty(64)
    top = 0
    los[0] = lo
    ns[0] = n
    while True:
        k = ns[top]
        if k > 128:  # split: the left half first
            n2 = k // 2
            n2 -= n2 % 8
            stage[top] = 1
            los[top + 1] = los[top]
            ns[top + 1] = n2
            top += 1
            continue
        r = _block(a, los[top], k)
        top -= 1
        while top >= 0 and stage[top] == 2:  # right halves done: left + right
            r = left[top] + r
            top -= 1
        if top < 0:
            return r
        left[top] = r  # a left half done: the right half next
        stage[top] = 2
        k = ns[top]
        n2 = k // 2
        n2 -= n2 % 8
        los[top + 1] = los[top] + n2
        ns[top + 1] = k - n2
        top += 1


@_jit
def add_reduce(a: Any, n: int) -> float:
    """``float(np.add.reduce(a[:n]))`` for a contiguous float64 ``a``, bit for bit (the reduction starts from
    numpy's identity 0.0, then adds the pairwise sum)."""
    total: float = 0.0 + _pairwise(a, 0, n)
    return total


@_jit
def _max(v: Any, n: int) -> float:
    """``v[:n].max()`` (NaN wins, as in numpy)."""
    mx: float = v[0]
    for i in range(1, n):
        x: float = v[i]
        if x != x:
            return x
        if x > mx:
            mx = x
    return mx


@_jit
def _mean_tau(v: Any, n: int, floor_in: bool, n_floor: int) -> float:
    """``(sum - 1) / count`` over the first ``n`` entries of ``v``; with ``floor_in`` the last of them stands for
    ``n_floor`` equal entries: multiplied by its count in place for the sum and put back, as
    :func:`zoframe_constrained.simplex._floor_threshold` does (the sum of ``simplex_threshold(v, counts)``)."""
    if floor_in:
        last = v[n - 1]
        v[n - 1] = last * float(n_floor)
        total = add_reduce(v, n)
        v[n - 1] = last
        return (total - 1.0) / float(n - 1 + n_floor)
    return (add_reduce(v, n) - 1.0) / float(n)


@_jit
def threshold(v: Any, n_floor: int) -> float:
    """:func:`zoframe_constrained.simplex._floor_threshold` (``n_floor > 0``: the last entry of ``v`` stands
    for ``n_floor`` equal entries) or, with ``n_floor == 0``, ``simplex_threshold(v)``: the same candidate
    sets and the same sums (numpy's pairwise sum of the kept entries, the floor block's entry times its
    count), hence the same value bit for bit. One pass per round keeps (compacts in place) and counts the
    entries above the current threshold, one more sums them. ``v`` is used as scratch."""
    n = v.shape[0]
    floor_in = n_floor > 0
    mean_tau = _mean_tau(v, n, floor_in, n_floor)
    tau = max(_max(v, n) - 1.0, mean_tau)
    first = True
    while True:
        last_in = floor_in and v[n - 1] > tau  # the floor block is the last entry while it is kept
        k = 0
        for i in range(n):
            x = v[i]
            if x > tau:
                v[k] = x
                k += 1
        if k == n:  # every entry kept: tau is final (at the first round the next pass would end at mean_tau)
            return mean_tau if first else tau
        if k == 0:  # empty only by rounding (values ~1e16): tau is exact enough
            return tau
        first = False
        floor_in = last_in
        n = k
        tau = _mean_tau(v, n, floor_in, n_floor)


# ---------------------------------------------------------------------- ADSZOG: p and z_p, floor + support form
@_jit
def pz_project_average_sparse(
    p: Any, z: Any, p_floor: float, z_floor: float, m: int, eta: float, a: float, flush: float
) -> Any:
    """``pz_average(pz, pz_project(pz, eta), a)`` for the floor + support form (ADSZOG Alg. 1 l.6-7): the new
    ``p`` on the support and its floor, with the same operations element for element."""
    k = p.shape[0]
    n_floor = m - k
    v_floor = p_floor + eta * z_floor
    v = np.empty(k + 1 if n_floor > 0 else k)
    for i in range(k):
        v[i] = z[i] * eta + p[i]  # p + eta z
    if n_floor > 0:
        v[k] = v_floor
    tau = threshold(v.copy(), n_floor)
    floor = v_floor - tau
    if not floor >= flush:
        floor = 0.0
    s = 1.0 - a
    out = np.empty(k)
    for i in range(k):
        ph = v[i] - tau
        if ph < flush:
            ph = 0.0
        out[i] = s * p[i] + a * ph
    return out, s * p_floor + a * floor


@_jit
def _merge(support: Any, idx: Any) -> Any:
    """The sorted union of the sorted distinct ``support`` and ``idx``; for each union entry its position in
    ``support`` (``-1``: new); for each ``idx`` entry its position in the union."""
    n, k = support.shape[0], idx.shape[0]
    union = np.empty(n + k, dtype=np.intp)
    src = np.empty(n + k, dtype=np.intp)
    where = np.empty(k, dtype=np.intp)
    i = j = u = 0
    while i < n or j < k:
        if j == k or (i < n and support[i] < idx[j]):
            union[u] = support[i]
            src[u] = i
            i += 1
        else:
            if i < n and support[i] == idx[j]:
                src[u] = i
                i += 1
            else:
                src[u] = -1
            union[u] = idx[j]
            where[j] = u
            j += 1
        u += 1
    return union[:u], src[:u], where


@_jit
def pz_ema_sparse(
    support: Any, p: Any, z: Any, p_floor: float, z_floor: float, idx: Any, gain: Any, b: float, lam: float
) -> Any:
    """``pz_ema`` (ADSZOG Alg. 1 l.15) for the floor + support form: ``(support, p, z, merged)``; the entries of
    ``idx`` with a positive gain join the support (starting from the floor values), ``merged`` says whether
    any did. ``idx`` distinct."""
    npos = 0
    for i in range(idx.shape[0]):
        if gain[i] > 0.0:
            npos += 1
    s = 1.0 - b
    nl = -lam
    if npos == 0:
        zn = np.empty(p.shape[0])
        for i in range(p.shape[0]):
            zn[i] = s * z[i] + b * (nl * p[i])
        return support, p, zn, False
    gi = np.empty(npos, dtype=np.intp)
    gg = np.empty(npos)
    c = 0
    for i in range(idx.shape[0]):
        if gain[i] > 0.0:
            gi[c] = idx[i]
            gg[c] = gain[i]
            c += 1
    ordered = True
    for j in range(1, npos):
        if gi[j] < gi[j - 1]:
            ordered = False
            break
    if not ordered:  # (the uniform batches come sorted)
        order = np.argsort(gi)
        gi = gi[order]
        gg = gg[order]
    n = support.shape[0]
    pos = np.searchsorted(support, gi)
    new = 0
    for j in range(npos):
        if pos[j] >= n or support[pos[j]] != gi[j]:
            new += 1
    if new == 0:  # every gain on the support already: z alone changes, in one pass (the same operations)
        zn = np.empty(n)
        for i in range(n):
            zn[i] = s * z[i] + b * (nl * p[i])
        for j in range(npos):
            zn[pos[j]] += b * gg[j]
        return support, p, zn, False
    union, src, where = _merge(support, gi)
    nu = union.shape[0]
    pn = np.empty(nu)
    zn = np.empty(nu)
    for u in range(nu):
        t = src[u]
        pu = p[t] if t >= 0 else p_floor
        zu = z[t] if t >= 0 else z_floor
        pn[u] = pu
        zn[u] = s * zu + b * (nl * pu)
    for j in range(npos):
        zn[where[j]] += b * gg[j]
    return union, pn, zn, True


# ---------------------------------------------------------------------- DSZOG: the ascent step, floor + support form
@_jit
def ascent_sparse(support: Any, values: Any, floor: float, m: int, eta: float, idx: Any, gain: Any,
                  lam: float, flush: float) -> Any:  # fmt: skip
    """:func:`zoframe_constrained.simplex.ascent_sparse` (DSZOG Alg. 1 l.11) with the same operations:
    ``(support, values, floor, status)``; status 1: ``idx`` has repeated indices, 2: the threshold is
    beyond the safe range (the caller takes the numpy code for both)."""
    k = idx.shape[0]
    order = np.argsort(idx, kind="mergesort")
    si = idx[order]
    sg = gain[order]
    for j in range(1, k):
        if si[j] == si[j - 1]:
            return support, values, floor, 1
    s = 1.0 - eta * lam
    union, src, where = _merge(support, si)
    nu = union.shape[0]
    n_floor = m - nu
    v = np.empty(nu + 1 if n_floor > 0 else nu)
    sf = s * floor
    for u in range(nu):
        t = src[u]
        v[u] = s * values[t] if t >= 0 else sf
    for j in range(k):
        v[where[j]] += eta * sg[j]
    if n_floor > 0:
        v[nu] = sf
    tau = threshold(v.copy(), n_floor)
    if abs(tau) > 2.0**50:
        return support, values, floor, 2
    new_floor = sf - tau
    if not new_floor >= flush:
        new_floor = 0.0
    keep = 0
    for u in range(nu):
        x = v[u] - tau
        if x < flush:
            x = 0.0
        v[u] = x
        if x > new_floor:
            keep += 1
    out_s = np.empty(keep, dtype=np.intp)
    out_v = np.empty(keep)
    c = 0
    for u in range(nu):
        if v[u] > new_floor:
            out_s[c] = union[u]
            out_v[c] = v[u]
            c += 1
    return out_s, out_v, new_floor, 0


# ---------------------------------------------------------------------- G_L: the Gaussian estimate's arithmetic
@_jit
def lagrangian_sums(loss: Any, f: Any, weights: Any, inv_h: float) -> Any:
    """The row sums of the estimate's differences, ``(sums, any difference non-zero, sum of the base row)``:
    with ``vals = [loss, max(f, 0)^2] * weights`` (:func:`zoframe_constrained.solvers._weighted_terms`),
    ``sums = np.add.reduce((vals[1:] - vals[0]) * inv_h, axis=1)`` as the random-direction estimators take
    them (``oracle_gradient``, ``estimate``) and ``np.add.reduce(vals[0])``: the same products, differences
    and pairwise sums, bit for bit."""
    k, b1 = loss.shape
    b2 = f.shape[1]
    b = b1 + b2
    base = np.empty(b)
    for j in range(b1):
        base[j] = loss[0, j] * weights[j]
    for j in range(b2):
        x = f[0, j]
        phi = x if (x >= 0.0 or x != x) else 0.0  # np.maximum(x, 0.0): NaN and -0.0 kept
        base[b1 + j] = (phi * phi) * weights[b1 + j]
    row = np.empty(b)
    sums = np.empty(k - 1)
    nonzero = False
    for r in range(1, k):
        for j in range(b1):
            d = (loss[r, j] * weights[j] - base[j]) * inv_h
            row[j] = d
            nonzero = nonzero or d != 0.0
        for j in range(b2):
            x = f[r, j]
            phi = x if (x >= 0.0 or x != x) else 0.0
            d = ((phi * phi) * weights[b1 + j] - base[b1 + j]) * inv_h
            row[b1 + j] = d
            nonzero = nonzero or d != 0.0
        sums[r - 1] = add_reduce(row, b)
    return sums, nonzero, add_reduce(base, b)
