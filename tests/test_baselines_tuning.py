"""Hyper-parameter selection on the validation split: reproducible across executors, picks the best."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
import math

import pytest

import zoframe
from zoframe.errors import InvalidInputError, UnknownNameError
from zoframe_constrained.tuning import (
    PAPER_GRIDS,
    MeasureScore,
    ProblemRef,
    expand_grid,
    select_hyperparameters,
)

PROBLEM = ProblemRef("fairness", {"dataset": "D1", "n_samples": 400, "seed": 0})
GRID = {"eta_w": (1e-2, 1e-4), "beta": (0.1, 10.0)}
FIXED = {"M1": 32, "M2": 10, "M3": 10, "q": 5, "steps": "paper"}  # the papers' grids tune the fixed steps
BUDGET = {"max_iter": 150}


def _select(executor: object = None) -> object:
    return select_hyperparameters(PROBLEM, "adszog", GRID, fixed=FIXED, budget=BUDGET, seed=3, executor=executor)  # type: ignore[arg-type]


def test_selection_is_the_same_in_process_on_threads_and_on_processes() -> None:
    base = _select()
    with ThreadPoolExecutor(2) as pool:
        threads = _select(pool)
    with ProcessPoolExecutor(2) as pool:
        procs = _select(pool)
    for other in (threads, procs):
        assert other.best == base.best  # type: ignore[attr-defined]
        assert [r["scores"] for r in other.table] == [r["scores"] for r in base.table]  # type: ignore[attr-defined]
        assert [t.seed for t in other.trials] == [t.seed for t in base.trials]  # type: ignore[attr-defined]


def test_best_is_the_top_row_and_reproducible() -> None:
    sel = select_hyperparameters(PROBLEM, "adszog", GRID, fixed=FIXED, budget=BUDGET, seed=0, repeats=2)
    assert len(sel.table) == 4 and len(sel.trials) == 8
    assert sel.best_score == max(row["score"] for row in sel.table)
    best_row = next(row for row in sel.table if row["score"] == sel.best_score)
    assert {k: best_row[k] for k in GRID} == {k: sel.best[k] for k in GRID}
    assert sel.best["M1"] == 32  # fixed parameters are part of the answer
    # the selected run is reproducible: the same parameters and seed give the same score
    first = next(t for t in sel.trials if t.repeat == 0 and all(t.params[k] == sel.best[k] for k in GRID))
    again = zoframe.minimize(PROBLEM(), "adszog", rng=first.seed, record_every=0, **BUDGET, **sel.best)
    assert again.measures == first.measures


def test_a_custom_score_on_the_objective() -> None:
    """Scored by the training objective, 150 steps of 1e-2 beat 150 steps of 1e-4 from w = 0."""

    def neg_objective(result: object, problem: object) -> float:
        return -float(result.measures["fun"])  # type: ignore[attr-defined]

    sel = select_hyperparameters(PROBLEM, "adszog", {"eta_w": (1e-4, 1e-2)}, fixed=FIXED, budget=BUDGET, score=neg_objective)
    assert sel.best["eta_w"] == 1e-2, sel.table
    assert sel.table[1]["score"] > sel.table[0]["score"] + 0.05


def test_seeds_differ_between_repeats_and_grid_points() -> None:
    sel = select_hyperparameters(PROBLEM, "adszog", {"eta_w": (1e-2,)}, fixed=FIXED, budget={"max_iter": 5}, repeats=3)
    assert len({t.seed for t in sel.trials}) == 3


def test_feasibility_filter_and_missing_measure() -> None:
    strict = MeasureScore("val_accuracy", feasibility_tol=-1.0)  # nothing is that feasible
    sel = select_hyperparameters(PROBLEM, "adszog", {"eta_w": (1e-2,)}, fixed=FIXED, budget={"max_iter": 5}, score=strict)
    assert sel.best_score == -math.inf
    with pytest.raises(InvalidInputError, match="no measure 'nope'"):
        select_hyperparameters(PROBLEM, "adszog", {"eta_w": (1e-2,)}, fixed=FIXED, budget={"max_iter": 2}, score=MeasureScore("nope"))


def test_bad_input() -> None:
    with pytest.raises(UnknownNameError):
        select_hyperparameters(PROBLEM, "adszogg", GRID)
    with pytest.raises(InvalidInputError, match="non-empty sequence"):
        select_hyperparameters(PROBLEM, "adszog", {"eta_w": ()})
    with pytest.raises(InvalidInputError, match="both in the grid and fixed"):
        select_hyperparameters(PROBLEM, "adszog", GRID, fixed={"beta": 1.0})
    with pytest.raises(InvalidInputError, match="budget"):
        select_hyperparameters(PROBLEM, "adszog", GRID, budget={"record_every": 3})
    with pytest.raises(InvalidInputError, match="repeats"):
        select_hyperparameters(PROBLEM, "adszog", GRID, repeats=0)


def test_paper_grids() -> None:
    assert len(expand_grid(PAPER_GRIDS["adszog"])) == 3**5
    assert len(expand_grid(PAPER_GRIDS["zopsgd"])) == 3
    assert expand_grid({"a": (1, 2), "b": (3, 4)})[1] == {"a": 1, "b": 4}
