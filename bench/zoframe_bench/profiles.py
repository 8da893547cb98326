"""Performance and data profiles (Moré & Wild 2009), runtime distributions, summaries and plots.

Moré & Wild, *Benchmarking derivative-free optimization algorithms*, SIAM J. Optim. 20(1), 2009:

* a problem ``p`` is one (instance, seed) pair; ``f_L`` is the instance's optimal value ``f*`` when
  the suite knows it, else the lowest feasible value any run of the bench reached on it;
* convergence test (their eq. 2.2): a point ``x`` solves ``p`` at tolerance ``tau`` when
  ``f(x) <= f_L + tau (f(x0) - f_L)`` and, for a constrained problem, its maximal violation is at
  most ``feasibility_tol``;
* ``t_{p,s}``: the evaluations solver ``s`` used before its first point passing the test (``inf``
  if none did). Two units: raw component evaluations (``Result.nfev``), and full-evaluation
  equivalents ``t / (n_p + m_p)`` (one objective over all ``n`` components plus all ``m``
  constraints: the unit of the papers);
* performance profile (eq. 2.1): ``rho_s(alpha) = |{p : r_{p,s} <= alpha}| / |P|`` with the ratio
  ``r_{p,s} = t_{p,s} / min_s t_{p,s}`` (the same in both units: the conversion factor is the
  problem's own);
* data profile (eq. 2.3): ``d_s(kappa) = |{p : t_{p,s} / (d_p + 1) <= kappa}| / |P|``, kappa in
  "simplex gradients" (``d_p + 1`` full evaluations), shown in both units.

COCO-style empirical runtime distributions (Hansen et al., Optim. Methods Softw. 2021): the fraction
of (problem, target) pairs solved within a budget, for the 16 relative targets
``tau = 10^-0.5, 10^-1, ..., 10^-8``, against the budget per dimension.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from zoframe.protocols import Array
from zoframe_bench.store import RunRow

__all__ = [
    "ECDF_TAUS",
    "ProfileTable",
    "data_profile",
    "ecdf",
    "failure_kind",
    "failure_lines",
    "failures",
    "performance_profile",
    "solve_times",
    "table_from_rows",
    "write_reports",
]

#: the relative targets of the runtime distributions
ECDF_TAUS: tuple[float, ...] = tuple(float(10.0 ** (-0.5 * k)) for k in range(1, 17))


def first_hit(calls: Array, fun: Array, violation: Array, target: float, feasibility_tol: float) -> float:
    """The first ``calls`` at which a feasible recorded point has ``fun <= target`` (``inf`` if none)."""
    ok = (violation <= feasibility_tol) & (fun <= target)
    if not ok.any():
        return math.inf
    return float(calls[int(np.argmax(ok))])


class ProfileTable:
    """The data of the profiles: per problem ``p`` and solver ``s``, the histories and the sizes.

    ``histories[p][s] = (calls, fun, violation)`` (``None`` for a run that did not happen, e.g. a
    solver that does not accept the problem's kind); ``f0[p]``, ``f_low[p]``, ``dim[p]`` and
    ``unit[p]`` (``n + m``) per problem.
    """

    def __init__(
        self,
        problems: Sequence[str],
        solvers: Sequence[str],
        histories: Sequence[Sequence[tuple[Array, Array, Array] | None]],
        f0: Sequence[float],
        f_low: Sequence[float],
        dim: Sequence[int],
        unit: Sequence[int],
        budget: Sequence[float] | None = None,
    ) -> None:
        self.problems = list(problems)
        self.solvers = list(solvers)
        self.histories = [list(h) for h in histories]
        self.f0 = np.asarray(f0, dtype=np.float64)
        self.f_low = np.asarray(f_low, dtype=np.float64)
        self.dim = np.asarray(dim, dtype=np.float64)
        self.unit = np.asarray(unit, dtype=np.float64)
        self.budget = np.asarray(budget if budget is not None else [math.nan] * len(self.problems), dtype=np.float64)


def solve_times(table: ProfileTable, tau: float, feasibility_tol: float) -> Array:
    """``t_{p,s}`` in raw evaluations, shape ``(P, S)`` (``inf``: not solved)."""
    P, S = len(table.problems), len(table.solvers)
    t = np.full((P, S), math.inf)
    for p in range(P):
        target = table.f_low[p] + tau * max(table.f0[p] - table.f_low[p], 0.0)
        for s in range(S):
            h = table.histories[p][s]
            if h is not None:
                t[p, s] = first_hit(h[0], h[1], h[2], target, feasibility_tol)
    return t


def performance_profile(t: Array, alphas: Array) -> Array:
    """``rho_s(alpha)``, shape ``(len(alphas), S)``, for solve times ``t`` ``(P, S)``.

    A time of 0 (solved at the starting point) counts as 1 evaluation, so ratios stay finite.
    """
    tt = np.maximum(t, 1.0)
    best = tt.min(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        r = np.where(np.isfinite(best), tt / best, math.inf)
    return np.asarray([(r <= a).mean(axis=0) for a in alphas], dtype=np.float64)


def data_profile(t: Array, dim: Array, kappas: Array) -> Array:
    """``d_s(kappa)``, shape ``(len(kappas), S)``: the fraction with ``t_{p,s} / (d_p + 1) <= kappa``."""
    scaled = t / (dim[:, None] + 1.0)
    return np.asarray([(scaled <= k).mean(axis=0) for k in kappas], dtype=np.float64)


def ecdf(table: ProfileTable, budgets: Array, feasibility_tol: float, unit: str) -> Array:
    """Fraction of (problem, target) pairs solved within ``budget * d_p`` (COCO), shape ``(B, S)``.

    ``unit="full"`` divides the raw times by ``n_p + m_p`` first.
    """
    hits = []
    for tau in ECDF_TAUS:
        t = solve_times(table, tau, feasibility_tol)
        if unit == "full":
            t = t / table.unit[:, None]
        hits.append(t / table.dim[:, None])
    allt = np.concatenate(hits, axis=0)
    return np.asarray([(allt <= b).mean(axis=0) for b in budgets], dtype=np.float64)


def table_from_rows(
    rows: Sequence[RunRow], f_star: Mapping[str, float | None], feasibility_tol: float
) -> ProfileTable:
    """Group stored runs into a :class:`ProfileTable` (problems = (instance, seed) pairs)."""
    solvers = sorted({r.task.solver for r in rows})
    keys = sorted({(r.task.instance, r.task.seed) for r in rows})
    index = {k: i for i, k in enumerate(keys)}
    histories: list[list[tuple[Array, Array, Array] | None]] = [[None] * len(solvers) for _ in keys]
    f0 = [math.nan] * len(keys)
    dim = [1] * len(keys)
    unit = [1] * len(keys)
    budget = [0.0] * len(keys)
    best_seen: dict[str, float] = {}
    for r in rows:
        p = index[(r.task.instance, r.task.seed)]
        dim[p], unit[p] = r.dim, r.unit
        budget[p] = max(budget[p], float(r.task.budget))
        if not r.ran or r.history["calls"].size == 0:
            continue
        h = (r.history["calls"], r.history["fun"], r.history["violation"])
        histories[p][solvers.index(r.task.solver)] = h
        if not math.isfinite(f0[p]):
            f0[p] = float(h[1][0])
        feas = h[1][(h[2] <= feasibility_tol) & np.isfinite(h[1])]
        if feas.size:
            best_seen[r.task.instance] = min(best_seen.get(r.task.instance, math.inf), float(feas.min()))
    f_low = []
    for inst, _ in keys:
        fs = f_star.get(inst)
        f_low.append(float(fs) if fs is not None else best_seen.get(inst, math.nan))
    return ProfileTable([f"{i}#seed{s}" for i, s in keys], solvers, histories, f0, f_low, dim, unit, budget)


def _median(values: Sequence[float]) -> float | None:
    vals = [v for v in values if math.isfinite(v)]
    return float(np.median(vals)) if vals else None


#: the kinds of failed runs a summary counts, in the order shown
FAILURE_KINDS = ("missing dependency", "ERROR", "TIMEOUT", "FAILED")


def failure_kind(row: RunRow) -> str | None:
    """``missing dependency``, ``ERROR`` (the run could not start), ``TIMEOUT``, ``FAILED`` (raised mid-run) or None."""
    if row.status in ("ERROR", "FAILED") and any(
        f"{name}: " in row.reason for name in ("MissingDependencyError", "ModuleNotFoundError", "ImportError")
    ):
        return "missing dependency"
    return row.status if row.status in ("ERROR", "TIMEOUT", "FAILED") else None


def failures(rows: Sequence[RunRow]) -> dict[str, dict[str, Any]]:
    """Failed runs by kind: ``{kind: {"count": n, "first": "message (instance, seed s)"}}`` (kinds with runs only).

    "first" is the message of the first failed run in (instance, seed) order, so it does not depend
    on the order the runs finished in.
    """
    out: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: (r.task.instance, r.task.seed, r.task.key)):
        kind = failure_kind(r)
        if kind is None:
            continue
        if kind not in out:
            out[kind] = {"count": 0, "first": f"{r.reason} ({r.task.instance}, seed {r.task.seed})"}
        out[kind]["count"] += 1
    return {k: out[k] for k in FAILURE_KINDS if k in out}


def _failed_cell(entry: Mapping[str, Any]) -> str:
    fails = entry.get("failures", {})
    return ", ".join(f"{v['count']} {k}" for k, v in fails.items()) or "0"


def failure_lines(summary: Mapping[str, Any]) -> list[str]:
    """One line per solver and kind of failed run: ``SOLVER: N of M runs KIND; first: MESSAGE``."""
    lines = []
    for name, e in summary.get("solvers", {}).items():
        for kind, v in e.get("failures", {}).items():
            lines.append(f"{name}: {v['count']} of {e['runs']} runs {kind}; first: {v['first']}")
    return lines


def summarise(
    rows: Sequence[RunRow], table: ProfileTable, taus: Sequence[float], feasibility_tol: float
) -> dict[str, Any]:
    """Per solver: runs, statuses, and per tau the solved fraction and median evaluations to target."""
    out: dict[str, Any] = {"problems": len(table.problems), "feasibility_tol": feasibility_tol,
                           "taus": list(taus), "solvers": {}}
    times = {tau: solve_times(table, tau, feasibility_tol) for tau in taus}
    for s, name in enumerate(table.solvers):
        mine = [r for r in rows if r.task.solver == name]
        statuses: dict[str, int] = {}
        for r in mine:
            statuses[r.status] = statuses.get(r.status, 0) + 1
        viols = [float(r.result.get("final_violation", math.nan)) for r in mine if r.ran and r.kind == "constrained"]
        entry: dict[str, Any] = {
            "runs": len(mine),
            "statuses": dict(sorted(statuses.items())),
            "failed_runs": sum(1 for r in mine if failure_kind(r) is not None),
            "failures": failures(mine),
            "result_success_rate": float(np.mean([bool(r.result.get("success", False)) for r in mine])) if mine else 0.0,
            "median_final_violation": _median(viols),
            "nfev_by_kind": {k: int(sum(int(r.nfev_by_kind.get(k, 0)) for r in mine))
                             for k in sorted({k for r in mine for k in r.nfev_by_kind})},
            "targets": {},
        }
        for tau in taus:
            t = times[tau][:, s]
            solved = np.isfinite(t)
            entry["targets"][f"{tau:g}"] = {
                "success_rate": float(solved.mean()) if t.size else 0.0,
                "median_evals_raw": _median(list(t[solved])),
                "median_evals_full": _median(list((t / table.unit)[solved])),
            }
        out["solvers"][name] = entry
    return out


def _markdown(summary: Mapping[str, Any]) -> str:
    taus = [f"{t:g}" for t in summary["taus"]]
    head = ["solver", "runs", "failed", *[f"solved tau={t}" for t in taus], *[f"median evals tau={t} (raw / full)" for t in taus],
            "median violation", "Result.success"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def num(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    for name, e in summary["solvers"].items():
        cells = [name, str(e["runs"]), _failed_cell(e)]
        cells += [f"{100 * e['targets'][t]['success_rate']:.0f}%" for t in taus]
        cells += [f"{num(e['targets'][t]['median_evals_raw'], '.0f')} / {num(e['targets'][t]['median_evals_full'], '.1f')}"
                  for t in taus]
        cells += [num(e["median_final_violation"], ".2e"), f"{100 * e['result_success_rate']:.0f}%"]
        lines.append("| " + " | ".join(cells) + " |")
    note = (f"\n{summary['problems']} problems (instance x seed). Solved: f(x) <= f_L + tau (f(x0) - f_L) with "
            f"max violation <= {summary['feasibility_tol']:g}. Evaluations: raw component evaluations / "
            "full-evaluation equivalents (n + m raw each). Result.success: the driver's own verdict. "
            "Failed: runs that gave no result (missing dependency, ERROR: could not start, TIMEOUT: stopped at the "
            "time limit) or raised mid-run (FAILED); they count as not solved.\n")
    if summary.get("transform"):
        what = "; then ".join(
            f"{t.get('transform')} (" + ", ".join(f"{k}={v}" for k, v in t.items() if k not in ("transform", "which")) + ")"
            for t in summary["transform"]
        )
        note += (f"\nImperfect values: the solvers saw the problems' values through {what} (zoframe.imperfect); "
                 "the solved test and the violation use the clean problems' values and f*.\n")
    failed = failure_lines(summary)
    if failed:
        note += "\nFailed runs (first message of each kind):\n\n" + "\n".join(f"- {ln}" for ln in failed) + "\n"
    return "\n".join(lines) + "\n" + note


def _grid_max(t: Array) -> float:
    finite = t[np.isfinite(t)]
    return float(finite.max()) if finite.size else 1.0


def write_reports(
    rows: Sequence[RunRow],
    outdir: Path,
    *,
    f_star: Mapping[str, float | None],
    taus: Sequence[float] = (1e-1, 1e-3, 1e-5),
    feasibility_tol: float = 1e-3,
    plots: bool = True,
    transform: Sequence[Mapping[str, Any]] = (),
) -> tuple[dict[str, Any], list[str]]:
    """Write ``summary.json``, ``summary.md``, ``profiles.json`` and (``plots``) PNGs; return the summary.

    ``transform``: the imperfections the runs' values went through (recorded in the summary as ``transform``).
    """
    table = table_from_rows(rows, f_star, feasibility_tol)
    summary = summarise(rows, table, taus, feasibility_tol)
    if transform:
        summary["transform"] = [dict(t) for t in transform]
    labels = []
    for name in table.solvers:
        e = summary["solvers"][name]
        labels.append(f"{name} ({e['failed_runs']} of {e['runs']} runs failed)" if e["failed_runs"] else name)
    prof: dict[str, Any] = {"solvers": table.solvers, "labels": labels, "problems": table.problems,
                            "performance": {}, "data": {}, "ecdf": {}}
    for tau in taus:
        t = solve_times(table, tau, feasibility_tol)
        tt = np.maximum(t, 1.0)
        best = tt.min(axis=1, keepdims=True)
        with np.errstate(invalid="ignore"):
            ratios = np.where(np.isfinite(best), tt / best, math.inf)
        rmax = max(2.0, _grid_max(ratios) * 1.1)
        alphas = np.unique(np.concatenate([[1.0], np.geomspace(1.0, rmax, 120)]))
        prof["performance"][f"{tau:g}"] = {"alpha": alphas.tolist(),
                                           "rho": performance_profile(t, alphas).T.tolist()}
        prof["data"][f"{tau:g}"] = {}
        for unit in ("full", "raw"):
            tu = t / table.unit[:, None] if unit == "full" else t
            bu = table.budget / table.unit if unit == "full" else table.budget
            kmax = max(1.0, _grid_max(tu / (table.dim[:, None] + 1.0)) * 1.05, _grid_max(bu / (table.dim + 1.0)))
            kappas = np.linspace(0.0, kmax, 150)
            prof["data"][f"{tau:g}"][unit] = {"kappa": kappas.tolist(),
                                              "d": data_profile(tu, table.dim, kappas).T.tolist()}
    for unit in ("full", "raw"):
        hi = max((float(r.task.budget) / (r.unit if unit == "full" else 1.0)) / max(r.dim, 1) for r in rows) if rows else 1.0
        budgets = np.geomspace(min(0.1, hi), max(hi, 1.0), 100)
        prof["ecdf"][unit] = {"budget_per_dim": budgets.tolist(),
                              "fraction": ecdf(table, budgets, feasibility_tol, unit).T.tolist()}
    outdir.mkdir(parents=True, exist_ok=True)
    files = []
    for name, text in (("summary.json", json.dumps(summary, indent=2, sort_keys=True)),
                       ("summary.md", _markdown(summary)),
                       ("profiles.json", json.dumps(_json_safe(prof), sort_keys=True))):
        (outdir / name).write_text(text, encoding="utf-8")
        files.append(str(outdir / name))
    if plots:
        files.extend(_plots(prof, outdir, taus))
    return summary, files


def _json_safe(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_safe(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    return v


def _plots(prof: Mapping[str, Any], outdir: Path, taus: Sequence[float]) -> list[str]:
    from zoframe._optional import require

    require("matplotlib", feature="the bench's PNG plots")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    solvers = prof.get("labels", prof["solvers"])  # a legend says how many runs of a solver failed
    files = []
    fig, axes = plt.subplots(1, len(taus), figsize=(4.2 * len(taus), 3.6), squeeze=False)
    for ax, tau in zip(axes[0], taus):
        d = prof["performance"][f"{tau:g}"]
        for s, name in enumerate(solvers):
            ax.step(d["alpha"], d["rho"][s], where="post", label=name)
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("performance ratio alpha")
        ax.set_ylabel("fraction of problems rho_s(alpha)")
        ax.set_title(f"performance profile, tau = {tau:g}")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path = outdir / "performance_profiles.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    files.append(str(path))
    fig, axes = plt.subplots(2, len(taus), figsize=(4.2 * len(taus), 7.0), squeeze=False)
    for row, unit in enumerate(("full", "raw")):
        for ax, tau in zip(axes[row], taus):
            d = prof["data"][f"{tau:g}"][unit]
            for s, name in enumerate(solvers):
                ax.step(d["kappa"], d["d"][s], where="post", label=name)
            ax.set_ylim(-0.02, 1.02)
            what = "full evaluations (n + m raw)" if unit == "full" else "raw component evaluations"
            ax.set_xlabel(f"budget: {what} / (d + 1)")
            ax.set_ylabel("fraction of problems d_s")
            ax.set_title(f"data profile, tau = {tau:g}")
            ax.grid(alpha=0.3)
        axes[row][-1].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path = outdir / "data_profiles.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    files.append(str(path))
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.6), squeeze=False)
    for ax, unit in zip(axes[0], ("full", "raw")):
        d = prof["ecdf"][unit]
        for s, name in enumerate(solvers):
            ax.step(d["budget_per_dim"], d["fraction"][s], where="post", label=name)
        ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        what = "full evaluations" if unit == "full" else "raw evaluations"
        ax.set_xlabel(f"budget: {what} / dimension")
        ax.set_ylabel("fraction of (problem, target) pairs")
        ax.set_title(f"runtime distribution, 16 targets ({unit})")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path = outdir / "ecdf.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    files.append(str(path))
    return files
