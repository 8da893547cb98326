"""``zoframe reproduce minimax``: Figure 1 of Wang, Balasubramanian, Ma & Razaviyayn (section 5).

DRO on four LIBSVM datasets (a9a 200 samples, mushrooms 100, w8a 100, colon-cancer all 62 rows
since only 62 exist), 1:3 positive:negative subsample drawn once per dataset with ``--data-seed``.
Solvers and settings of section 5:

* ZO-SGDA ``eta1 = eta2 = 0.01``; ZO-SGDMSA ``eta1 = 0.001``, ``eta2 = 0.01``, ``T = 10``
  (``ceil(kappa log(1/eps))`` with ``kappa^3 = 10``, ``eps = 0.01``; the paper does not print T);
  ``mu`` from eqs. (12) / (14) as instantiated in section 5; ``q = 2(d + 6)`` directions shared by
  a batch of ``1/eps^2`` samples drawn with replacement (the paper pairs ``d/eps^2`` samples with
  one direction each; see :mod:`zoframe_minimax.solvers`).
* SGDA and SGDMSA (first order) with the same steps and ``|M| = 1/eps^2`` samples.

Each run records ``f(x_s, y_s)``, ``g(x_s)`` and ``||grad g(x_s)||`` (exact, closed-form ``y*``)
against iterations and oracle calls; the plots show ``g(x_s) = max_y f(x_s, y)`` as the objective (the
function the outer minimisation decreases; ``f(x_s, y_s)`` also depends on how close ``y_s`` is to
``y*(x_s)`` and is in the JSON/CSV); the per-run JSON is written as soon as the run finishes, so an
interrupted reproduction resumes where it stopped. The curves are averaged over seeds and written to
``curves.json`` / ``curves.csv``, the final values to ``summary.json``, the plots to
``figure1.png`` and ``figure1_<dataset>.png``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
import functools
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from zoframe.driver import minimize
from zoframe.errors import InvalidInputError
from zoframe_minimax.problems import DRO, PAPER_SIZES, dro
from zoframe_minimax.solvers import SGDA, SGDMSA, ZOSGDA, ZOSGDMSA

__all__ = ["SOLVERS", "add_arguments", "aggregate", "run", "solver_for"]

DATASETS: tuple[str, ...] = ("a9a", "mushrooms", "w8a", "colon-cancer")
SOLVERS: tuple[str, ...] = ("zo-sgda", "zo-sgdmsa", "sgda", "sgdmsa")
MEASURES: tuple[str, ...] = ("fun", "g", "grad_g_norm", "y_mapping_norm")
LABELS = {"zo-sgda": "ZO-SGDA", "zo-sgdmsa": "ZO-SGDMSA", "sgda": "SGDA (first order)", "sgdmsa": "SGDMSA (first order)"}
STYLES = {"zo-sgda": ("tab:blue", "-"), "zo-sgdmsa": ("tab:red", "-"), "sgda": ("tab:blue", "--"), "sgdmsa": ("tab:red", "--")}


def solver_for(name: str, eps: float, batch: int, T: int) -> Any:
    """The section 5 configuration of one of the four solvers."""
    if name == "zo-sgda":
        return ZOSGDA(steps="paper", eta1=0.01, eta2=0.01, eps=eps, batch1=batch, batch2=batch, check_concavity=False)
    if name == "zo-sgdmsa":
        return ZOSGDMSA(steps="paper", eta1=0.001, eta2=0.01, T=T, eps=eps, batch1=batch, batch2=batch,
                        check_concavity=False)
    if name == "sgda":
        return SGDA(steps="paper", eta1=0.01, eta2=0.01, batch1=batch, batch2=batch)
    if name == "sgdmsa":
        return SGDMSA(steps="paper", eta1=0.001, eta2=0.01, T=T, batch1=batch, batch2=batch)
    raise InvalidInputError(f"unknown solver {name!r} for the minimax reproduction; choose from {SOLVERS}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", type=int, default=20, help="runs per solver and dataset (paper: 500)")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), metavar="NAME",
                        help=f"LIBSVM datasets (default: {' '.join(DATASETS)})")
    parser.add_argument("--iters", type=int, default=300, help="outer iterations per run (default 300)")
    parser.add_argument("--eps", type=float, default=0.01, help="accuracy epsilon of section 5 (0.01)")
    parser.add_argument("--batch", type=int, default=None, help="samples per estimate (default 1/eps^2)")
    parser.add_argument("--T", type=int, default=10, help="ascent steps of the MSA methods (10)")
    parser.add_argument("--solvers", nargs="+", default=list(SOLVERS), choices=SOLVERS)
    parser.add_argument("--data-seed", type=int, default=0, help="seed of the 1:3 subsample (0)")
    parser.add_argument("--jobs", type=int, default=1, help="parallel worker processes (1)")
    parser.add_argument("--record-every", type=int, default=None, help="trace spacing (default iters/100)")
    parser.add_argument("--quick", action="store_true", help="a tiny configuration: 2 seeds, 10 iterations")
    parser.add_argument(
        "--out", default=None,
        help="output directory (default: zoframe-out/minimax-figure1, under $ZOFRAME_OUT when it is set)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")


def _config(args: argparse.Namespace) -> dict[str, Any]:
    seeds, iters = (2, 10) if args.quick else (args.seeds, args.iters)
    for name, v in (("--seeds", seeds), ("--iters", iters), ("--T", args.T), ("--jobs", args.jobs)):
        if not isinstance(v, int) or v < 1:
            raise InvalidInputError(f"{name} must be a positive integer, got {v!r}")
    if not 0 < args.eps < 1:
        raise InvalidInputError(f"--eps must lie in (0, 1), got {args.eps}")
    batch = math.ceil(1.0 / args.eps**2) if args.batch is None else int(args.batch)
    if batch < 1:
        raise InvalidInputError(f"--batch must be positive, got {batch}")
    every = args.record_every if args.record_every is not None else max(1, iters // 100)
    if every < 1:
        raise InvalidInputError(f"--record-every must be positive, got {every}")
    return {
        "seeds": seeds, "iters": iters, "eps": float(args.eps), "batch": batch, "T": int(args.T),
        "datasets": list(args.datasets), "solvers": list(args.solvers), "data_seed": int(args.data_seed),
        "record_every": every,
    }


@functools.lru_cache(maxsize=8)
def _problem(dataset: str, data_seed: int) -> DRO:
    return dro(dataset, seed=data_seed)


def _run_key(cfg: Mapping[str, Any], dataset: str, solver: str) -> str:
    keep = {k: cfg[k] for k in ("iters", "eps", "batch", "T", "data_seed", "record_every")}
    keep.update(dataset=dataset, solver=solver)
    return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:16]


def _one_run(task: tuple[str, str, int, dict[str, Any], str]) -> str:
    """Run one (dataset, solver, seed) and write its JSON atomically; returns the file written."""
    dataset, solver, seed, cfg, path = task
    problem = _problem(dataset, cfg["data_seed"])
    res = minimize(problem, solver_for(solver, cfg["eps"], cfg["batch"], cfg["T"]), rng=seed,
                   max_iter=cfg["iters"], record_every=cfg["record_every"])
    trace = {k: [float(v) for v in res.trace[k]] for k in res.trace.names}
    doc = {"dataset": dataset, "solver": solver, "seed": seed, "key": _run_key(cfg, dataset, solver),
           "n": problem.n, "d": problem.dim, "nfev": res.nfev, "nfev_by_kind": res.nfev_by_kind,
           "seconds": res.elapsed, "trace": trace}
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(doc, fh)
    os.replace(tmp, path)
    return path


def _run_path(out: Path, dataset: str, solver: str, seed: int) -> Path:
    return out / "runs" / f"{dataset}__{solver}__seed{seed}.json"


def _done(path: Path, key: str) -> bool:
    try:
        with open(path) as fh:
            return bool(json.load(fh).get("key") == key)
    except (OSError, ValueError):
        return False


def aggregate(out: Path, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Mean (and std) over seeds of every recorded measure, per dataset and solver."""
    curves: dict[str, Any] = {}
    for dataset in cfg["datasets"]:
        curves[dataset] = {}
        for solver in cfg["solvers"]:
            runs = []
            for seed in range(cfg["seeds"]):
                with open(_run_path(out, dataset, solver, seed)) as fh:
                    runs.append(json.load(fh)["trace"])
            length = min(len(r["iteration"]) for r in runs)
            entry: dict[str, Any] = {"iteration": runs[0]["iteration"][:length]}
            entry["calls"] = np.mean([r["calls"][:length] for r in runs], axis=0).tolist()
            for m in MEASURES:
                arr = np.array([r[m][:length] for r in runs])
                entry[f"{m}_mean"] = arr.mean(axis=0).tolist()
                entry[f"{m}_std"] = arr.std(axis=0).tolist()
            curves[dataset][solver] = entry
    return curves


