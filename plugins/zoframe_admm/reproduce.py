"""``zoframe reproduce admm``: Figures 1-4 of Huang, Gao, Chen & Huang (IJCAI 2019).

* Figure 1 (``fig1_objective_gap.png``): objective gap against solver time of the six solvers on the
  graph-guided fused-lasso problem of each dataset (``fused_lasso_<dataset>.csv``);
* Figure 4 (``fig4_test_loss.png``): test loss against solver time, same runs;
* Figure 2 (``fig2_attack_loss.png``): attack loss against iterations of the structured attack on
  the 8x8-digits classifier (``attack.csv``);
* Figure 3 (``fig3_group_sparsity.png``): heat maps of the learned perturbations (pixel magnitude and
  the l2 norm of each overlapping 3x3 group) of the ADMM solvers (``attack_perturbations.csv``).

The objective gap is ``F(x_t) - F_ref``. ``F_ref`` does not depend on the compared runs: the
correntropy loss is nonconvex (no cvxpy optimum), so it comes from a separate, white-box reference
solver, :func:`reference_objective` (L-BFGS-B with exact gradients on the problem with its L1 terms
smoothed to within 2e-10, run to machine precision, cached), on the same problem. A compared solver's time to a
gap therefore depends on its own trace only (adding or removing solvers changes no other solver's
time). A solver may end below ``F_ref`` (another local minimum): its gap is then negative.
``summary.json`` holds, per dataset, ``F_ref`` and how it was obtained, the seconds each solver
needed to reach the gap ``--gap`` (``null``: not reached) and the winner. Time is the solver's own wall-clock time (the driver
excludes monitoring; ``max_time`` budgets it), one BLAS thread: on a busy machine it is noisy.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
from dataclasses import dataclass
import hashlib
import json
import math
import os
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
    ``r = rho eta sigma_max(A^T A) + 1.01 = 2.02`` and ``eta / r = 0.5 / L``. The papers' iterations
    (``steps="paper"``), run to the time budget.
    """
    admm = {"rho": L / sigma_a, "eta": 1.01 / L, "b": 20, "rank_check": "ignore", "steps": "paper"}
    prox = {"eta": 0.5 / L, "b": 20, "steps": "paper"}
    return {**{s: dict(admm) for s in ADMM}, "zo-prox-svrg": dict(prox), "zo-prox-saga": dict(prox)}


