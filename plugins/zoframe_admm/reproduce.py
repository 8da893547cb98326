"""``zoframe reproduce admm``: Figures 1-4 of Huang, Gao, Chen & Huang (IJCAI 2019).

* Figure 1 (``fig1_objective_gap.png``): objective gap against CPU time of the six solvers on the
  graph-guided fused-lasso problem of each dataset (``fused_lasso_<dataset>.csv``);
* Figure 4 (``fig4_test_loss.png``): test loss against CPU time, same runs;
* Figure 2 (``fig2_attack_loss.png``): attack loss against iterations of the structured attack on
  the 8x8-digits classifier (``attack.csv``);
* Figure 3 (``fig3_group_sparsity.png``): heat maps of the learned perturbations (pixel magnitude and
  the l2 norm of each overlapping 3x3 group) of the ADMM solvers (``attack_perturbations.csv``).

The objective gap is ``F(x_t) - F_ref`` with ``F_ref`` the smallest objective any solver reached
on that dataset (the problem is nonconvex: no certified optimum). ``summary.json`` holds, per dataset,
the CPU seconds each solver needed to reach the gap ``--gap`` (``null``: not reached) and the winner.
CPU time is the solver's own time (the driver excludes monitoring), one BLAS thread.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

SOLVERS = ("zo-svrg-admm", "zo-saga-admm", "zo-admm", "zo-sgd-admm", "zo-prox-svrg", "zo-prox-saga")
ADMM = SOLVERS[:4]


def fused_params(L: float, sigma_a: float) -> dict[str, dict[str, Any]]:
    """Step sizes from the smoothness ``L`` of the loss (the paper gives only ``b`` and ``mu``).

    Every solver takes the same effective x-step ``0.5 / L``: the proximal baselines ``eta = 0.5 / L``;
    the ADMM solvers ``rho = L / sigma_max(A^T A)`` and ``eta = 1.01 / L``, so that
    ``r = rho eta sigma_max(A^T A) + 1.01 = 2.02`` and ``eta / r = 0.5 / L``.
    """
    admm = {"rho": L / sigma_a, "eta": 1.01 / L, "b": 20, "rank_check": "ignore"}
    prox = {"eta": 0.5 / L, "b": 20}
    return {**{s: dict(admm) for s in ADMM}, "zo-prox-svrg": dict(prox), "zo-prox-saga": dict(prox)}


ATTACK_PARAMS: dict[str, dict[str, Any]] = {
    **{s: {"rho": 1.0, "eta": 0.02, "b": 4, "rank_check": "ignore"} for s in ADMM},
    "zo-prox-svrg": {"eta": 0.02, "b": 4},
    "zo-prox-saga": {"eta": 0.02, "b": 4},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--datasets", nargs="+", default=["20news", "a9a", "w8a"],
                        help="fused-lasso datasets among 20news, a9a, w8a (covtype is unavailable)")
    parser.add_argument("--quick", action="store_true", help="small subsamples and short runs (about 1.5 minutes on 2 cores)")
    parser.add_argument("--out", default="admm-reproduction", help="output directory for PNG, CSV and summary.json")
    parser.add_argument("--seconds", type=float, default=None, help="CPU seconds per solver and dataset (30; quick: 2)")
    parser.add_argument("--n-samples", type=int, default=None, help="subsample each dataset (all; quick: 2000)")
    parser.add_argument("--attack-iters", type=int, default=None, help="iterations of the attack runs (1000; quick: 100)")
    parser.add_argument("--gap", type=float, default=1e-4, help="objective gap for the time-to-gap summary")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def run_fused(dataset: str, *, seconds: float, n_samples: int | None, seed: int, progress: bool) -> dict[str, dict[str, np.ndarray]]:
    """Six solvers on one dataset under the same CPU-time budget: their traces."""
    import zoframe
    from zoframe_admm.problems import FusedLasso

    prob = FusedLasso(dataset, n_samples=n_samples, seed=seed)
    params = fused_params(prob.smoothness(), float(np.linalg.eigvalsh(prob.A.T @ prob.A)[-1]))
    out: dict[str, dict[str, np.ndarray]] = {}
    for name in SOLVERS:
        every = 1 if name == "zo-admm" else 20
        res = zoframe.minimize(prob, name, rng=seed, max_time=seconds, record_every=every, progress=progress,
                               **params[name])
        out[name] = {k: np.asarray(res.trace[k]) for k in res.trace.names}
    return out


def time_to_gap(traces: dict[str, dict[str, np.ndarray]], gap: float) -> tuple[float, dict[str, float | None]]:
    """``F_ref`` and, per solver, the first recorded CPU time with ``F - F_ref <= gap``."""
    f_ref = min(float(np.nanmin(t["fun"])) for t in traces.values())
    times: dict[str, float | None] = {}
    for name, t in traces.items():
        hit = np.flatnonzero(t["fun"] - f_ref <= gap)
        times[name] = float(t["seconds"][hit[0]]) if hit.size else None
    return f_ref, times


def run_attack(iters: int, seed: int, progress: bool) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, np.ndarray]]:
    import zoframe
    from zoframe_admm.problems import StructuredAttack

    prob = StructuredAttack(tau1=0.1, tau2=0.1, seed=seed)
    traces, perts = {}, {}
    for name in SOLVERS:
        res = zoframe.minimize(prob, name, rng=seed, max_iter=iters, record_every=max(1, iters // 100),
                               progress=progress, **ATTACK_PARAMS[name])
        traces[name] = {k: np.asarray(res.trace[k]) for k in res.trace.names}
        perts[name] = np.asarray(res.x)
    return traces, perts


def _plots(out: Path, fused: dict[str, dict[str, dict[str, np.ndarray]]], refs: dict[str, float],
           attack: dict[str, dict[str, np.ndarray]], perts: dict[str, np.ndarray]) -> None:
    from zoframe._optional import require

    matplotlib = require("matplotlib", feature="the ADMM reproduction's figures")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoframe_admm.penalties import overlapping_groups_matrix

    for fname, key, ylabel in (("fig1_objective_gap.png", "gap", "objective gap"),
                               ("fig4_test_loss.png", "test_loss", "test loss")):
        fig, axes = plt.subplots(1, max(1, len(fused)), figsize=(4.2 * max(1, len(fused)), 3.4), squeeze=False)
        for ax, (ds, traces) in zip(axes[0], fused.items()):
            for name, t in traces.items():
                y = t["fun"] - refs[ds] if key == "gap" else t["test_loss"]
                if key == "gap":
                    y = np.maximum(y, 1e-12)
                ax.plot(t["seconds"], y, label=name)
            if key == "gap":
                ax.set_yscale("log")
            ax.set_title(ds)
            ax.set_xlabel("CPU time (s)")
            ax.set_ylabel(ylabel)
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for name, t in attack.items():
        ax.plot(t["iteration"], t["attack_loss"], label=name)
    ax.set_xscale("symlog", linthresh=10.0)  # the first tens of iterations carry most of the decrease
    ax.set_xlabel("iteration")
    ax.set_ylabel("attack loss")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fig2_attack_loss.png", dpi=110)
    plt.close(fig)
    G = overlapping_groups_matrix(8, 8, 3, 1)
    names = [n for n in ("zo-svrg-admm", "zo-saga-admm") if n in perts]
    fig, axes = plt.subplots(2, len(names), figsize=(3.4 * len(names), 6.4), squeeze=False)
    for col, name in enumerate(names):
        x = perts[name]
        axes[0][col].imshow(np.abs(x).reshape(8, 8), cmap="hot")
        axes[0][col].set_title(f"{name}: |x|")
        axes[1][col].imshow(np.linalg.norm((G @ x).reshape(-1, 9), axis=1).reshape(6, 6), cmap="hot")
        axes[1][col].set_title("group norms (3x3, stride 1)")
    fig.tight_layout()
    fig.savefig(out / "fig3_group_sparsity.png", dpi=110)
    plt.close(fig)


def reproduce(args: argparse.Namespace) -> dict[str, Any]:
    """Run everything, write the files, return the summary."""
    from tqdm.auto import tqdm

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seconds = args.seconds if args.seconds is not None else (2.0 if args.quick else 30.0)
    n_samples = args.n_samples if args.n_samples is not None else (2000 if args.quick else None)
    iters = args.attack_iters if args.attack_iters is not None else (100 if args.quick else 1000)
    progress = not args.no_progress
    fused: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    refs: dict[str, float] = {}
    summary: dict[str, Any] = {"gap": args.gap, "seconds_per_run": seconds, "n_samples": n_samples, "datasets": {}}
    for ds in tqdm(args.datasets, desc="fused lasso", disable=not progress):
        traces = run_fused(ds, seconds=seconds, n_samples=n_samples, seed=args.seed, progress=progress)
        f_ref, times = time_to_gap(traces, args.gap)
        fused[ds], refs[ds] = traces, f_ref
        reached = {k: v for k, v in times.items() if v is not None}
        summary["datasets"][ds] = {
            "f_ref": f_ref,
            "seconds_to_gap": times,
            "winner": min(reached, key=lambda k: reached[k]) if reached else None,
            "final_test_loss": {k: float(t["test_loss"][-1]) for k, t in traces.items()},
        }
        rows = []
        for name, t in traces.items():
            for i in range(len(t["iteration"])):
                rows.append({"solver": name, **{k: float(t[k][i]) for k in ("iteration", "calls", "seconds", "fun")},
                             "gap": float(t["fun"][i] - f_ref), "test_loss": float(t["test_loss"][i]),
                             "stationarity": float(t.get("stationarity", np.full(len(t["iteration"]), math.nan))[i])})
        _write_csv(out / f"fused_lasso_{ds}.csv", rows)
    attack, perts = run_attack(iters, args.seed, progress)
    _write_csv(out / "attack.csv", [
        {"solver": name, "iteration": float(t["iteration"][i]), "calls": float(t["calls"][i]),
         "attack_loss": float(t["attack_loss"][i]), "fun": float(t["fun"][i]), "fooled": float(t["fooled"][i])}
        for name, t in attack.items() for i in range(len(t["iteration"]))
    ])
    _write_csv(out / "attack_perturbations.csv",
               [{"solver": name, **{f"p{i}": float(v) for i, v in enumerate(x)}} for name, x in perts.items()])
    summary["attack"] = {name: {"final_attack_loss": float(t["attack_loss"][-1]), "fooled": float(t["fooled"][-1])}
                         for name, t in attack.items()}
    _plots(out, fused, refs, attack, perts)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def run(args: argparse.Namespace) -> int:
    summary = reproduce(args)
    for ds, info in summary["datasets"].items():
        cells = ", ".join(f"{k}: {'-' if v is None else f'{v:.2f}s'}" for k, v in info["seconds_to_gap"].items())
        print(f"{ds}: time to gap {summary['gap']:g}: {cells}; winner {info['winner']}")
    print(f"wrote figures 1-4, CSV and summary.json to {Path(args.out).resolve()}")
    return 0
