"""The stationarity certificate behind ``Result.success``: one test, the same for every solver.

:func:`certify` looks at a problem through its :class:`~zoframe.oracle.CountingOracle` only (never
the problem object) and decides whether a point is an approximate stationary / KKT point, from
quantities *at that point* (nothing from the run that produced it: not its start, not its first
gradient). It is what turns a solver's claim (status ``CONVERGED``) into ``Result.success``, and
what ``zoframe verify`` reports, so the two agree on the same point.

What it computes, by the oracle's kind (``s = max(1, |x|_inf)`` is the point's length scale):

finite-sum (optionally over a ``feasible_set``) and constrained problems
    * ``grad f`` by central differences over all ``d`` coordinates, step
      ``h_i = eps^(1/4) max(1, |x_i|)`` (one-sided at a bound of a box ``feasible_set``: every point
      stays inside it). The quarter power rather than the usual third keeps the *second*
      differences ``H_ii = (f(x + h e_i) - 2 f(x) + f(x - h e_i)) / h_i^2`` above rounding noise
      when ``|f|`` is large next to its curvature (a shifted objective); the gradient's truncation
      error ``O(h^2)`` stays around ``1e-8`` of its size, far below any tolerance used here. The
      same ``2 d + 1`` points give the per-component gradients of a finite sum for free.
    * for constrained problems, ONE value-only pass over all ``m`` constraints in blocks
      (:func:`zoframe.measures.max_violation_full`, memory bounded whatever ``m``): the max
      violation and the ``active_cap`` largest values (the candidates); their gradients by central
      differences at the same points, in blocks of ``B = max(64, min(8 d, 1024))``, ``2 B``, ``4 B``, ... candidates, closest
      to active first (one batched call per chunk of coordinates); the nearly active set is the candidates
      at distance ``-g_j / |grad g_j| <= band * s`` (``band = 10 tol``), plus the bounds of a box
      ``feasible_set`` within the same distance (exact rows ``+-e_i``). After each block the multipliers
      are fitted over every nearly active row so far; the blocks stop once the fit passes or a block's
      least active candidate lies beyond the band, so a degenerate optimum (thousands of active
      constraints, more than variables: the multipliers live on a subset that spans the gradient) is
      certified from as many rows as it needs. When the ``active_cap + 1``-th largest value is still
      within the band (estimated with the largest candidate gradient), the cap *binds*: the
      certificate says so (``cap_hit``).
    * multipliers ``l >= 0`` by non-negative least squares with complementarity rows (scipy's NNLS up to
      one block of rows; beyond, Lawson & Hanson's active-set method on the rows' structure)::

          r^2 = min_{l >= 0} |grad f + J^T l|^2 + sum_j (l_j g_j / s)^2

      so a constraint at distance ``d_j`` that carries the force ``l_j |grad g_j|`` costs
      ``(force * d_j / s)^2``: using a constraint that is not quite active is penalised in
      proportion to how far it is, relative to the point's scale (a constraint ``tol s`` away
      contributes ``tol`` of its force, the tolerance itself). A bound of a box uses the box's
      width instead of ``s`` where it is narrower (a variable that lives in ``[0, 0.01]`` is not
      "nearly at" its bound ``4e-4`` away).
    * the test ``r <= tol * ref`` with ``ref = max(|grad f|, s max_i |H_ii|, mean_i |grad f_i|)``:
      relative to the gradient (the usual relative KKT residual when the gradient is balanced by
      constraints); at an interior point, relative to the curvature (``r / ref <= tol`` then says
      that a Newton step would move ``x`` by at most ``tol s``); for a finite sum, relative to the
      typical component gradient. Every term scales with ``f`` and none moves with ``f + const``,
      so multiplying ``f`` by a constant does not change the verdict.
    * the same test coordinate by coordinate (:func:`_coordinate_ratio`): each entry of the residual
      against its own coordinate's gradient, multiplier forces, curvature and component gradients,
      so that variables of very different scales do not pass on each other's quantities. The
      reported residual is the larger of the two ratios.
    * a cheap second-order test that rejects KKT points that are not minima (a local maximum
      along the boundary, a saddle): ``probes`` directions ``v`` (the coordinates of least
      curvature ``H_ii`` and the two sums / differences of the first two, projected onto the null
      space of the gradients of the constraints that carry a multiplier), symmetric probes
      ``x +- t v`` with ``t = 1e-3 s``, each pulled back onto those constraints by one Gauss-Newton
      step; the certificate is refused when ``D = f(z+) + f(z-) - 2 f(x)`` is below the noise of
      ``f`` and ``D / (t^2 ref / s) < -0.01`` (a negative curvature along the active set's tangent
      space) at a pair of probes feasible within ``feasibility_tol`` (checked on the candidates).
    * a point whose max violation exceeds ``feasibility_tol`` (absolute, as ``Result.feasible``)
      fails, whatever its residual.
    * equality constraints ``h_l(x) = 0`` (``oracle.m_eq > 0``): all of them are active rows, their
      gradients by central differences at the same points (one more batched call per chunk), their
      multipliers of free sign (each row enters the NNLS as two columns ``+grad h_l`` and
      ``-grad h_l``), their violation ``|h_l(x)|`` in the max violation; the probes of the
      second-order test stay in the null space of their gradients, are pulled back onto them and
      must keep ``|h_l| <= feasibility_tol``.

minimax problems (``min_x max_{y in Y} F(x, y)``, at the run's own ``y``)
    ``r = max(|grad_x F| / ref_x, |y - P_Y(y + t grad_y F)| / (t ref_y))`` with
    ``t = s_y / ref_y`` and ``ref_x``, ``ref_y`` as ``ref`` above for each block (the curvature of
    ``F`` in ``x`` and in ``y``). A point that passes is stationary in ``x`` with ``y`` maximising
    (a stationary point of ``g(x) = max_y F(x, y)`` by Danskin's theorem when ``F`` is strongly
    concave in ``y``).

composite problems (``min f(x) + sum_j psi_j(y_j)`` s.t. ``A x + sum_j B_j y_j = c``, ADMM)
    with the run's ``y_j`` (solved from the coupling when it determines them) and the run's ``lam`` or
    ``lam`` fitted at the point, whichever fits better (:mod:`zoframe.certificate.composite`): the
    largest of ``|grad f - A^T lam| / ref``, ``sqrt(sum_j dist(B_j^T lam, d psi_j(y_j))^2) / ref`` (a
    block whose kinks are off by rounding judged at its prox point) and the relative coupling residual
    ``|A x + B y - c| / max(|A x|, |B y|, |c|)``, with ``ref = max(|grad f|, |A^T lam|, |B^T lam|,
    s max_j |H_jj|, mean_i |grad f_i|)`` in the gradient's units (``s`` the point's typical entry: steps and
    scales in the variables' own units: the larger of that and sqrt(|f| / |H|); no floor of 1).

Cost, counted under the purpose ``"certify"`` (``Result.nfev_by_purpose["certify"]`` and
:attr:`Certificate.evaluations`), by default outside the run's budget (like ``"monitor"``), with
``budgeted=True`` (a solver certifying inside a step) charged to it: ``(2 d + 1) n`` objective
evaluations, one full pass over the ``m`` constraints, ``2 d K`` constraint evaluations for the
``K <= active_cap`` candidates' gradients, and for the probes ``2 p (n + K + |A|)`` (``p <= probes``
directions, ``|A|`` the constraints carrying a multiplier), with equality constraints ``(2 d + 1) m_eq``
and ``4 p m_eq`` more. Minimax: ``(2 (d + d_y) + 1) n``.
Composite: ``(2 d + 1) n`` (twice when the curvature says the variables' units are far below the point's).
Deterministic: no randomness.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
import math
from typing import Any

import numpy as np

from zoframe.certificate._common import Evals, _check_tol, _count
from zoframe.certificate.composite import _composite
from zoframe.certificate.kkt import CURVATURE_TOL, PROBE_STEP, _kkt
from zoframe.certificate.minimax import _minimax
from zoframe.certificate.noise import check_noise
from zoframe.errors import InvalidInputError
from zoframe.oracle import CountingOracle

__all__ = ["CURVATURE_TOL", "DEFAULT_TOL", "PROBE_STEP", "Certificate", "certify"]

#: default tolerance on the relative residual (calibrated in ``benchmarks/certificate_calibration.py``)
DEFAULT_TOL = 1e-3


@dataclass(frozen=True)
class Certificate:
    """The verdict of :func:`certify` at one point.

    ``passed``: the point is certified. ``kind``: which test ran (``"stationarity"``,
    ``"kkt"``, ``"minimax"``, ``"composite"``). ``residual``: the relative residual compared with
    ``tol``; ``scale``: its reference (the denominator, see :mod:`zoframe.certificate`).
    ``max_violation``: the max constraint (and bound) violation over all ``m`` constraints (``None``
    for kinds without constraints). ``n_active``: constraints and bounds in the nearly active set;
    ``cap_hit``: the cap on that set bound (more constraints were nearly active than were used).
    ``descent``: the most negative relative curvature the probes found (``None``: no probe ran);
    ``evaluations``: what the certificate cost (counted under ``"certify"``); ``message``: the
    verdict in words. ``noise``: the absolute noise of the objective's values at the point (estimated by
    ECNoise, or as stated; ``None`` for kinds that do not estimate it); ``noise_floor``: what that noise
    alone contributes to the residual (the smallest tolerance these values support); ``noise_limited``:
    the verdict was decided by the noise (the residual is below the tolerance but not beyond its error
    bound): not certified, and the run's status says ``NOISE_LIMITED``.
    """

    passed: bool
    kind: str
    residual: float
    tol: float
    scale: float
    max_violation: float | None
    n_active: int
    cap_hit: bool
    descent: float | None
    evaluations: int
    message: str
    noise: float | None = None
    noise_floor: float = 0.0
    noise_limited: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly data (non-finite numbers as strings ``"inf"`` / ``"nan"``)."""
        out = asdict(self)
        for k, v in out.items():
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = repr(v)
        return out

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Certificate:
        """The inverse of :meth:`to_dict`."""

        def num(v: Any) -> float:
            return float(v)  # float("inf") and float("nan") read the strings back

        return cls(
            passed=bool(doc["passed"]), kind=str(doc["kind"]), residual=num(doc["residual"]), tol=num(doc["tol"]),
            scale=num(doc["scale"]), max_violation=None if doc.get("max_violation") is None else num(doc["max_violation"]),
            n_active=int(doc["n_active"]), cap_hit=bool(doc["cap_hit"]),
            descent=None if doc.get("descent") is None else num(doc["descent"]),
            evaluations=int(doc["evaluations"]), message=str(doc["message"]),
            noise=None if doc.get("noise") is None else num(doc["noise"]), noise_floor=num(doc.get("noise_floor", 0.0)),
            noise_limited=bool(doc.get("noise_limited", False)),
        )  # fmt: skip


