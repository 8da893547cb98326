"""``zoframe reproduce dszog``: Tables 2, 3, 10 and the sensitivity tables of the DSZOG paper.

Shi, Gao & Gu, *Gradient-free method for heavily constrained nonconvex optimization*, ICML 2022:
Table 2 (pairwise constraints, Figure 1), Table 3 (fairness constraints, Figure 2), Table 10
(fairness with the RBF-kernel model, Figure 3), Tables 6-9, 11, 12 (sensitivity of ADSZOG to its
hyper-parameters); plain DSZOG's numbers come from the ICLR 2022 submission (Tables 3 and 5).

One command per table::

    zoframe reproduce dszog --table fairness --quick          # about 2 minutes, no download
    zoframe reproduce dszog --table pairwise --seeds 10 --time-cap 600

What it does, per table:

1. hyper-parameters of every (data set, method) cell are selected on the VALIDATION split of the
   seed-0 problem over the paper's grids (:data:`~zoframe_constrained.tuning.PAPER_GRIDS`;
   ``--tune quick`` uses 2-4 point grids, ``--tune none`` the defaults), with the same budget as
   the runs; the choice is cached in ``OUT/TABLE/hparams.json``;
2. every seed ``s`` draws its own data sample and split (``seed=s``) and runs the method with the
   selected parameters: ADSZOG / DSZOG for ``--iters`` iterations, the projection / Frank-Wolfe
   baselines for ``--baseline-iters`` iterations or ``--time-cap`` seconds (the paper stopped them at
   10 000 s), whichever comes first;
3. each finished run is appended to ``OUT/TABLE/runs.jsonl`` at once (with its accuracy-vs-time
   trace), so an interrupted reproduction keeps what it had and a re-run resumes where it stopped;
4. the table is printed in the paper's layout, test accuracy (%) mean +- std over the seeds next to
   the paper's numbers (:data:`PAPER`, copied from the papers and labelled as such), and written
   to ``summary.csv`` / ``summary.json`` / ``runs.csv``; the accuracy-vs-time plot of Figure 1, 2 or
   3 goes to ``figure.png`` (matplotlib, Agg backend).

Data: pairwise uses the LIBSVM files ``a9a``, ``w8a``, ``svmguide3`` (found through ``ZOFRAME_DATA``
or the cache, ``zoframe data fetch NAME``) and the synthetic ``gen``; fairness D1-D4 are synthetic
(no download). Timings on a loaded machine are noisy: ``--jobs N`` runs N runs at once.

``OUT`` is ``--out``, by default ``zoframe-out/dszog-reproduction`` (``$ZOFRAME_OUT/dszog-reproduction``
when ``ZOFRAME_OUT`` is set); the command prints every file it wrote.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
import contextlib
import csv
from dataclasses import dataclass, field
import json
import math
import os
from pathlib import Path
import time
from typing import Any

import numpy as np

from zoframe.driver import RunFailedError, minimize
from zoframe.errors import InvalidInputError
from zoframe.registry import default_registry
from zoframe_constrained.tuning import PAPER_GRIDS, MeasureScore, ProblemRef, select_hyperparameters

__all__ = ["PAPER", "SENSITIVITY", "TABLES", "Job", "add_arguments", "plan", "run"]

PENALTY = ("adszog", "dszog")
BASELINES = ("zoscgd", "zopsgd", "acc-zomda", "acc-szofw")
LABELS = {
    "adszog": "ADSZOG",
    "dszog": "DSZOG",
    "zoscgd": "ZOSCGD",
    "zopsgd": "ZOPSGD",
    "acc-zomda": "AccZOMDA",
    "acc-szofw": "AccSZOFW",
}

#: THE PAPERS' NUMBERS (test accuracy %, mean and std over 10 runs; std None where not printed),
#: copied from Shi, Gao & Gu, ICML 2022, Table 2 (pairwise), Table 3 (fairness), Table 10
#: (kernel fairness); the "DSZOG" column of ICML (momentum + adaptive steps) is ``adszog`` here,
#: and plain ``dszog`` is the "DSZOG" column of the ICLR 2022 submission, Tables 3 and 5.
PAPER: dict[str, dict[str, dict[str, tuple[float, float | None]]]] = {
    "pairwise": {
        "a9a": {"adszog": (75.90, 0.26), "dszog": (75.37, 0.55), "zoscgd": (75.35, 0.13), "zopsgd": (75.37, 0.19), "acc-zomda": (75.52, 0.21), "acc-szofw": (75.22, 0.12)},
        "w8a": {"adszog": (89.94, 0.28), "dszog": (86.62, 0.93), "zoscgd": (83.53, 0.58), "zopsgd": (89.02, 0.97), "acc-zomda": (89.14, 0.23), "acc-szofw": (89.34, 0.33)},
        "gen": {"adszog": (82.33, 0.76), "dszog": (82.11, 0.28), "zoscgd": (66.33, 0.07), "zopsgd": (66.83, 0.57), "acc-zomda": (72.84, 0.45), "acc-szofw": (72.03, 0.23)},
        "svmguide3": {"adszog": (79.56, 0.49), "dszog": (78.83, 0.90), "zoscgd": (71.21, 0.57), "zopsgd": (78.63, 0.26), "acc-zomda": (79.01, 0.21), "acc-szofw": (71.88, 0.34)},
    },
    "fairness": {
        "D1": {"adszog": (87.33, 0.38), "dszog": (86.83, 0.52), "zoscgd": (51.08, 0.57), "zopsgd": (59.16, 0.37), "acc-zomda": (66.33, 0.19), "acc-szofw": (55.23, 0.46)},
        "D2": {"adszog": (84.75, 0.25), "dszog": (84.02, 0.31), "zoscgd": (69.70, 0.24), "zopsgd": (68.00, 0.54), "acc-zomda": (69.55, 0.29), "acc-szofw": (76.13, 0.45)},
        "D3": {"adszog": (83.58, 0.14), "dszog": (82.00, 0.05), "zoscgd": (66.33, 0.30), "zopsgd": (66.84, 0.57), "acc-zomda": (66.35, 0.45), "acc-szofw": (60.47, 0.66)},
        "D4": {"adszog": (64.91, 0.94), "dszog": (64.50, 0.25), "zoscgd": (52.16, 0.38), "zopsgd": (55.25, 0.90), "acc-zomda": (55.40, 0.51), "acc-szofw": (54.86, 0.43)},
    },
    "kernel": {
        "D1": {"adszog": (84.25, None), "zoscgd": (55.75, None), "zopsgd": (62.75, None)},
        "D2": {"adszog": (78.50, None), "zoscgd": (58.25, None), "zopsgd": (53.25, None)},
        "D3": {"adszog": (87.50, None), "zoscgd": (60.25, None), "zopsgd": (57.50, None)},
        "D4": {"adszog": (59.52, None), "zoscgd": (54.50, None), "zopsgd": (52.25, None)},
    },
}


@dataclass(frozen=True)
class Study:
    """One sensitivity table of the ICML appendix: ADSZOG with one parameter varied."""

    table: str
    family: str  # "pairwise", "fairness" or "kernel"
    param: str | tuple[str, str]
    values: tuple[Any, ...]
    fixed: Mapping[str, float]
    paper: Mapping[str, tuple[float, ...]]  # THE PAPER'S NUMBERS, one per value


_AB = ((0.9, 0.1), (0.9, 0.5), (0.9, 0.9), (0.1, 0.9), (0.5, 0.9))
#: THE PAPER'S SENSITIVITY NUMBERS (ICML 2022 appendix B.1, Tables 6-9, 11, 12, test accuracy %, as printed;
#: the printed Table 6 and Table 8 share their first column although their fixed eta_p differ).
SENSITIVITY: tuple[Study, ...] = (
    Study("Table 6", "fairness", "eta_w", (1e-2, 1e-3, 1e-4), {"eta_p": 1e-3},
          {"D1": (87.33, 87.21, 80.68), "D2": (84.75, 83.01, 67.34), "D3": (83.58, 83.78, 77.22), "D4": (64.91, 63.27, 55.13)}),
    Study("Table 7", "pairwise", "eta_w", (1e-2, 1e-3, 1e-4), {"eta_p": 1e-3},
          {"a9a": (75.90, 74.45, 65.33), "w8a": (89.94, 88.28, 56.88), "gen": (82.33, 81.78, 57.34), "svmguide3": (79.56, 79.56, 56.23)}),
    Study("Table 8", "fairness", "eta_p", (1e-2, 1e-3, 1e-4), {"eta_w": 1e-2},
          {"D1": (87.33, 86.12, 85.13), "D2": (84.75, 83.22, 83.05), "D3": (83.58, 83.29, 81.18), "D4": (64.91, 62.12, 62.23)}),
    Study("Table 9", "pairwise", "eta_p", (1e-2, 1e-3, 1e-4), {"eta_w": 1e-2},
          {"a9a": (75.90, 73.33, 73.64), "w8a": (89.94, 89.23, 88.82), "gen": (82.33, 82.11, 81.28), "svmguide3": (79.56, 78.56, 78.45)}),
    Study("Table 11", "kernel", "beta", (0.1, 1.0, 10.0), {"eta_w": 1e-3, "eta_p": 0.1, "a": 0.9, "b": 0.9},
          {"D1": (84.25, 84.73, 83.12), "D2": (78.50, 77.98, 78.33), "D3": (87.50, 87.67, 87.85), "D4": (59.52, 58.61, 58.98)}),
    Study("Table 12", "kernel", ("a", "b"), _AB, {"eta_w": 1e-3, "eta_p": 0.1, "beta": 0.1},
          {"D1": (83.93, 84.12, 84.25, 82.12, 83.21), "D2": (78.33, 78.27, 78.50, 77.29, 78.45),
           "D3": (85.34, 87.41, 87.50, 87.23, 87.14), "D4": (58.82, 57.23, 59.52, 58.78, 59.48)}),
)  # fmt: skip

#: data sets per table family
TABLES: dict[str, tuple[str, ...]] = {
    "pairwise": ("a9a", "w8a", "gen", "svmguide3"),
    "fairness": ("D1", "D2", "D3", "D4"),
    "kernel": ("D1", "D2", "D3", "D4"),
}
_METHODS: dict[str, tuple[str, ...]] = {
    "pairwise": (*PENALTY, *BASELINES),
    "fairness": (*PENALTY, *BASELINES),
    "kernel": ("adszog", "zoscgd", "zopsgd"),
}
#: small grids for ``--tune quick`` (a subset of the paper's grids)
QUICK_GRIDS: dict[str, dict[str, tuple[float, ...]]] = {
    "adszog": {"eta_w": (1e-2, 1e-3), "beta": (1.0, 10.0)},
    "dszog": {"eta_w": (1e-2, 1e-3), "beta": (1.0, 10.0)},
    "zopsgd": {"eta": (1e-2, 1e-3)},
    "zoscgd": {"gamma": (1e-2, 1e-3)},
    "acc-zomda": {"gamma": (1e-2, 1e-3)},
    "acc-szofw": {"eta": (1e-2, 1e-3)},
}
_FIGURE = {"pairwise": "Figure 1", "fairness": "Figure 2", "kernel": "Figure 3"}


# ---------------------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class Job:
    """One run: a cell of a table (data set x method or parameter value) and a seed."""

    table: str
    family: str
    dataset: str
    method: str  # column label: a solver name, or "param=value" in the sensitivity tables
    solver: str
    params: Mapping[str, Any]
    seed: int
    budget: Mapping[str, Any]
    problem: ProblemRef = field(default_factory=lambda: ProblemRef("fairness"))

    @property
    def key(self) -> str:
        return f"{self.table}|{self.dataset}|{self.method}|{self.seed}"


def _problem_ref(
    family: str, dataset: str, seed: int, n_samples: int | None, data_dir: str | None, c_rel: float | None = None
) -> ProblemRef:
    if family == "pairwise":
        kw: dict[str, Any] = {"dataset": dataset, "seed": seed, "black_box_constraints": False}
        if data_dir is not None:
            kw["data_dir"] = data_dir
        if n_samples is not None:
            kw["n_samples"] = n_samples
        return ProblemRef("pairwise", kw)
    kw = {"dataset": dataset, "seed": seed}
    if family == "kernel":
        kw["kernel"] = "rbf"
    if n_samples is not None:
        kw["n_samples"] = n_samples
    if c_rel is not None:
        kw["c_rel"] = c_rel
    return ProblemRef("fairness", kw)


def _fixed(family: str, solver: str, n_train: int) -> dict[str, Any]:
    """Batch sizes of ICML Section 6.2: |M1| = 128 for every method, |M2| = |M3| = 128 (pairwise) or 10;
    DSZOG / ADSZOG with the papers' fixed steps (``steps="paper"``), the baselines with the papers' protocol
    (``defaults="paper"``: Gaussian estimator, no stopping test)."""
    m1 = min(128, n_train)
    if solver in PENALTY:
        m23 = 128 if family == "pairwise" else 10
        return {"M1": m1, "M2": m23, "M3": m23, "steps": "paper"}  # the papers' fixed steps, no continuation
    return {"M1": m1, "defaults": "paper"}


def _budget(solver: str, args: argparse.Namespace) -> dict[str, Any]:
    if solver in PENALTY:
        return {"max_iter": int(args.iters), "max_time": float(args.time_cap)}
    return {"max_iter": int(args.baseline_iters), "time_cap": float(args.time_cap)}


def _split_budget(budget: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(driver budget, solver parameters)``: ``time_cap`` is a parameter of the baselines."""
    drv = {k: v for k, v in budget.items() if k != "time_cap"}
    par = {"time_cap": budget["time_cap"]} if "time_cap" in budget else {}
    return drv, par


