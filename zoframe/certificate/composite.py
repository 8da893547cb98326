"""The composite (ADMM) test of the certificate: the coupling residual and dist(0, dL)."""

from __future__ import annotations

from collections.abc import Mapping
import math
from typing import Any

import numpy as np

from zoframe.certificate._common import Evals, _bounds, _difference_points, _ratio
from zoframe.certificate.gradient import _objective_at, _reference
from zoframe.certificate.minimax import _residual_verdict
from zoframe.errors import InvalidInputError
from zoframe.protocols import Array


def _composite(ev: Evals, x: Array, outputs: Mapping[str, Any] | None, tol: float) -> dict[str, Any]:
    oracle = ev.oracle
    A, Bs, c = np.asarray(oracle.A), [np.asarray(b) for b in oracle.B], np.asarray(oracle.c)
    out = dict(outputs or {})
    ys: list[Array] = []
    for j, Bj in enumerate(Bs):
        yj = out.get(f"y{j}")
        if yj is None:
            if len(Bs) == 1 and Bj.shape[0] == Bj.shape[1]:
                yj = np.linalg.solve(Bj, c - A @ x)  # the one block the coupling determines
            else:
                raise InvalidInputError(
                    "certify: a composite point needs its blocks y0, y1, ... (the run's outputs); they "
                    "cannot be recovered from x for this coupling"
                )
        ys.append(np.asarray(yj, dtype=np.float64).reshape(-1))
    d = x.shape[0]
    s = max(1.0, float(np.abs(x).max()))
    obj = _objective_at(ev, x, _difference_points(x, _bounds(oracle.feasible_set, d)))
    lam_raw = out.get("lam")
    if lam_raw is None:
        lam, *_ = np.linalg.lstsq(A.T, obj.grad, rcond=None)
    else:
        lam = np.asarray(lam_raw, dtype=np.float64).reshape(-1)
    rx_vec = obj.grad - A.T @ lam
    ref_x = max(_reference(obj, s), float(np.linalg.norm(A.T @ lam)))
    ry = math.sqrt(sum(float(psi.subdifferential_distance(v, b.T @ lam)) ** 2
                       for psi, v, b in zip(oracle.penalties, ys, Bs)))  # fmt: skip
    ref_y = math.sqrt(sum(float(np.sum((b.T @ lam) ** 2)) for b in Bs))
    By = sum((b @ v for b, v in zip(Bs, ys)), np.zeros_like(c))
    rc = float(np.linalg.norm(A @ x + By - c))
    ref_c = max(float(np.linalg.norm(A @ x)), float(np.linalg.norm(By)), float(np.linalg.norm(c)))
    parts = {"x": _ratio(float(np.linalg.norm(rx_vec)), ref_x), "y": _ratio(ry, ref_y), "coupling": _ratio(rc, ref_c)}
    return _residual_verdict("ADMM", parts, tol, ref_x)