def certify(
    oracle: CountingOracle,
    x: Any,
    *,
    outputs: Mapping[str, Any] | None = None,
    tol: float = DEFAULT_TOL,
    feasibility_tol: float = 1e-3,
    active_cap: int | None = None,
    probes: int = 4,
    budgeted: bool = False,
    noise: float | None = None,
    relative_noise: float | None = None,
) -> Certificate:
    """Certify that ``x`` is an approximate stationary / KKT point of the oracle's problem.

    ``outputs``: the run's report of its final iterate (``y`` of a minimax run, ``y0``, ``y1``, ...
    and ``lam`` of a composite run). ``tol``: the tolerance on the relative residual (default
    :data:`DEFAULT_TOL`). ``feasibility_tol``: the largest max violation accepted (absolute).
    ``active_cap``: the most nearly active constraints looked at (default ``max(1024, 2^24 / d)``, the rows
    of a 128 MB multiplier fit:
    the candidates of the full pass, whose gradients are taken a block at a time, closest to active first,
    until the multiplier fit passes or the candidates leave the band); when it binds,
    :attr:`Certificate.cap_hit` says so.
    ``probes``: directions of the second-order test (``0``: none). ``budgeted``: charge the evaluations to the oracle's budget (a solver certifying
    inside a step; :class:`~zoframe.errors.BudgetExhausted` may then propagate) instead of counting
    them outside it. The evaluations are counted under the purpose ``"certify"`` either way.
    ``noise`` / ``relative_noise``: the noise of the values as the user knows it (absolute, or relative to
    ``|f|``); by default it is estimated at the point (:mod:`zoframe.certificate.noise`).

    Errors of the user's functions while certifying (a non-finite value, an exception) make the
    certificate fail with the error in its message; they are not raised (except the budget's when
    ``budgeted``). See :mod:`zoframe.certificate` for what is tested and what it costs.
    """
    if not isinstance(oracle, CountingOracle):
        raise InvalidInputError(f"certify needs the problem's CountingOracle, got {type(oracle).__name__}")
    tol = _check_tol("tol", tol)
    if not tol < 1.0:  # the residual is relative to the gradient: at tol >= 1 the certificate cannot fail
        raise InvalidInputError(
            f"certify: tol must be below 1, got {tol!r}: the residual is relative to the gradient's size, so a point "
            "where no constraint balances the gradient (the starting point, say) has residual at most 1 and any "
            f"tol >= 1 passes it. Use a tolerance in (0, 1) (default {DEFAULT_TOL:g}; 1e-2 is lenient)"
        )
    feasibility_tol = _check_tol("feasibility_tol", feasibility_tol)
    stated = check_noise(noise, relative_noise)
    if active_cap is not None and (
        isinstance(active_cap, bool) or not isinstance(active_cap, (int, np.integer)) or active_cap < 1
    ):
        raise InvalidInputError(f"certify: active_cap must be a positive integer or None, got {active_cap!r}")
    if isinstance(probes, bool) or not isinstance(probes, (int, np.integer)) or probes < 0:
        raise InvalidInputError(f"certify: probes must be an integer >= 0, got {probes!r}")
    try:
        xv = np.array(x, dtype=np.float64, copy=True).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"certify: x must be a vector of {oracle.dim} real numbers ({exc})") from None
    if xv.shape != (oracle.dim,):
        raise InvalidInputError(f"certify: x must have shape ({oracle.dim},), got {np.shape(x)}")
    kind = {"finite_sum": "stationarity", "constrained": "kkt"}.get(oracle.kind, oracle.kind)
    start = _count(oracle)
    if not np.isfinite(xv).all():
        return Certificate(False, kind, math.inf, tol, math.nan, None, 0, False, None, 0, "the point is not finite")
    ev = Evals(oracle, bool(budgeted))
    cap = int(active_cap) if active_cap is not None else max(1024, (1 << 24) // oracle.dim)
    try:
        if oracle.kind == "minimax":
            parts = _minimax(ev, xv, outputs, tol, stated)
        elif oracle.kind == "composite":
            parts = _composite(ev, xv, outputs, tol, stated)
        else:
            parts = _kkt(ev, xv, tol, feasibility_tol, cap, int(probes), stated)
    except Exception as exc:  # the user's function failed at a certificate point: no certificate, said why
        from zoframe.errors import BudgetExhausted

        if isinstance(exc, BudgetExhausted) and budgeted:
            raise
        used = _count(oracle) - start
        return Certificate(
            False, kind, math.inf, tol, math.nan, None, 0, False, None, used,
            f"not certified: evaluating the problem near the point failed ({type(exc).__name__}: {exc})",
        )  # fmt: skip
    return Certificate(kind=kind, tol=tol, evaluations=_count(oracle) - start, **parts)


