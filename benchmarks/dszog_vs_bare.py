"""zoframe ``adszog`` against a tight bare-numpy loop of the same update.

Both run ADSZOG (ICML 2022 Algorithm 1, with the papers' fixed steps: zoframe's ``steps="paper"``;
``--steps auto`` runs zoframe's default backtracking rule instead, which evaluates more points per
step than the bare loop) with the same q, batches and m on the pairwise problems of
breast-cancer (scikit-learn's bundled set, m ~ 19k) and a9a (m ~ 46k), single-threaded BLAS.
The bare loop works on the problem's arrays directly (no oracle, no dataclasses, no validation)
and uses the same numerical kernels (Michelot projection, two-level inverse-CDF sampling), so
the ratio measures what the framework costs per iteration.

Prints one final JSON line with ``<problem>_ratio`` (zoframe ``adszog`` with its default
``p_form="auto"`` time / bare time per iteration), ``<problem>_dense_ratio`` (zoframe with
``p_form="dense"``, the same dense vector work as the bare loop: the framework's own overhead),
the iterations per second of each, and m.

    python benchmarks/dszog_vs_bare.py [--iters 2000] [--repeats 5] [--steps paper|auto]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

import zoframe
from zoframe_constrained.problems import PairwiseProblem, pairwise

PARAMS = {"eta_w": 0.01, "eta_p": 0.01, "beta": 1.0, "lam": 1e-6, "q": 10, "mu": 1e-3,
          "M1": 128, "M2": 128, "M3": 128, "a": 0.9, "b": 0.9, "c": 1e-8}  # fmt: skip
#: zoframe's steps: "paper" (the fixed steps above, the update the bare loop runs); "auto" is zoframe's
#: default backtracking rule, which evaluates more points per step than the bare loop (--steps auto)
STEPS = "paper"


def bare_adszog(prob: PairwiseProblem, iters: int, seed: int) -> tuple[float, np.ndarray]:
    """ADSZOG written as one tight numpy loop; returns (seconds per iteration, final w)."""
    P = PARAMS
    rng = np.random.default_rng(seed)
    Xtr, ytr = np.asarray(prob.data.X_train), np.asarray(prob.data.y_train)
    Xpos, Xneg = np.asarray(prob.X_pos), np.asarray(prob.X_neg)
    n, d, m, n_neg = Xtr.shape[0], Xtr.shape[1], prob.m, Xneg.shape[0]
    q, mu, beta, lam = int(P["q"]), P["mu"], P["beta"], P["lam"]
    a, b, c, eta_w, eta_p = P["a"], P["b"], P["c"], P["eta_w"], P["eta_p"]
    B1, B2, B3 = int(P["M1"]), int(P["M2"]), int(P["M3"])
    c2 = prob.loss_c**2
    w1 = np.full(B1, (B1 + B2) / B1)
    w2 = np.full(B2, beta * (B1 + B2) / B2)
    starts = np.arange(0, m, 32)
    offs = np.arange(32)

    def proj(v: np.ndarray) -> np.ndarray:
        tau = max(v.max() - 1.0, (v.sum() - 1.0) / v.shape[0])
        cand = v[v > tau]
        while True:
            tau = (cand.sum() - 1.0) / cand.shape[0]
            keep = cand > tau
            if keep.all():
                break
            cand = cand[keep]
        out = v - tau
        out[out < 2.3e-308] = 0.0
        return out

    def sample(p: np.ndarray, u: np.ndarray) -> np.ndarray:
        sums = np.add.reduceat(p, starts)
        cum = np.cumsum(sums)
        t = u * cum[-1]
        blk = np.minimum(np.searchsorted(cum, t, side="right"), starts.shape[0] - 1)
        rest = t - (cum[blk] - sums[blk])
        idx = starts[blk][:, None] + offs[None, :]
        W = np.where(idx < m, p[np.minimum(idx, m - 1)], 0.0)
        k = (np.cumsum(W, axis=1) <= rest[:, None]).sum(axis=1)
        return np.minimum(starts[blk] + k, m - 1)

    def grad_L(w: np.ndarray, M1: np.ndarray, M2: np.ndarray) -> np.ndarray:
        U = rng.standard_normal((q, d))
        pts = np.vstack([w, w + mu * U])
        r = ytr[M1][None, :] - pts @ Xtr[M1].T
        loss = c2 * (1.0 - np.exp(-(r * r) / c2))
        i, j = np.divmod(M2, n_neg)
        f = pts @ (Xneg[j] - Xpos[i]).T
        vals = np.hstack([loss * w1, np.maximum(f, 0.0) ** 2 * w2]).mean(axis=1)
        return ((vals[1:] - vals[0]) / mu) @ U / q

    def phi3(w: np.ndarray, M3: np.ndarray) -> np.ndarray:
        i, j = np.divmod(M3, n_neg)
        return np.maximum((Xneg[j] - Xpos[i]) @ w, 0.0) ** 2

    w = np.zeros(d)
    i_all, j_all = np.divmod(np.arange(m), n_neg)
    phi_all = np.maximum((Xneg[j_all] - Xpos[i_all]) @ w, 0.0) ** 2
    p = proj(beta * phi_all / lam)
    M1, M3 = rng.choice(n, B1, replace=False), rng.choice(m, B3, replace=False)
    z_w = grad_L(w, M1, sample(p, rng.random(B2)))
    z_p = -lam * p
    z_p[M3] += beta * m / B3 * phi3(w, M3)
    thr = min(2.3e-308 / min(1 - a, 1 - b) ** 16, 1e-200)
    t0 = time.perf_counter()
    for t in range(1, iters + 1):
        w = w - eta_w * z_w / (math.sqrt(np.linalg.norm(z_w)) + c)
        p_hat = proj(p + (eta_p / (math.sqrt(np.linalg.norm(z_p)) + c)) * z_p)
        p = (1.0 - a) * p + a * p_hat
        M1, M3 = rng.choice(n, B1, replace=False), rng.choice(m, B3, replace=False)
        G = grad_L(w, M1, sample(p, rng.random(B2)))
        z_w = (1.0 - b) * z_w + b * G
        h = -lam * p
        h[M3] += beta * m / B3 * phi3(w, M3)
        z_p = (1.0 - b) * z_p + b * h
        if t % 16 == 0:
            p[p < thr] = 0.0
            z_p[np.abs(z_p) < thr] = 0.0
    return (time.perf_counter() - t0) / iters, w


def zoframe_adszog(
    prob: PairwiseProblem, iters: int, seed: int, p_form: str = "auto", steps: str = STEPS
) -> tuple[float, np.ndarray]:
    res = zoframe.minimize(
        prob, "adszog", rng=seed, max_iter=iters, record_every=iters, p_form=p_form, steps=steps, **PARAMS
    )
    sec = res.trace["seconds"]
    return float(sec[-1] - sec[0]) / iters, res.x


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", choices=("paper", "auto"), default=STEPS, help="zoframe's step rule (default: paper)")
    args = ap.parse_args(argv)
    problems = {"breast_cancer": pairwise("breast-cancer"), "a9a": pairwise("a9a")}
    out: dict[str, Any] = {"iters": args.iters, "repeats": args.repeats, "steps": args.steps}
    for key, prob in problems.items():
        zs, zds, bs = [], [], []
        with threadpool_limits(limits=1, user_api="blas"):
            for rep in range(args.repeats):  # interleaved, to share the machine's load fairly
                bs.append(bare_adszog(prob, args.iters, rep)[0])
                zs.append(zoframe_adszog(prob, args.iters, rep, steps=args.steps)[0])
                zds.append(zoframe_adszog(prob, args.iters, rep, p_form="dense", steps=args.steps)[0])
        z, zd, b = float(np.median(zs)), float(np.median(zds)), float(np.median(bs))
        # ratios of the runs made back to back (paired), robust to the machine's load drifting
        ratio = float(np.median(np.array(zs) / np.array(bs)))
        dense_ratio = float(np.median(np.array(zds) / np.array(bs)))
        out[f"{key}_m"] = prob.m
        out[f"{key}_zoframe_it_per_s"] = round(1.0 / z, 1)
        out[f"{key}_bare_it_per_s"] = round(1.0 / b, 1)
        out[f"{key}_zoframe_us_per_it"] = round(z * 1e6, 1)
        out[f"{key}_bare_us_per_it"] = round(b * 1e6, 1)
        out[f"{key}_dense_us_per_it"] = round(zd * 1e6, 1)
        out[f"{key}_ratio"] = round(ratio, 3)
        out[f"{key}_dense_ratio"] = round(dense_ratio, 3)
        print(
            f"{key}: m={prob.m} zoframe {z * 1e6:.0f} us/it (p_form=dense: {zd * 1e6:.0f}), bare {b * 1e6:.0f} us/it, "
            f"ratio {ratio:.3f} (dense {dense_ratio:.3f})",
            flush=True,
        )
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
