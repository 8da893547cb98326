"""Hyper-parameter selection on a validation split, over a grid, in parallel and reproducibly.

The DSZOG papers choose every method's hyper-parameters "on the validation sets" from small grids
(ICML 2022, Section 6.2): step sizes from ``{1e-2, 1e-3, 1e-4}``, the penalty ``beta`` from
``{0.1, 1, 10}``, ``a`` and ``b`` from ``{0.1, 0.5, 0.9}``. :func:`select_hyperparameters` runs
a solver at every grid point (and over ``repeats`` seeds), scores each run with a function of the
result and the problem (default: the problem's ``val_accuracy`` measure at the final iterate),
and returns the best point and the whole table::

    from zoframe_constrained.tuning import ProblemRef, select_hyperparameters, PAPER_GRIDS

    sel = select_hyperparameters(ProblemRef("fairness", {"dataset": "D1"}), "adszog",
                                 PAPER_GRIDS["adszog"], budget={"max_iter": 2000}, seed=0)
    sel.best, sel.best_score, sel.table[0]

Reproducibility: the run of grid point ``g`` and repeat ``r`` gets the seed
``SeedSequence([seed, g, r])``, whatever executor runs it, and the table is assembled in grid
order, so the selection is identical in-process, on a thread pool, on a process pool or on a Dask
``Client.get_executor()`` (when the budget is in iterations or oracle calls; a ``max_time``
budget depends on the machine's speed). Ties go to the earlier grid point. Runs go to any
:class:`concurrent.futures.Executor`; for a process pool, pass a picklable problem (a
:class:`ProblemRef`, or a module-level factory) and a picklable score (:class:`MeasureScore`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
import itertools
import math
import time
from typing import Any

import numpy as np

from zoframe.driver import RunFailedError, minimize
from zoframe.errors import InvalidInputError
from zoframe.registry import default_registry
from zoframe.result import Result

__all__ = [
    "PAPER_GRIDS",
    "MeasureScore",
    "ProblemRef",
    "Selection",
    "Trial",
    "expand_grid",
    "select_hyperparameters",
]

_ETA = (1e-2, 1e-3, 1e-4)
_BETA = (0.1, 1.0, 10.0)
_AB = (0.1, 0.5, 0.9)

#: The grids of ICML 2022 Section 6.2 ("learning rates of all the methods are chosen from
#: {0.01, 0.001, 0.0001}"; beta, a, b for DSZOG). Both step sizes of (A)DSZOG use the learning-rate grid.
PAPER_GRIDS: dict[str, dict[str, tuple[float, ...]]] = {
    "adszog": {"eta_w": _ETA, "eta_p": _ETA, "beta": _BETA, "a": _AB, "b": _AB},
    "dszog": {"eta_w": _ETA, "eta_p": _ETA, "beta": _BETA},
    "zopsgd": {"eta": _ETA},
    "zoscgd": {"gamma": _ETA},
    "acc-zomda": {"gamma": _ETA},
    "acc-szofw": {"eta": _ETA},
}


@dataclass(frozen=True)
class ProblemRef:
    """A registered problem by name and keyword arguments: picklable, built where it runs."""

    name: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self) -> Any:
        return default_registry().make_problem(self.name, **dict(self.kwargs))


@dataclass(frozen=True)
class MeasureScore:
    """Score a run by one of the problem's measures at the final iterate (default ``val_accuracy``).

    With ``feasibility_tol`` set, a run whose ``max_violation`` exceeds it scores ``-inf``.
    """

    measure: str = "val_accuracy"
    feasibility_tol: float | None = None

    def __call__(self, result: Result, problem: Any) -> float:
        if self.measure not in result.measures:
            raise InvalidInputError(
                f"the problem reports no measure {self.measure!r} (it reports {sorted(result.measures)}); "
                "pass a score function or another measure name"
            )
        if self.feasibility_tol is not None and result.measures.get("max_violation", 0.0) > self.feasibility_tol:
            return -math.inf
        return float(result.measures[self.measure])


@dataclass(frozen=True)
class Trial:
    """One run of the grid: its parameters, repeat, seed, score and final measures."""

    index: int
    repeat: int
    params: Mapping[str, Any]
    seed: int
    score: float
    measures: Mapping[str, float]
    seconds: float
    status: str


@dataclass(frozen=True)
class Selection:
    """The outcome of :func:`select_hyperparameters`.

    ``table`` has one row per grid point, in grid order: the parameters, ``score`` (mean over the
    repeats), ``score_std`` and ``scores``; ``trials`` holds every run.
    """

    solver: str
    best: Mapping[str, Any]
    best_score: float
    table: Sequence[Mapping[str, Any]]
    trials: Sequence[Trial]


def expand_grid(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """All combinations of a grid, in a fixed order (the last key varies fastest)."""
    if not grid:
        return [{}]
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
            raise InvalidInputError(f"grid[{key!r}] must be a non-empty sequence of values, got {values!r}")
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def _seed_of(seed: int, index: int, repeat: int) -> int:
    return int(np.random.SeedSequence([seed, index, repeat]).generate_state(1)[0])


def _run_trial(
    problem: Any,
    solver: str,
    params: Mapping[str, Any],
    budget: Mapping[str, Any],
    score: Callable[[Result, Any], float],
    index: int,
    repeat: int,
    seed: int,
) -> Trial:
    prob = problem() if callable(problem) and not hasattr(problem, "kind") else problem
    t0 = time.perf_counter()
    try:
        res = minimize(prob, solver, rng=seed, record_every=0, **dict(budget), **dict(params))
    except RunFailedError as exc:  # a diverging grid point scores -inf, the search goes on
        res = exc.result
        value = -math.inf
    else:
        value = float(score(res, prob))
        value = value if math.isfinite(value) else -math.inf
    return Trial(
        index=index,
        repeat=repeat,
        params=dict(params),
        seed=seed,
        score=value,
        measures=dict(res.measures),
        seconds=time.perf_counter() - t0,
        status=res.status.name,
    )


def select_hyperparameters(
    problem: Any,
    solver: str,
    grid: Mapping[str, Sequence[Any]],
    *,
    score: Callable[[Result, Any], float] | None = None,
    budget: Mapping[str, Any] | None = None,
    fixed: Mapping[str, Any] | None = None,
    repeats: int = 1,
    seed: int = 0,
    executor: Executor | None = None,
    progress: Callable[[Trial], None] | None = None,
) -> Selection:
    """Run ``solver`` at every grid point and pick the best by ``score`` (higher is better).

    Parameters
    ----------
    problem:
        a problem, or a zero-argument factory (e.g. :class:`ProblemRef`) called in each run.
    solver:
        a registered solver name.
    grid:
        ``{parameter: values}``; every combination is tried (``expand_grid``).
    score:
        ``score(result, problem) -> float`` on the validation split (default
        ``MeasureScore("val_accuracy")``); runs that fail or score NaN count as ``-inf``.
    budget:
        keyword budgets of :func:`zoframe.minimize` (default ``{"max_iter": 1000}``).
    fixed:
        hyper-parameters shared by every run (batch sizes, ...).
    repeats:
        runs per grid point (different seeds); the mean score decides.
    seed:
        base seed; the run of point ``g``, repeat ``r`` uses ``SeedSequence([seed, g, r])``.
    executor:
        a :class:`concurrent.futures.Executor` for the runs (``None``: in this process).
    progress:
        called with each :class:`Trial` as it completes, in grid order.
    """
    if not isinstance(solver, str):
        raise InvalidInputError("solver must be a registered solver name (a string)")
    default_registry().solver(solver)  # unknown names fail here, with suggestions
    if not isinstance(repeats, int) or repeats < 1:
        raise InvalidInputError(f"repeats must be a positive integer, got {repeats!r}")
    points = expand_grid(grid)
    overlap = set(grid) & set(fixed or {})
    if overlap:
        raise InvalidInputError(f"parameters {sorted(overlap)} are both in the grid and fixed; keep them in one place")
    bud = dict(budget) if budget is not None else {"max_iter": 1000}
    if not any(k in bud for k in ("max_iter", "max_calls", "max_time")):
        raise InvalidInputError("budget needs max_iter, max_calls or max_time")
    scorer: Callable[[Result, Any], float] = score if score is not None else MeasureScore()
    jobs = [
        (g, r, {**(fixed or {}), **pt}, _seed_of(seed, g, r))
        for g, pt in enumerate(points)
        for r in range(repeats)
    ]
    trials: list[Trial] = []
    if executor is None:
        for g, r, params, s in jobs:
            trial = _run_trial(problem, solver, params, bud, scorer, g, r, s)
            trials.append(trial)
            if progress is not None:
                progress(trial)
    else:
        futures = [executor.submit(_run_trial, problem, solver, params, bud, scorer, g, r, s) for g, r, params, s in jobs]
        for fut in futures:  # in submission (grid) order: the table does not depend on the executor
            trial = fut.result()
            trials.append(trial)
            if progress is not None:
                progress(trial)
    table: list[dict[str, Any]] = []
    for g, pt in enumerate(points):
        scores = [t.score for t in trials if t.index == g]
        finite = [v for v in scores if math.isfinite(v)]
        mean = float(np.mean(scores)) if len(finite) == len(scores) else -math.inf
        std = float(np.std(finite)) if finite else math.nan
        table.append({**pt, "score": mean, "score_std": std, "scores": scores})
    best_row = max(range(len(table)), key=lambda i: (table[i]["score"], -i))
    best = {**(fixed or {}), **points[best_row]}
    return Selection(solver=solver, best=best, best_score=float(table[best_row]["score"]), table=table, trials=trials)