def plan(args: argparse.Namespace, hparams: Mapping[str, Mapping[str, Any]]) -> list[Job]:
    """All runs of the table, given the selected hyper-parameters of every cell."""
    jobs: list[Job] = []
    seeds = range(int(args.seeds))
    if args.table == "sensitivity":
        for study in SENSITIVITY:
            if args.studies and study.table.replace(" ", "").lower() not in args.studies:
                continue
            for ds in _datasets(args, study.family):
                for value in study.values:
                    names = study.param if isinstance(study.param, tuple) else (study.param,)
                    vals = value if isinstance(value, tuple) else (value,)
                    label = f"{study.table}: " + ", ".join(f"{n}={v:g}" for n, v in zip(names, vals))
                    base = dict(hparams.get(f"{study.family}|{ds}|adszog", {}))
                    params = {**base, **study.fixed, **dict(zip(names, vals)), "steps": "paper"}
                    for s in seeds:
                        ref = _problem_ref(study.family, ds, s, args.n_samples, args.data_dir, args.c_rel)
                        jobs.append(Job(args.table, study.family, ds, label, "adszog", params, s, _budget("adszog", args), ref))
        return jobs
    for ds in _datasets(args, args.table):
        for method in _methods(args, args.table):
            params = dict(hparams.get(f"{args.table}|{ds}|{method}", {}))
            if method in PENALTY:
                params["steps"] = "paper"  # also for selections cached before the step rule existed
            else:
                params["defaults"] = "paper"  # the papers' protocol, also for selections cached before it existed
            for s in seeds:
                ref = _problem_ref(args.table, ds, s, args.n_samples, args.data_dir, args.c_rel)
                jobs.append(Job(args.table, args.table, ds, method, method, params, s, _budget(method, args), ref))
    return jobs


