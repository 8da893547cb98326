"""``unobserved_steps()``: :func:`zoframe.minimize` runs a solver as that copy (whatever reads the run between steps:
the loop drives it, see :class:`zoframe.run.RunLoop`); ask/tell and a watched ``build_run`` keep the solver as given."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pytest

import zoframe
from zoframe.asktell import Run
from zoframe.driver import build_run
from zoframe.oracle import CountingOracle
from zoframe_basic.problems import LeastSquares


@dataclass(frozen=True)
class _State:
    x: np.ndarray


INITS: list[bool] = []  # the flag of every solver whose init() ran


@dataclass(frozen=True)
class Flagged:
    """A solver with ``unobserved_steps()``: its copy says it was made (no other difference)."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})
    eta: float = 0.05
    unobserved: bool = field(default=False, init=False, compare=False)

    def unobserved_steps(self) -> Flagged:
        out = Flagged(self.eta)
        object.__setattr__(out, "unobserved", True)
        return out

    def init(self, oracle: CountingOracle, x0: np.ndarray, rng: np.random.Generator) -> _State:
        INITS.append(self.unobserved)
        return _State(np.array(x0, dtype=np.float64, copy=True))

    def step(self, oracle: CountingOracle, state: _State, rng: np.random.Generator) -> _State:
        idx = oracle.sample(4, rng)
        X = state.x + 1e-3 * rng.standard_normal((3, state.x.shape[0]))
        vals = oracle.objective(np.vstack([state.x, X]), idx)
        g = ((vals[1:] - vals[0]).mean(axis=1) / 1e-3) @ (X - state.x) / 3e-3
        return _State(state.x - self.eta * g)


def _prob() -> LeastSquares:
    return LeastSquares(dim=5, n=30, seed=2)


def _solver_of(built: Any) -> Flagged:
    solver: Flagged = built.loop.solver
    return solver


def test_minimize_unwatched_and_unobserved_runs_the_copy() -> None:
    built = build_run(_prob(), Flagged(), rng=0, max_calls=600, record_every=0, watched=False)
    assert _solver_of(built).unobserved
    res = built.run()
    ref = zoframe.minimize(_prob(), Flagged(), rng=0, max_calls=600, record_every=0)
    assert INITS[-2:] == [True, True]  # minimize made the same choice
    watched = build_run(_prob(), Flagged(), rng=0, max_calls=600, record_every=0).run()
    assert INITS[-1] is False
    for other in (ref, watched):
        assert np.array_equal(res.x, other.x) and res.nfev == other.nfev and res.nit == other.nit
        assert res.nfev_by_purpose == other.nfev_by_purpose and res.message == other.message


@pytest.mark.parametrize(
    "kw",
    [
        {"max_iter": 5},
        {"max_time": 60.0},
        {"record_every": 2},
        {"callback": lambda info: None},
        {"progress": True},
        {"nonfinite": "inf"},
        {"checkpoint": "CKPT"},
    ],
)
def test_what_reads_the_run_between_steps_runs_the_copy_too(kw: dict[str, Any], tmp_path: Any) -> None:
    args: dict[str, Any] = {"rng": 0, "max_calls": 600, "record_every": 0, **kw}
    if args.get("checkpoint") == "CKPT":
        args["checkpoint"] = str(tmp_path / "ckpt")
    assert _solver_of(build_run(_prob(), Flagged(), watched=False, **args)).unobserved
    assert not _solver_of(build_run(_prob(), Flagged(), watched=True, **args)).unobserved


def test_build_run_is_watched_by_default_and_ask_tell_keeps_the_solver() -> None:
    assert not _solver_of(build_run(_prob(), Flagged(), rng=0, max_calls=600, record_every=0)).unobserved
    with Run(_prob(), Flagged(), rng=0, max_calls=60, record_every=0) as run:
        assert not _solver_of(run._built).unobserved