def _summary(curves: Mapping[str, Any], eps: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dataset, per in curves.items():
        out[dataset] = {}
        for solver, c in per.items():
            gg = np.asarray(c["grad_g_norm_mean"])
            hit = np.flatnonzero(gg <= eps)
            out[dataset][solver] = {
                "iterations": c["iteration"][-1],
                "calls": c["calls"][-1],
                "fun": c["fun_mean"][-1],
                "g": c["g_mean"][-1],
                "grad_g_norm": c["grad_g_norm_mean"][-1],
                "grad_g_norm_start": c["grad_g_norm_mean"][0],
                "first_iteration_grad_g_le_eps": None if hit.size == 0 else c["iteration"][int(hit[0])],
            }
    return out


def _write_csv(path: Path, curves: Mapping[str, Any]) -> None:
    cols = ["iteration", "calls"] + [f"{m}_{s}" for m in MEASURES for s in ("mean", "std")]
    lines = ["dataset,solver," + ",".join(cols)]
    for dataset, per in curves.items():
        for solver, c in per.items():
            for i in range(len(c["iteration"])):
                lines.append(f"{dataset},{solver}," + ",".join(repr(float(c[k][i])) for k in cols))
    path.write_text("\n".join(lines) + "\n")


def plot(out: Path, curves: Mapping[str, Any], eps: float) -> list[Path]:
    """Figure 1: rows = datasets; columns = objective and ||grad g|| vs iterations and vs oracle calls."""
    from zoframe._optional import require

    matplotlib = require("matplotlib", feature="the minimax reproduction's figures")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    datasets = list(curves)

    def panel_row(axes: Sequence[Any], dataset: str) -> None:
        for solver, c in curves[dataset].items():
            color, ls = STYLES.get(solver, ("k", "-"))
            lab = LABELS.get(solver, solver)
            it, calls = np.asarray(c["iteration"]), np.asarray(c["calls"])
            paid = calls > 0  # log axis: the start (no call yet) is left out
            for ax, xs, key, keep in ((axes[0], it, "g", slice(None)), (axes[1], it, "grad_g_norm", slice(None)),
                                      (axes[2], calls, "g", paid), (axes[3], calls, "grad_g_norm", paid)):
                ax.plot(xs[keep], np.asarray(c[f"{key}_mean"])[keep], color=color, ls=ls, label=lab)
        titles = ("objective g(x) = max_y f(x, y)", "||grad g(x)||") * 2
        for j, ax in enumerate(axes):
            ax.set_title(f"{dataset}: {titles[j]}", fontsize=9)
            ax.set_xlabel("iteration" if j < 2 else "oracle calls (ZO: values, FO: gradients)", fontsize=8)
            if j % 2 == 1:
                ax.set_yscale("log")
                ax.axhline(eps, color="0.6", lw=0.8, ls=":")
            if j >= 2:
                ax.set_xscale("log")
            ax.tick_params(labelsize=7)
        axes[0].legend(fontsize=7)

    fig, axs = plt.subplots(len(datasets), 4, figsize=(16, 3.2 * len(datasets)), squeeze=False)
    for r, dataset in enumerate(datasets):
        panel_row(axs[r], dataset)
    fig.tight_layout()
    path = out / "figure1.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    for dataset in datasets:
        fig, axs = plt.subplots(1, 4, figsize=(16, 3.4), squeeze=False)
        panel_row(axs[0], dataset)
        fig.tight_layout()
        path = out / f"figure1_{dataset}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def _out_dir(args: argparse.Namespace) -> Path:
    """``--out`` as given, else ``minimax-figure1`` under zoframe's output directory."""
    from zoframe._paths import output_path

    if args.out is None:
        return output_path("minimax-figure1/summary.json").parent
    return Path(args.out)


def run(args: argparse.Namespace) -> int:
    cfg = _config(args)
    out = _out_dir(args)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    for dataset in cfg["datasets"]:
        _problem(dataset, cfg["data_seed"])  # fail early on a missing dataset
    tasks = []
    for dataset in cfg["datasets"]:
        for solver in cfg["solvers"]:
            key = _run_key(cfg, dataset, solver)
            for seed in range(cfg["seeds"]):
                path = _run_path(out, dataset, solver, seed)
                if not _done(path, key):
                    tasks.append((dataset, solver, seed, cfg, str(path)))
    total = len(cfg["datasets"]) * len(cfg["solvers"]) * cfg["seeds"]
    from tqdm.auto import tqdm

    from zoframe._output import logger, progress_wanted

    logger("reproduce").info("minimax Figure 1: %d runs, %d already done in %s/runs", total, total - len(tasks), out)
    bar = tqdm(total=len(tasks), unit="run", desc="minimax", disable=not progress_wanted(not args.no_progress) or not tasks)
    if cfg_jobs(args) > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=cfg_jobs(args)) as pool:
            for _ in pool.map(_one_run, tasks):
                bar.update(1)
    else:
        for task in tasks:
            _one_run(task)
            bar.update(1)
    bar.close()
    curves = aggregate(out, cfg)
    summary = _summary(curves, cfg["eps"])
    (out / "curves.json").write_text(json.dumps({"config": cfg, "curves": curves}))
    _write_csv(out / "curves.csv", curves)
    (out / "summary.json").write_text(json.dumps({"config": cfg, "final": summary}, indent=1))
    if not args.no_plots:
        plot(out, curves, cfg["eps"])
    for dataset, per in summary.items():
        for solver, s in per.items():
            print(f"{dataset:<13} {solver:<10} it={s['iterations']:<6.0f} calls={s['calls']:<12.4g} "
                  f"f={s['fun']:.5f} g={s['g']:.5f} ||grad g||={s['grad_g_norm']:.4g} "
                  f"(start {s['grad_g_norm_start']:.4g})")
    print(f"wrote {out}/curves.json, curves.csv, summary.json" + ("" if args.no_plots else ", figure1*.png"))
    return 0


def cfg_jobs(args: argparse.Namespace) -> int:
    return max(1, int(args.jobs))


__all__ += ["DATASETS", "PAPER_SIZES", "plot"]