def _datasets(args: argparse.Namespace, family: str) -> tuple[str, ...]:
    known = TABLES[family]
    if not args.datasets:
        return known
    return tuple(d for d in args.datasets if d in known)


def _methods(args: argparse.Namespace, table: str) -> tuple[str, ...]:
    known = _METHODS[table]
    return known if not args.methods else tuple(m for m in known if m in args.methods)


# ---------------------------------------------------------------------------------------------- tuning
def _cells(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(family, data set, solver) cells whose hyper-parameters must be selected."""
    if args.table == "sensitivity":
        fams = sorted({s.family for s in SENSITIVITY if not args.studies or s.table.replace(" ", "").lower() in args.studies})
        return [(f, ds, "adszog") for f in fams for ds in _datasets(args, f)]
    return [(args.table, ds, m) for ds in _datasets(args, args.table) for m in _methods(args, args.table)]


def select_all(args: argparse.Namespace, out: Path, executor: Executor | None) -> dict[str, dict[str, Any]]:
    """Select (or load from ``hparams.json``) the hyper-parameters of every cell on the validation split."""
    path = out / "hparams.json"
    cache = read_hparams(path)
    from tqdm.auto import tqdm

    cells = _cells(args)
    from zoframe._output import progress_wanted

    bar = tqdm(cells, desc="hyper-parameters", unit="cell", disable=not progress_wanted(not args.no_progress), leave=False)
    for family, ds, solver in bar:
        key = f"{family}|{ds}|{solver}"
        if key in cache and cache[key].get("_tune") == args.tune and cache[key].get("_select_feasible") == args.select_feasible:
            continue
        ref = _problem_ref(family, ds, 0, args.n_samples, args.data_dir, args.c_rel)
        problem = ref()
        fixed = _fixed(family, solver, int(problem.n))
        if args.tune == "none":
            best: dict[str, Any] = dict(fixed)
            entry: dict[str, Any] = {**best, "_tune": "none", "_score": None, "_select_feasible": args.select_feasible}
        else:
            grid = (PAPER_GRIDS if args.tune == "paper" else QUICK_GRIDS)[solver]
            drv, par = _split_budget(_budget(solver, args))
            score = MeasureScore("val_accuracy", feasibility_tol=args.select_feasible)
            sel = select_hyperparameters(
                ref, solver, grid, fixed={**fixed, **par}, budget=drv, seed=0, executor=executor, score=score
            )
            best = {k: v for k, v in sel.best.items() if k != "time_cap"}
            entry = {**best, "_tune": args.tune, "_score": sel.best_score, "_grid_points": len(sel.table),
                     "_select_feasible": args.select_feasible}  # fmt: skip
        cache[key] = entry
        write_hparams(path, cache)  # after every cell (resumable)
    return {k: {p: v for p, v in e.items() if not p.startswith("_")} for k, e in cache.items()}


def read_hparams(path: Path) -> dict[str, dict[str, Any]]:
    """The selected hyper-parameters stored at ``path`` (``{}`` if none); a damaged file is a clear error."""
    if not path.exists():
        return {}
    try:
        cache = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        cache = exc
    if not (isinstance(cache, dict) and all(isinstance(v, dict) for v in cache.values())):
        why = f"{type(cache).__name__}: {cache}" if isinstance(cache, Exception) else "not a JSON object of cells"
        raise InvalidInputError(
            f"the hyper-parameter cache {path} is damaged ({why}); move it away (or delete it) to select the "
            "hyper-parameters again"
        )
    return cache


def write_hparams(path: Path, cache: Mapping[str, Any]) -> None:
    """Write the cache atomically (synced temporary + ``os.replace``): a crash leaves the old file or the new one."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(cache, indent=2, sort_keys=True))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------- runs
def execute(job: Job) -> dict[str, Any]:
    """Run one job; the row that goes to ``runs.jsonl`` (failures are rows too, with ``error``)."""
    problem = job.problem()
    drv, par = _split_budget(job.budget)
    iters = int(drv.get("max_iter", 1000))
    t0 = time.perf_counter()
    error = None
    try:
        res = minimize(problem, job.solver, rng=job.seed, record_every=max(1, iters // 50), **drv, **par, **dict(job.params))
    except RunFailedError as exc:
        res, error = exc.result, str(exc)
    tr = res.trace
    ms = res.measures
    return {
        "key": job.key,
        "table": job.table,
        "dataset": job.dataset,
        "method": job.method,
        "solver": job.solver,
        "seed": job.seed,
        "params": {k: v for k, v in job.params.items()},
        "test_accuracy": ms.get("test_accuracy", math.nan),
        "val_accuracy": ms.get("val_accuracy", math.nan),
        "train_accuracy": ms.get("train_accuracy", math.nan),
        "fun": ms.get("fun", math.nan),
        "max_violation": ms.get("max_violation", math.nan),
        "frac_violated": ms.get("frac_violated", math.nan),
        "nit": res.nit,
        "nfev": res.nfev,
        "seconds": float(tr["seconds"][-1]) if len(tr) else 0.0,
        "wall_seconds": time.perf_counter() - t0,
        "status": res.status.name,
        "message": res.message,
        "error": error,
        "trace_seconds": [float(v) for v in tr["seconds"]] if len(tr) else [],
        "trace_test_accuracy": [float(v) for v in tr["test_accuracy"]] if "test_accuracy" in tr else [],
    }


def _load_rows(path: Path) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by an interruption: run it again
                continue
            rows[row["key"]] = row
    return rows


def run_jobs(jobs: Sequence[Job], out: Path, executor: Executor | None, progress: bool) -> dict[str, dict[str, Any]]:
    """Run what ``runs.jsonl`` does not already hold, appending each row as it finishes."""
    path = out / "runs.jsonl"
    done = _load_rows(path)
    todo = [j for j in jobs if j.key not in done]
    from tqdm.auto import tqdm

    from zoframe._output import progress_wanted

    bar = tqdm(total=len(todo), desc="runs", unit="run", disable=not progress_wanted(progress) or not todo)
    with path.open("a", encoding="utf-8") as fh:
        def write(row: dict[str, Any]) -> None:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            done[row["key"]] = row
            bar.set_postfix_str(f"{row['dataset']} {row['method']} acc={100 * row['test_accuracy']:.1f}", refresh=False)
            bar.update(1)

        if executor is None:
            for job in todo:
                write(execute(job))
        else:
            from concurrent.futures import as_completed

            futures: dict[Future[dict[str, Any]], Job] = {executor.submit(execute, j): j for j in todo}
            for fut in as_completed(futures):
                write(fut.result())
    bar.close()
    return {j.key: done[j.key] for j in jobs}


# ---------------------------------------------------------------------------------------------- report
def _paper_value(table: str, dataset: str, method: str) -> tuple[float, float | None] | None:
    if table == "sensitivity":
        for study in SENSITIVITY:
            if method.startswith(study.table + ":"):
                values = study.paper.get(dataset)
                if values is None:
                    return None
                labels = []
                for value in study.values:
                    names = study.param if isinstance(study.param, tuple) else (study.param,)
                    vals = value if isinstance(value, tuple) else (value,)
                    labels.append(f"{study.table}: " + ", ".join(f"{n}={v:g}" for n, v in zip(names, vals)))
                return (values[labels.index(method)], None) if method in labels else None
        return None
    entry = PAPER.get(table, {}).get(dataset, {}).get(method)
    return entry


def summarize(jobs: Sequence[Job], rows: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Mean +- std of the test accuracy (%) per (data set, method), next to the paper's number."""
    cells: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for j in jobs:
        cells.setdefault((j.dataset, j.method), []).append(rows[j.key])
    out = []
    for (ds, method), rs in cells.items():
        acc = np.array([100.0 * float(r["test_accuracy"]) for r in rs if r.get("error") is None])
        viol = np.array([float(r["max_violation"]) for r in rs if r.get("error") is None])
        paper = _paper_value(jobs[0].table, ds, method)
        out.append({
            "dataset": ds,
            "method": method,
            "runs": len(acc),
            "failed": len(rs) - len(acc),
            "test_accuracy_mean": float(acc.mean()) if acc.size else math.nan,
            "test_accuracy_std": float(acc.std()) if acc.size else math.nan,
            "max_violation_mean": float(viol.mean()) if viol.size else math.nan,
            "seconds_mean": float(np.mean([float(r["seconds"]) for r in rs])),
            "iterations_mean": float(np.mean([float(r["nit"]) for r in rs])),
            "paper_mean": None if paper is None else paper[0],
            "paper_std": None if paper is None else paper[1],
        })  # fmt: skip
    return out


def format_table(table: str, summary: Sequence[Mapping[str, Any]]) -> str:
    """The paper's layout: one row per data set, one column per method, 'ours (paper)'."""
    methods = list(dict.fromkeys(r["method"] for r in summary))
    datasets = list(dict.fromkeys(r["dataset"] for r in summary))
    idx = {(r["dataset"], r["method"]): r for r in summary}

    def cell(r: Mapping[str, Any] | None) -> str:
        if r is None:
            return "-"
        ours = "n/a" if not math.isfinite(r["test_accuracy_mean"]) else f"{r['test_accuracy_mean']:.2f} ± {r['test_accuracy_std']:.2f}"
        if r["paper_mean"] is None:
            return f"{ours} (paper: -)"
        pstd = "" if r["paper_std"] is None else f" ± {r['paper_std']:.2f}"
        return f"{ours} (paper: {r['paper_mean']:.2f}{pstd})"

    title = {
        "pairwise": "Table 2: test accuracy (%), pairwise constraints",
        "fairness": "Table 3: test accuracy (%), fairness constraints",
        "kernel": "Table 10: test accuracy (%), fairness with the RBF kernel",
        "sensitivity": "Tables 6-9, 11, 12: test accuracy (%) of ADSZOG under varied hyper-parameters",
    }[table]
    lines = [title + "  [ours: mean ± std over seeds; paper: the paper's printed number]"]
    if table == "sensitivity":
        for r in summary:
            lines.append(f"  {r['dataset']:<10} {r['method']:<34} {cell(r)}")
        return "\n".join(lines)
    width = max(8, *(len(cell(idx.get((d, m)))) for d in datasets for m in methods))
    lines.append("  " + f"{'data':<10}" + "".join(f"{LABELS.get(m, m):<{width + 2}}" for m in methods))
    for d in datasets:
        lines.append("  " + f"{d:<10}" + "".join(f"{cell(idx.get((d, m))):<{width + 2}}" for m in methods))
    lines.append("Max constraint violation at the final iterate (mean over seeds; the paper does not report it)")
    lines.append("  " + f"{'data':<10}" + "".join(f"{LABELS.get(m, m):<12}" for m in methods))
    for d in datasets:
        vals = [idx[(d, m)]["max_violation_mean"] if (d, m) in idx else math.nan for m in methods]
        lines.append("  " + f"{d:<10}" + "".join(f"{v:<12.3g}" for v in vals))
    return "\n".join(lines)


def plot(table: str, jobs: Sequence[Job], rows: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    """Test accuracy against training time (mean over seeds), one panel per data set."""
    from zoframe._optional import require

    matplotlib = require("matplotlib", feature="the constrained reproduction's figures")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    datasets = list(dict.fromkeys(j.dataset for j in jobs))
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.4), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        methods = list(dict.fromkeys(j.method for j in jobs if j.dataset == ds))
        for method in methods:
            traces = [rows[j.key] for j in jobs if j.dataset == ds and j.method == method]
            traces = [r for r in traces if len(r["trace_seconds"]) > 1 and len(r["trace_test_accuracy"]) == len(r["trace_seconds"])]
            if not traces:
                continue
            t_end = max(float(r["trace_seconds"][-1]) for r in traces)
            t_start = min(float(r["trace_seconds"][1]) for r in traces)
            grid = np.geomspace(max(t_start, 1e-4), max(t_end, 2e-4), 100)
            curves = [np.interp(grid, r["trace_seconds"], r["trace_test_accuracy"]) for r in traces]
            ax.plot(grid, 100.0 * np.mean(curves, axis=0), label=LABELS.get(method, method))
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(ds)
        ax.set_xlabel("training time (s)")
        ax.set_ylabel("test accuracy (%)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{_FIGURE.get(table, 'Sensitivity')}: test accuracy against training time (zoframe)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(table: str, out: Path, jobs: Sequence[Job], rows: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    summary = summarize(jobs, rows)
    (out / "summary.json").write_text(json.dumps({"table": table, "rows": summary}, indent=2))
    with (out / "summary.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(summary[0]))
        w.writeheader()
        w.writerows(summary)
    cols = ["dataset", "method", "solver", "seed", "test_accuracy", "val_accuracy", "train_accuracy", "fun",
            "max_violation", "frac_violated", "nit", "nfev", "seconds", "status", "error", "params"]  # fmt: skip
    with (out / "runs.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for j in jobs:
            r = dict(rows[j.key])
            r["params"] = json.dumps(r["params"], sort_keys=True)
            w.writerow(r)
    plot(table, jobs, rows, out / "figure.png")
    return summary


# ---------------------------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", required=True, choices=("pairwise", "fairness", "kernel", "sensitivity"),
                        help="Table 2 (pairwise), 3 (fairness), 10 (kernel) or Tables 6-9, 11, 12 (sensitivity)")
    parser.add_argument("--seeds", type=int, default=None, help="runs per cell, seeds 0..N-1 (10; --quick: 2)")
    parser.add_argument("--time-cap", type=float, default=None,
                        help="seconds per run (the paper stopped the baselines at 10000; default 600, --quick: 10)")
    parser.add_argument("--iters", type=int, default=None, help="iterations of ADSZOG / DSZOG per run (5000; --quick: 300)")
    parser.add_argument("--baseline-iters", type=int, default=None,
                        help="iteration cap of the projection / Frank-Wolfe baselines (2000; --quick: 40)")
    parser.add_argument("--quick", action="store_true",
                        help="2 seeds, short runs, small grids (measured on 2 busy cores: fairness 2 min, pairwise 32 min)")
    parser.add_argument("--tune", choices=("paper", "quick", "none"), default=None,
                        help="hyper-parameter grids on the validation split (paper; --quick: quick)")
    parser.add_argument("--select-feasible", type=float, default=None, metavar="TOL",
                        help="select only among grid points whose run ends with max violation <= TOL (paper: no such rule)")
    parser.add_argument("--out", default=None,
                        help="output directory, a sub-directory per table (default: zoframe-out/dszog-reproduction, "
                             "or $ZOFRAME_OUT/dszog-reproduction)")  # fmt: skip
    parser.add_argument("--datasets", default=None, help="comma-separated subset of the table's data sets")
    parser.add_argument("--methods", default=None, help="comma-separated subset of the methods")
    parser.add_argument("--studies", default=None, help="sensitivity only: e.g. table6,table11")
    parser.add_argument("--n-samples", type=int, default=None, help="samples drawn per data set (paper: 1000 / 2000)")
    parser.add_argument("--c-rel", type=float, default=None,
                        help="fairness / kernel: covariance thresholds as this fraction of the unconstrained "
                             "classifier's (Zafar et al.; output in <table>-crel<F>); default: c = 0.1")  # fmt: skip
    parser.add_argument("--data-dir", default=None, help="directory of the LIBSVM files (default: ZOFRAME_DATA or cache)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once in a process pool (timings get noisier)")
    parser.add_argument("--no-progress", action="store_true")


def _normalise(args: argparse.Namespace) -> argparse.Namespace:
    quick = bool(args.quick)
    ns = argparse.Namespace(**vars(args))
    ns.seeds = args.seeds if args.seeds is not None else (2 if quick else 10)
    ns.time_cap = args.time_cap if args.time_cap is not None else (10.0 if quick else 600.0)
    ns.iters = args.iters if args.iters is not None else (300 if quick else 5000)
    ns.baseline_iters = args.baseline_iters if args.baseline_iters is not None else (40 if quick else 2000)
    ns.tune = args.tune if args.tune is not None else ("quick" if quick else "paper")
    for name in ("datasets", "methods", "studies"):
        val = getattr(args, name)
        setattr(ns, name, tuple(v.strip() for v in val.split(",") if v.strip()) if isinstance(val, str) else val)
    if ns.seeds < 1 or ns.iters < 1 or ns.baseline_iters < 1 or not ns.time_cap > 0:
        raise InvalidInputError("--seeds, --iters and --baseline-iters must be >= 1 and --time-cap > 0")
    if ns.jobs < 1:
        raise InvalidInputError("--jobs must be >= 1")
    ns.c_rel = getattr(args, "c_rel", None)
    if ns.c_rel is not None:
        if ns.table == "pairwise":
            raise InvalidInputError("--c-rel sets the fairness covariance thresholds; --table pairwise has none")
        if not (math.isfinite(ns.c_rel) and ns.c_rel >= 0):
            raise InvalidInputError(f"--c-rel must be a finite number >= 0, got {ns.c_rel}")
    fam = "fairness" if ns.table == "sensitivity" else ns.table
    if ns.datasets and ns.table != "sensitivity":
        unknown = [d for d in ns.datasets if d not in TABLES[fam]]
        if unknown:
            raise InvalidInputError(f"unknown data set(s) {unknown} for --table {ns.table}; choose from {list(TABLES[fam])}")
    if ns.methods and ns.table != "sensitivity":
        unknown = [m for m in ns.methods if m not in _METHODS[ns.table]]
        if unknown:
            raise InvalidInputError(f"unknown method(s) {unknown} for --table {ns.table}; choose from {list(_METHODS[ns.table])}")
    if ns.table == "pairwise":
        default_registry().problem("pairwise")
    return ns


@contextlib.contextmanager
def _executor(jobs: int) -> Iterator[Executor | None]:
    if jobs <= 1:
        yield None
        return
    with ProcessPoolExecutor(jobs) as pool:
        yield pool


#: wall-clock and CPU time of ``--quick`` tables, measured on a 2-core machine shared with other jobs
#: (stated before the run starts; see docs/reproduce-dszog.md)
MEASURED_QUICK = {
    "fairness": "1 min 3 s wall-clock, 60 s of CPU, on 2 shared cores",
    "pairwise": "32 min wall-clock, 6 min 13 s of CPU, on 2 cores at load 11-14; the tuning runs took 22 min of it",
}


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


#: the files ``run`` writes into the table's directory
WRITTEN = ("config.json", "hparams.json", "runs.jsonl", "runs.csv", "summary.csv", "summary.json", "figure.png")


def output_dir(out: str | None) -> Path:
    """The root of the outputs: ``--out`` as given, else ``dszog-reproduction`` under the project's output
    directory (``zoframe-out/`` or ``$ZOFRAME_OUT``, :func:`zoframe._paths.default_output_dir`)."""
    from zoframe._paths import default_output_dir

    return Path(out) if out is not None else default_output_dir() / "dszog-reproduction"


def planned_work(args: argparse.Namespace, out: Path) -> tuple[int, int, float]:
    """``(tuning runs, table runs, upper estimate in seconds)`` of a normalised invocation.

    Tuning runs are the grid points of every cell whose selection is not cached in ``hparams.json``
    yet (every combination of the grid, one repeat each); table runs are every (cell, seed). Each run
    stops at its iteration budget or at ``--time-cap`` seconds of solver time, whichever comes
    first, so the estimate is ``(tuning runs + table runs) * time cap / jobs`` of solver time (runs
    that reach their iteration budget first take less). Building each run's problem (reading and
    subsampling the data) and its final full passes over the constraints come on top: on a loaded
    machine they can double the wall-clock time (see ``MEASURED_QUICK``).
    """
    path = out / "hparams.json"
    cache: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    tuning = 0
    if args.tune != "none":
        grids = PAPER_GRIDS if args.tune == "paper" else QUICK_GRIDS
        for family, ds, solver in _cells(args):
            entry = cache.get(f"{family}|{ds}|{solver}", {})
            if entry.get("_tune") == args.tune and entry.get("_select_feasible") == args.select_feasible:
                continue
            tuning += math.prod(len(v) for v in grids[solver].values())
    runs = len(plan(args, {}))
    return tuning, runs, (tuning + runs) * float(args.time_cap) / max(1, int(args.jobs))


def run(args: argparse.Namespace) -> int:
    """Entry point of ``zoframe reproduce dszog``."""
    ns = _normalise(args)
    out = output_dir(ns.out) / (ns.table if ns.c_rel is None else f"{ns.table}-crel{ns.c_rel:g}")
    out.mkdir(parents=True, exist_ok=True)
    tuning, runs, seconds = planned_work(ns, out)
    as_measured = args.quick and all(
        getattr(args, k, None) is None
        for k in ("seeds", "time_cap", "iters", "baseline_iters", "tune", "datasets", "methods", "studies", "n_samples", "c_rel")
    ) and int(ns.jobs) == 1
    measured = MEASURED_QUICK.get(ns.table) if as_measured else None
    print(
        f"{tuning} tuning run(s) and {runs} table run(s), each stopped at its iteration budget or after "
        f"{ns.time_cap:g} s of solver time: up to about {_duration(seconds)} of solver time with --jobs {ns.jobs}, "
        "plus building each run's problem and its final checks"
        + (f" (measured for this command: {measured})" if measured else ""),
        flush=True,
    )
    (out / "config.json").write_text(json.dumps({k: v for k, v in vars(ns).items() if not k.startswith("_") and not callable(v)}, indent=2, default=str))
    t0 = time.perf_counter()
    with _executor(ns.jobs) as pool:
        hparams = select_all(ns, out, pool)
        jobs = plan(ns, hparams)
        if not jobs:
            raise InvalidInputError("nothing to run: the data set / method / study filters select no cell")
        rows = run_jobs(jobs, out, pool, progress=not ns.no_progress)
    summary = write_outputs(ns.table, out, jobs, rows)
    print(format_table(ns.table, summary))
    failed = sum(r["failed"] for r in summary)
    print(f"\n{len(jobs)} runs ({failed} failed) in {time.perf_counter() - t0:.1f} s; hyper-parameters: {out / 'hparams.json'}")
    print("wrote:")
    for name in WRITTEN:
        print(f"  {out / name}")
    if os.environ.get("ZOFRAME_DATA") is None and ns.table == "pairwise":
        from zoframe._output import logger

        logger("reproduce").info(
            "LIBSVM files are looked up in ZOFRAME_DATA or the user cache; `zoframe data fetch NAME` downloads them"
        )
    return 0 if failed == 0 else 1