ATTACK_PARAMS: dict[str, dict[str, Any]] = {
    **{s: {"rho": 1.0, "eta": 0.02, "b": 4, "rank_check": "ignore", "steps": "paper"} for s in ADMM},
    "zo-prox-svrg": {"eta": 0.02, "b": 4, "steps": "paper"},
    "zo-prox-saga": {"eta": 0.02, "b": 4, "steps": "paper"},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=["20news", "a9a", "w8a"],
        help="fused-lasso datasets among 20news, a9a, w8a (covtype is unavailable)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small subsamples and short runs (about 2 minutes on 2 busy cores, the reference solves included)",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="output directory for PNG, CSV and summary.json (default: zoframe-out/admm-reproduction)",
    )
    parser.add_argument(
        "--seconds", type=float, default=None, help="seconds of solver time per solver and dataset (30; quick: 2)"
    )
    parser.add_argument("--n-samples", type=int, default=None, help="subsample each dataset (all; quick: 2000)")
    parser.add_argument(
        "--attack-iters", type=int, default=None, help="iterations of the attack runs (1000; quick: 100)"
    )
    parser.add_argument(
        "--gap",
        type=float,
        default=None,
        help="objective gap F - F_ref for the time-to-gap summary (F_ref: the reference solver's; "
        "default 1e-4, --quick: 1e-2, which 2-second runs can reach)",
    )
    parser.add_argument(
        "--reference-iters",
        type=int,
        default=REFERENCE_ITERS,
        help=f"iteration cap of the white-box reference solver that gives F_ref (default {REFERENCE_ITERS})",
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
    """Six solvers on one dataset under the same time budget (``max_time``): their traces."""
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
    """Per solver, the first recorded solver time with ``F - f_ref <= gap`` (``None``: never).

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


#: iteration cap of the reference solver (L-BFGS-B; it stops earlier when it has converged)
REFERENCE_ITERS = 50000
#: smoothing radius of the reference: |t| is replaced by sqrt(t^2 + eps^2) - eps
REFERENCE_EPS = 1e-7
_REFERENCE_VERSION = 3  # bump when the reference algorithm changes: old cache entries are ignored


@dataclass(frozen=True)
class Reference:
    """The reference objective of a composite problem and how it was obtained.

    ``grad_inf``: the largest entry of the smoothed objective's gradient at the reference point;
    ``smoothing_bound``: ``F(x) - F_eps(x) <= smoothing_bound`` for every ``x`` (so ``f_ref`` is within
    that bound plus the smoothed problem's own optimality gap of the local minimum it found).
    """

    f_ref: float
    method: str
    iterations: int
    grad_inf: float
    smoothing_bound: float
    message: str
    seconds: float
    cached: bool

    def describe(self) -> str:
        how = "from cache" if self.cached else f"{self.seconds:.1f} s CPU"
        return (
            f"F_ref = {self.f_ref:.12g}: {self.method}; {self.iterations} iterations, final gradient "
            f"(max entry) {self.grad_inf:.1e}, smoothing error <= {self.smoothing_bound:.1e} ({how})"
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
    eps: float = REFERENCE_EPS,
    cache: bool = True,
    cache_key: str | None = None,
) -> Reference:
    """A reference objective for a composite problem, independent of any compared run.

    The problem ``F(x) = f(x) + sum_j w_j ||y_j(x)||_1`` (``y_j(x) = E_j^T (A x - c)``, each ``B_j = -E_j``
    selecting its own rows, every penalty an ``L1``) is smoothed, ``|t| -> sqrt(t^2 + eps^2) - eps``,
    and the smooth problem is solved from ``x0`` by scipy's L-BFGS-B with exact gradients (white-box
    ``prob.full_gradient``) to machine precision (``ftol = 0``, ``gtol = 1e-12``, at most ``iters``
    iterations). ``F_ref`` is the true ``F`` at the point found. Since ``sqrt(t^2 + eps^2) - eps
    <= |t| <= sqrt(t^2 + eps^2)``, ``F`` and the smoothed objective differ by at most
    ``eps * sum_j w_j * rows_j`` (``smoothing_bound``, about 2e-10 for the fused-lasso problems), so
    ``F_ref`` is within that bound of the local minimum of ``F`` that L-BFGS-B converged to. The
    problem is nonconvex: another local minimum can be lower, and a compared run may end below
    ``F_ref`` (a negative gap). Deterministic; cached (with ``cache_key``) in the problem module's cache
    directory.

    Measured on the fused-lasso problems (numpy 2.4, scipy 1.17): on 20news (2000 samples) L-BFGS-B
    needs 107 iterations (0.09 s CPU) and agrees to 1.3e-13 with linearized ADMM with exact gradients
    run 18 000 iterations (1.6 s); on all of a9a it needs about 4 200 iterations (26 s) and ends
    9e-5 below that ADMM after 20 000 iterations, which was still decreasing by 8e-7 per 1000
    iterations: the first reference of this reproduction, replaced for that reason.
    """
    import time

    from scipy.optimize import minimize as scipy_minimize

    from zoframe.penalties import L1
    from zoframe_admm.problems import _cache_root

    if not (isinstance(iters, int) and iters >= 1):
        raise InvalidInputError(f"iters must be a positive integer, got {iters!r}")
    if not (math.isfinite(eps) and eps > 0):
        raise InvalidInputError(f"eps must be a positive number, got {eps!r}")
    path = None
    if cache and cache_key is not None:
        digest = hashlib.sha256(f"{_REFERENCE_VERSION}|{iters}|{eps}|{cache_key}".encode()).hexdigest()[:20]
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
    if not all(isinstance(p, L1) for p in prob.penalties):
        raise InvalidInputError("reference_objective smooths L1 penalties only; this problem has others")
    maps = [(E.T @ A, E.T @ c, float(p.weight)) for E, p in zip(Es, prob.penalties)]
    every = np.arange(prob.n)

    def fun_grad(x: np.ndarray) -> tuple[float, np.ndarray]:
        f = float(prob.components(x[None, :], every).mean())
        g = np.array(prob.full_gradient(x), dtype=np.float64)
        for M, v, w in maps:
            y = M @ x - v
            root = np.sqrt(y * y + eps * eps)
            f += w * float((root - eps).sum())
            g += w * (M.T @ (y / root))
        return f, g

    t0 = time.process_time()
    opt = scipy_minimize(
        fun_grad,
        np.array(prob.x0, dtype=np.float64),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": iters, "maxfun": 2 * iters, "ftol": 0.0, "gtol": 1e-12, "maxcor": 30},
    )
    x = np.asarray(opt.x, dtype=np.float64)
    ref = Reference(
        f_ref=min(_composite_objective(prob, x), _composite_objective(prob, np.asarray(prob.x0, dtype=np.float64))),
        method=f"L-BFGS-B on the smoothed problem (exact gradients, eps = {eps:g})",
        iterations=int(opt.nit),
        grad_inf=float(np.abs(opt.jac).max()),
        smoothing_bound=eps * sum(w * M.shape[0] for M, _, w in maps),
        message=str(opt.message),
        seconds=time.process_time() - t0,
        cached=False,
    )
    if path is not None:
        doc = {k: v for k, v in dataclasses.asdict(ref).items() if k != "cached"}
        write_atomically(path, json.dumps(doc, indent=2))
    return ref


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a synced temporary renamed into place (``os.replace``).

    A crash or an error leaves the old file (or none), never a half-written one; readers in other
    processes see the old content or the new one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


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
            ax.set_xlabel("solver time (s)")
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
    gap = args.gap if args.gap is not None else (1e-2 if args.quick else 1e-4)
    progress = not args.no_progress
    fused: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    refs: dict[str, float] = {}
    summary: dict[str, Any] = {"gap": gap, "seconds_per_run": seconds, "n_samples": n_samples, "datasets": {}}
    iters_ref = int(getattr(args, "reference_iters", REFERENCE_ITERS))
    from zoframe._output import progress_wanted

    for ds in tqdm(args.datasets, desc="fused lasso", disable=not progress_wanted(progress)):
        prob = FusedLasso(ds, n_samples=n_samples, seed=args.seed)
        key = f"fused-lasso|{ds}|{n_samples}|{args.seed}|{prob.tau1}|{prob.tau2}|{prob.sigma}|{prob.group}"
        ref = reference_objective(prob, iters=iters_ref, cache_key=key)
        traces = run_fused(ds, seconds=seconds, n_samples=n_samples, seed=args.seed, progress=progress)
        f_ref = ref.f_ref
        times = time_to_gap(traces, gap, f_ref)
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
