"""The minimax test of the certificate: stationarity in x with y maximising."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from zoframe.certificate._common import Evals, _bounds, _derivatives, _difference_points, _ratio
from zoframe.errors import InvalidInputError
from zoframe.protocols import Array


def _minimax(ev: Evals, x: Array, outputs: Mapping[str, Any] | None, tol: float) -> dict[str, Any]:
    oracle = ev.oracle
    y_raw = None if outputs is None else outputs.get("y")
    y = np.array(oracle.y0 if y_raw is None else y_raw, dtype=np.float64).reshape(-1)
    if y.shape != (oracle.dim_y,):
        raise InvalidInputError(f"certify: y must have shape ({oracle.dim_y},), got {y.shape}")
    d, dy = x.shape[0], y.shape[0]
    Dx = _difference_points(x, _bounds(oracle.feasible_set, d))
    Dy = _difference_points(y, _bounds(oracle.y_set, dy))
    X = np.vstack([x[None, :], Dx.points(0, d), np.repeat(x[None, :], 2 * dy, axis=0)])
    Y = np.vstack([np.repeat(y[None, :], 1 + 2 * d, axis=0), Dy.points(0, dy)])
    V = ev.minimax(X, Y)  # (1 + 2d + 2dy, n): one call
    v0 = V[0]
    Gx, Hx, Nx = _derivatives(v0, V[1 : d + 1], V[d + 1 : 2 * d + 1], Dx.a, Dx.b)
    Gy, Hy, Ny = _derivatives(v0, V[2 * d + 1 : 2 * d + 1 + dy], V[2 * d + 1 + dy :], Dy.a, Dy.b)
    sx, sy = max(1.0, float(np.abs(x).max())), max(1.0, float(np.abs(y).max()))

    def block(G: Array, H: Array, N: Array, sc: float) -> tuple[Array, float]:
        g, h, hn = G.mean(axis=1), H.mean(axis=1), N.mean(axis=1)
        h = np.where(np.abs(h) > hn, h, 0.0)
        comp = float(np.sqrt(np.einsum("ij,ij->j", G, G)).mean()) if G.shape[1] > 1 else 0.0
        return g, max(float(np.linalg.norm(g)), sc * float(np.abs(h).max(initial=0.0)), comp)

    gx, ref_x = block(Gx, Hx, Nx, sx)
    gy, ref_y = block(Gy, Hy, Ny, sy)
    rx = _mapping(oracle.feasible_set, x, gx, sx, ref_x)
    ry = _mapping(oracle.y_set, y, -gy, sy, ref_y)
    return _residual_verdict("minimax", {"x": _ratio(rx, ref_x), "y": _ratio(ry, ref_y)}, tol, ref_x)


def _residual_verdict(what: str, parts: dict[str, float], tol: float, scale: float) -> dict[str, Any]:
    """The outcome of a residual test with several parts (no constraints, no probes): the largest part
    against ``tol``, each part named in the message."""
    residual = max(parts.values())
    passed = residual <= tol
    word = "certified" if passed else "not certified"
    detail = ", ".join(f"{k}: {v:.3g}" for k, v in parts.items())
    return {
        "passed": passed, "residual": residual, "scale": scale, "max_violation": None, "n_active": 0,
        "cap_hit": False, "descent": None,
        "message": f"{word}: {what} residual {residual:.3g} {'<=' if passed else '>'} tol {tol:.3g} ({detail})",
    }  # fmt: skip


def _mapping(fs: Any, z: Array, g: Array, s: float, ref: float) -> float:
    """``|z - P(z - t g)| / t`` with ``t = s / ref`` (``|g|`` without a set)."""
    if fs is None:
        return float(np.linalg.norm(g))
    t = s / max(ref, 1e-300)
    return float(np.linalg.norm(z - np.asarray(fs.project(z - t * g), dtype=np.float64))) / t


