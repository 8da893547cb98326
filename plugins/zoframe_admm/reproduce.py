"""``zoframe reproduce admm``: Figures 1-4 of Huang, Gao, Chen & Huang (IJCAI 2019).

* Figure 1 (``fig1_objective_gap.png``): objective gap against CPU time of the six solvers on the
  graph-guided fused-lasso problem of each dataset (``fused_lasso_<dataset>.csv``);
* Figure 4 (``fig4_test_loss.png``): test loss against CPU time, same runs;
* Figure 2 (``fig2_attack_loss.png``): attack loss against iterations of the structured attack on
  the 8x8-digits classifier (``attack.csv``);
* Figure 3 (``fig3_group_sparsity.png``): heat maps of the learned perturbations (pixel magnitude and
  the l2 norm of each overlapping 3x3 group) of the ADMM solvers (``attack_perturbations.csv``).

The objective gap is ``F(x_t) - F_ref``. ``F_ref`` does not depend on the compared runs: the
correntropy loss is nonconvex (no cvxpy optimum), so it is the lowest objective of a separate,
white-box reference solver, :func:`reference_objective` (linearized ADMM with exact full gradients,
:data:`REFERENCE_ITERS` iterations, cached), run on the same problem. A compared solver's time to a
gap therefore depends on its own trace only (adding or removing solvers changes no other solver's
time). A solver may end below ``F_ref`` (another local minimum): its gap is then negative.
``summary.json`` holds, per dataset, ``F_ref`` and how it was obtained, the CPU seconds each solver
needed to reach the gap ``--gap`` (``null``: not reached) and the winner. CPU time is the solver's
own time (the driver excludes monitoring), one BLAS thread.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
from dataclasses import dataclass
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from zoframe.errors import InvalidInputError

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
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=["20news", "a9a", "w8a"],
        help="fused-lasso datasets among 20news, a9a, w8a (covtype is unavailable)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small subsamples and short runs (about 1.5 minutes on 2 cores)"
    )
    parser.add_argument(
        "--out",
        default=None,
        help="output directory for PNG, CSV and summary.json (default: zoframe-out/admm-reproduction)",
    )
    parser.add_argument("--seconds", type=float, default=None, help="CPU seconds per solver and dataset (30; quick: 2)")
    parser.add_argument("--n-samples", type=int, default=None, help="subsample each dataset (all; quick: 2000)")
    parser.add_argument(
        "--attack-iters", type=int, default=None, help="iterations of the attack runs (1000; quick: 100)"
    )
    parser.add_argument(
        "--gap",
        type=float,
        default=1e-4,
        help="objective gap F - F_ref for the time-to-gap summary (F_ref: the reference solver's)",
    )
    parser.add_argument(
        "--reference-iters",
        type=int,
        default=REFERENCE_ITERS,
        help=f"iterations of the white-box reference solver that gives F_ref (default {REFERENCE_ITERS})",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def run_fused(
    dataset: str, *, seconds: float, n_samples: int | None, seed: int, progress: bool
) -> dict[str, dict[str, np.ndarray]]:
    """Six solvers on one dataset under the same CPU-time budget: their traces."""
    import zoframe
    from zoframe_admm.problems import FusedLasso

    prob = FusedLasso(dataset, n_samples=n_samples, seed=seed)
    params = fused_params(prob.smoothness(), float(np.linalg.eigvalsh(prob.A.T @ prob.A)[-1]))
    out: dict[str, dict[str, np.ndarray]] = {}
    for name in SOLVERS:
        every = 1 if name == "zo-admm" else 20
        res = zoframe.minimize(
            prob, name, rng=seed, max_time=seconds, record_every=every, progress=progress, **params[name]
        )
        out[name] = {k: np.asarray(res.trace[k]) for k in res.trace.names}
    return out


def time_to_gap(traces: dict[str, dict[str, np.ndarray]], gap: float, f_ref: float) -> dict[str, float | None]:
    """Per solver, the first recorded CPU time with ``F - f_ref <= gap`` (``None``: never).

    ``f_ref`` must come from outside the compared runs (:func:`reference_objective`): each solver's
    time then depends on its own trace only.
    """
    if not math.isfinite(f_ref):
        raise InvalidInputError(f"f_ref must be a finite reference objective, got {f_ref}")
    times: dict[str, float | None] = {}
    for name, t in traces.items():
        hit = np.flatnonzero(t["fun"] - f_ref <= gap)
        times[name] = float(t["seconds"][hit[0]]) if hit.size else None
    return times


def winner(times: dict[str, float | None]) -> str | None:
    """The solver with the shortest time to the gap (``None`` if no solver reached it)."""
    reached = {k: v for k, v in times.items() if v is not None}
    return min(reached, key=lambda k: reached[k]) if reached else None


#: iterations of the reference solver (it stops earlier once its step and residual are below 1e-12)
REFERENCE_ITERS = 20000
_REFERENCE_VERSION = 2  # bump when the reference algorithm changes: old cache entries are ignored


@dataclass(frozen=True)
class Reference:
    """The reference objective of a composite problem and how it was obtained."""

    f_ref: float
    method: str
    iterations: int
    step_norm: float  # ||x_t - x_{t-1}|| at the end
    residual: float  # ||A x + B y - c|| at the end
    last_decrease: float  # F(x_{t-1000}) - F(x_t) at the end (0 when it stopped before 1000 iterations)
    seconds: float
    cached: bool

    def describe(self) -> str:
        how = "from cache" if self.cached else f"{self.seconds:.1f} s"
        return (
            f"F_ref = {self.f_ref:.10g}: {self.method}, {self.iterations} iterations, final step "
            f"{self.step_norm:.1e}, residual {self.residual:.1e}, objective decrease over the last 1000 "
            f"iterations {self.last_decrease:.1e} ({how})"
        )


def _composite_objective(prob: Any, x: np.ndarray) -> float:
    """``F(x) = f(x) + sum_j psi_j(y_j(x))`` with ``y_j(x)`` the rows of ``c - A x`` that ``B_j = -I`` selects."""
    f = float(prob.components(x[None, :], np.arange(prob.n)).mean())
    r = prob.A @ x - prob.c
    return f + float(sum(p.value(-(Bj.T @ r)) for p, Bj in zip(prob.penalties, prob.B)))


def reference_objective(
    prob: Any,
    *,
    iters: int = REFERENCE_ITERS,
    decrease_tol: float = 1e-12,
    cache: bool = True,
    cache_key: str | None = None,
) -> Reference:
    """A reference objective for a composite problem, independent of any compared run.

    Linearized ADMM with the exact full gradient (white-box ``prob.full_gradient``), from ``x0``:
    ``y_j = prox_{psi_j / rho}(E_j^T (A x - c + lam / rho))``;
    ``(rho A^T A + I / eta) x+ = x / eta - grad f(x) - A^T (lam - rho (c - sum B_j y_j))``;
    ``lam += rho (A x+ + sum B_j y_j - c)``, with ``eta = 1 / L`` and ``rho = L / sigma_max(A^T A)``
    (``L`` from ``prob.smoothness()``; the compared ADMM solvers' steps, see :func:`fused_params`),
    until the step and the residual are below ``1e-12``, the objective changes by at most
    ``decrease_tol`` over 1000 iterations, or ``iters`` iterations. Deterministic.
    ``last_decrease`` is how much the objective fell over the last 1000 iterations (on 20news with
    2000 samples it shrinks about 3x per 1000 iterations: after 20 000 iterations ``F_ref`` is within
    about 1e-9 of the limit of the run). ``F_ref`` is the lowest objective of the run (every iterate is a point
    of the problem, so it bounds the optimum from above). Each ``B_j`` must be ``-I`` on its own rows
    (``two_block_coupling``). Cached (with ``cache_key``) in the problem module's cache directory.
    """
    import time

    from zoframe_admm.problems import _cache_root

    path = None
    if cache and cache_key is not None:
        digest = hashlib.sha256(f"{_REFERENCE_VERSION}|{iters}|{decrease_tol}|{cache_key}".encode()).hexdigest()[:20]
        path = _cache_root() / f"reference-{digest}.json"
        if path.is_file():
            try:
                return Reference(**{**json.loads(path.read_text()), "cached": True})
            except (json.JSONDecodeError, TypeError):
                pass  # a damaged or foreign entry: solve again and overwrite it
    A, c = np.asarray(prob.A, dtype=np.float64), np.asarray(prob.c, dtype=np.float64)
    Es = [-np.asarray(Bj, dtype=np.float64) for Bj in prob.B]
    for E in Es:
        if not (np.all(np.isin(E, (0.0, 1.0))) and np.array_equal(E.T @ E, np.eye(E.shape[1]))):
            raise InvalidInputError("reference_objective needs each B_j = -I on its own rows (two_block_coupling)")
    L = float(prob.smoothness())
    eta, rho = 1.0 / L, L / float(np.linalg.eigvalsh(A.T @ A)[-1])
    from scipy.linalg import cho_factor, cho_solve

    chol = cho_factor(rho * (A.T @ A) + np.eye(A.shape[1]) / eta)
    x = np.array(prob.x0, dtype=np.float64)
    lam = np.zeros(A.shape[0])
    best = _composite_objective(prob, x)
    t0 = time.process_time()
    step = res = math.inf
    it = 0
    history = [best]
    for it in range(1, iters + 1):
        v = A @ x - c + lam / rho
        ys = [p.prox(E.T @ v, 1.0 / rho) for p, E in zip(prob.penalties, Es)]
        By = -sum((E @ y for E, y in zip(Es, ys)), np.zeros_like(c))
        rhs = x / eta - prob.full_gradient(x) - A.T @ (lam - rho * (c - By))
        x_new = cho_solve(chol, rhs)
        r = A @ x_new + By - c
        lam = lam + rho * r
        step, res = float(np.linalg.norm(x_new - x)), float(np.linalg.norm(r))
        x = x_new
        if it % 50 == 0 or step < 1e-12:
            best = min(best, _composite_objective(prob, x))
        if it % 1000 == 0:
            history.append(_composite_objective(prob, x))
            if abs(history[-2] - history[-1]) <= decrease_tol:
                break
        if step < 1e-12 and res < 1e-12:
            break
    best = min(best, _composite_objective(prob, x))
    ref = Reference(
        f_ref=best,
        method=f"white-box linearized ADMM (exact gradients, eta = 1/L, rho = L/sigma_max(A^T A), L = {L:.4g})",
        iterations=it,
        step_norm=step,
        residual=res,
        last_decrease=history[-2] - history[-1] if len(history) > 1 else 0.0,
        seconds=time.process_time() - t0,
        cached=False,
    )
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {k: v for k, v in dataclasses.asdict(ref).items() if k != "cached"}
        path.write_text(json.dumps(doc, indent=2))
    return ref


def fused_reference(dataset: str, *, n_samples: int | None, seed: int, prob: Any = None) -> Reference:
    """The cached :func:`reference_objective` of ``FusedLasso(dataset, n_samples, seed)``."""
    from zoframe_admm.problems import FusedLasso

    if prob is None:
        prob = FusedLasso(dataset, n_samples=n_samples, seed=seed)
    key = f"fused-lasso|{dataset}|{n_samples}|{seed}|{prob.tau1}|{prob.tau2}|{prob.sigma}|{prob.group}"
    return reference_objective(prob, cache_key=key)


def run_attack(iters: int, seed: int, progress: bool) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, np.ndarray]]:
    import zoframe
    from zoframe_admm.problems import StructuredAttack

    prob = StructuredAttack(tau1=0.1, tau2=0.1, seed=seed)
    traces, perts = {}, {}
    for name in SOLVERS:
        res = zoframe.minimize(
            prob,
            name,
            rng=seed,
            max_iter=iters,
            record_every=max(1, iters // 100),
            progress=progress,
            **ATTACK_PARAMS[name],
        )
        traces[name] = {k: np.asarray(res.trace[k]) for k in res.trace.names}
        perts[name] = np.asarray(res.x)
    return traces, perts


def _plots(
    out: Path,
    fused: dict[str, dict[str, dict[str, np.ndarray]]],
    refs: dict[str, float],
    attack: dict[str, dict[str, np.ndarray]],
    perts: dict[str, np.ndarray],
) -> None:
    from zoframe._optional import require

    matplotlib = require("matplotlib", feature="the ADMM reproduction's figures")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoframe_admm.penalties import overlapping_groups_matrix

    for fname, key, ylabel in (
        ("fig1_objective_gap.png", "gap", "objective gap F - F_ref"),
        ("fig4_test_loss.png", "test_loss", "test loss"),
    ):
        fig, axes = plt.subplots(1, max(1, len(fused)), figsize=(4.2 * max(1, len(fused)), 3.4), squeeze=False)
        for ax, (ds, traces) in zip(axes[0], fused.items()):
            for name, t in traces.items():
                y = t["fun"] - refs[ds] if key == "gap" else t["test_loss"]
                ax.plot(t["seconds"], y, label=name)
            if key == "gap":
                # symmetric log: a run that ends below the reference (another local minimum) shows as
                # a negative gap instead of being clipped
                ax.set_yscale("symlog", linthresh=1e-7)
                ax.axhline(0.0, color="0.5", lw=0.8)
                ax.set_title(f"{ds} (F_ref = {refs[ds]:.8g})", fontsize=9)
            else:
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


def _out_dir(args: argparse.Namespace) -> Path:
    from zoframe._paths import output_path

    if args.out is None:
        return output_path("admm-reproduction/summary.json").parent
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def reproduce(args: argparse.Namespace) -> dict[str, Any]:
    """Run everything, write the files, return the summary (``summary["files"]``: the paths written)."""
    from tqdm.auto import tqdm

    from zoframe_admm.problems import FusedLasso

    out = _out_dir(args)
    files: list[Path] = []
    seconds = args.seconds if args.seconds is not None else (2.0 if args.quick else 30.0)
    n_samples = args.n_samples if args.n_samples is not None else (2000 if args.quick else None)
    iters = args.attack_iters if args.attack_iters is not None else (100 if args.quick else 1000)
    progress = not args.no_progress
    fused: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    refs: dict[str, float] = {}
    summary: dict[str, Any] = {"gap": args.gap, "seconds_per_run": seconds, "n_samples": n_samples, "datasets": {}}
    iters_ref = int(getattr(args, "reference_iters", REFERENCE_ITERS))
    for ds in tqdm(args.datasets, desc="fused lasso", disable=not progress):
        prob = FusedLasso(ds, n_samples=n_samples, seed=args.seed)
        key = f"fused-lasso|{ds}|{n_samples}|{args.seed}|{prob.tau1}|{prob.tau2}|{prob.sigma}|{prob.group}"
        ref = reference_objective(prob, iters=iters_ref, cache_key=key)
        traces = run_fused(ds, seconds=seconds, n_samples=n_samples, seed=args.seed, progress=progress)
        f_ref = ref.f_ref
        times = time_to_gap(traces, args.gap, f_ref)
        fused[ds], refs[ds] = traces, f_ref
        summary["datasets"][ds] = {
            "f_ref": f_ref,
            "reference": {k: v for k, v in dataclasses.asdict(ref).items() if k != "f_ref"},
            "reference_text": ref.describe(),
            "seconds_to_gap": times,
            "winner": winner(times),
            "final_test_loss": {k: float(t["test_loss"][-1]) for k, t in traces.items()},
        }
        rows = []
        for name, t in traces.items():
            for i in range(len(t["iteration"])):
                rows.append(
                    {
                        "solver": name,
                        **{k: float(t[k][i]) for k in ("iteration", "calls", "seconds", "fun")},
                        "gap": float(t["fun"][i] - f_ref),
                        "test_loss": float(t["test_loss"][i]),
                        "stationarity": float(t.get("stationarity", np.full(len(t["iteration"]), math.nan))[i]),
                    }
                )
        _write_csv(out / f"fused_lasso_{ds}.csv", rows)
        files.append(out / f"fused_lasso_{ds}.csv")
    attack, perts = run_attack(iters, args.seed, progress)
    _write_csv(
        out / "attack.csv",
        [
            {
                "solver": name,
                "iteration": float(t["iteration"][i]),
                "calls": float(t["calls"][i]),
                "attack_loss": float(t["attack_loss"][i]),
                "fun": float(t["fun"][i]),
                "fooled": float(t["fooled"][i]),
            }
            for name, t in attack.items()
            for i in range(len(t["iteration"]))
        ],
    )
    _write_csv(
        out / "attack_perturbations.csv",
        [{"solver": name, **{f"p{i}": float(v) for i, v in enumerate(x)}} for name, x in perts.items()],
    )
    summary["attack"] = {
        name: {"final_attack_loss": float(t["attack_loss"][-1]), "fooled": float(t["fooled"][-1])}
        for name, t in attack.items()
    }
    _plots(out, fused, refs, attack, perts)
    files += [out / "attack.csv", out / "attack_perturbations.csv"]
    files += [
        out / n
        for n in ("fig1_objective_gap.png", "fig2_attack_loss.png", "fig3_group_sparsity.png", "fig4_test_loss.png")
    ]
    files.append(out / "summary.json")
    summary["files"] = [str(f) for f in files]
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def run(args: argparse.Namespace) -> int:
    summary = reproduce(args)
    for ds, info in summary["datasets"].items():
        cells = ", ".join(f"{k}: {'-' if v is None else f'{v:.2f}s'}" for k, v in info["seconds_to_gap"].items())
        print(f"{ds}: {info['reference_text']}")
        print(f"{ds}: time to gap {summary['gap']:g}: {cells}; winner {info['winner']}")
    for f in summary["files"]:
        print(f"wrote {f}")
    return 0
