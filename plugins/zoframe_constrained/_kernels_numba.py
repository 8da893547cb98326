"""The compiled (numba) kernel of :mod:`zoframe_constrained.simplex`: sampling from p in the floor + support form.

Used through :mod:`zoframe_constrained._kernels` (the switch); imported only when the kernel is active,
numba being installed. No randomness here: the functions receive the uniforms the numpy path draws.
Only the sparse form's work is compiled (the form ``p_form="auto"`` picks from 10,000 constraints on,
where it was measured to pay); the dense form keeps the numpy code, so that runs on small problems
never import numba.

:func:`sample_sparse`: ``M2 ~ p`` (DSZOG Alg. 1 l.6, ADSZOG Alg. 1 l.10), one binary search per
draw instead of a dozen vector operations over the batch; the same floating-point operations as the
numpy code (a sequential cumulative sum, the same products and sums element for element), hence the
same indices bit for bit, and the same iterates with and without the kernel. Not compiled, after measuring (docs/performance.md): the insertion of ``M3`` into the support
(a compiled merge saved under 2% of a step: it is data movement over the support either way), and the
projection's threshold (4% of a breast-cancer step, 7% on a9a), whose compiled sum cannot repeat the
BLAS dot product's rounding: differences in the last bits, which the step-length tests of
``steps="auto"`` turned into different accept / reject decisions within 100 steps (fairness D1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba
import numpy as np

__all__ = ["sample_sparse"]

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
