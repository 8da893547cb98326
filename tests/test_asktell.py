"""Ask/tell (zoframe.Run): same Result as minimize, checked tells, shapes without callables, resume."""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys
import textwrap
from typing import Any

from helpers import load_golden
import numpy as np
import pytest

import zoframe
from zoframe import InvalidInputError, NonFiniteValueError, ProblemShape, Request, Run, ShapeError, Status

golden = load_golden("zoframe_golden_cases_at")


def evaluate(problem: Any, req: Request) -> np.ndarray:
    """What minimize would have computed for this request."""
    if req.kind == "objective":
        return np.asarray(problem.components(req.points, req.indices))
    if req.kind == "constraint":
        return np.asarray(problem.constraints(req.points, req.indices))
    return np.asarray(problem.values(req.points, req.points_y, req.indices))


def drive(run: Run, problem: Any, stop_after: int | None = None) -> int:
    told = 0
    while (req := run.ask()) is not None:
        if stop_after is not None and told == stop_after:
            break
        run.tell(req, evaluate(problem, req))
        told += 1
    return told


@pytest.mark.parametrize("case", sorted(golden.CASES))
def test_ask_tell_gives_the_result_of_minimize_bit_for_bit(case: str) -> None:
    """One solver of each family: zo-sgd, dszog, adszog, zo-gda, zo-sgda, zo-svrg-admm."""
    problem, solver, kwargs = golden.case_arguments(case)
    ref = zoframe.minimize(problem, solver, **kwargs)
    with Run(problem, solver, **kwargs) as run:
        drive(run, problem)
        res = run.result()
    doc, arrays = golden.encode(ref)
    assert golden.differences(res, doc, arrays, exact=True) == []
    assert res.nfev_by_purpose == ref.nfev_by_purpose


def ls_problem() -> zoframe.FiniteSum:
    rng = np.random.default_rng(0)
    A = rng.standard_normal((20, 4))
    b = A @ np.arange(4.0)
    return zoframe.FiniteSum(lambda X, idx: (X @ A[idx].T - b[idx]) ** 2, n=20, x0=np.zeros(4))


def test_requests_say_what_to_compute_and_purposes_are_named() -> None:
    prob = ls_problem()
    run = Run(prob, "zo-sgd", steps="paper", rng=0, max_iter=3, batch=5, q=2)
    req = run.ask()
    assert req is not None and req.kind == "objective" and req.purpose == "monitor"  # the record of x0
    assert req.shape == (1, 20) and req.points.shape == (1, 4) and not req.points.flags.writeable
    assert run.ask() is req  # asking again before telling: the same request
    run.tell(req, evaluate(prob, req))
    req = run.ask()
    assert req is not None and req.purpose == "estimate" and req.shape == (3, 5)
    run.close()


def test_tells_are_checked_like_the_oracle_checks_a_function() -> None:
    prob = ls_problem()
    run = Run(prob, "zo-sgd", steps="paper", rng=0, max_iter=3, batch=5, q=2)
    req = run.ask()
    assert req is not None
    with pytest.raises(ShapeError, match=r"request #0.*shape \(1, 3\)"):
        run.tell(req, np.zeros((1, 3)))
    with pytest.raises(InvalidInputError, match="complex"):
        run.tell(req, np.zeros((1, 20), dtype=complex))
    bad = evaluate(prob, req).copy()
    bad[0, 2] = np.nan
    with pytest.raises(NonFiniteValueError, match=r"row 0 \(index 2\)"):
        run.tell(req, bad)
    run.tell(req, evaluate(prob, req))  # the request is still pending after a refused tell
    with pytest.raises(InvalidInputError, match="tell the values of the request ask"):
        run.tell(req, evaluate(prob, req))  # told twice
    forged = Request(99, "objective", req.points, req.indices)
    with pytest.raises(InvalidInputError, match="request #99"):
        run.tell(forged, evaluate(prob, req))
    run.close()


def test_nonfinite_inf_policy_passes_values_to_the_oracle() -> None:
    prob = ls_problem()
    run = Run(prob, "zo-sgd", steps="paper", rng=0, max_iter=2, batch=5, q=2, nonfinite="inf")
    req = run.ask()
    assert req is not None
    vals = evaluate(prob, req).copy()
    vals[0, 0] = np.nan
    run.tell(req, vals)  # accepted: the oracle turns it into +inf
    drive(run, prob)
    assert run.done and run.result().nit == 2


def test_a_problem_declared_without_callables() -> None:
    """A ProblemShape's run records fun from values it asks for, and matches minimize on the same function."""
    target = np.arange(5.0)

    def f(X: np.ndarray) -> np.ndarray:
        return ((X - target) ** 2).sum(axis=1)

    shape = ProblemShape(kind="finite_sum", dim=5, n=1, x0=np.zeros(5))
    with Run(shape, "zo-sgd", steps="paper", rng=0, max_calls=2000, eta=0.1, q=4) as run:
        purposes = set()
        while (req := run.ask()) is not None:
            purposes.add(req.purpose)
            run.tell(req, f(req.points))  # (k,) for one component
        res = run.result()
    assert purposes == {"estimate", "monitor"} and res.nfev_by_purpose["monitor"] > 0
    assert res.status is Status.BUDGET and res.nfev <= 2000 and "fun" in res.trace.names
    assert res.fun == pytest.approx(float(f(res.x[None])[0]))  # fun of the final point, from told values
    ref = zoframe.minimize(zoframe.FiniteSum(f, x0=np.zeros(5)), "zo-sgd", steps="paper", rng=0, max_calls=2000, eta=0.1, q=4)
    assert np.array_equal(res.x, ref.x) and res.fun == ref.fun and res.nfev == ref.nfev
    assert np.linalg.norm(res.x - target) < 0.1 * np.linalg.norm(target)

    quiet = ProblemShape(kind="finite_sum", dim=5, n=1, x0=np.zeros(5), monitor=False)
    with Run(quiet, "zo-sgd", steps="paper", rng=0, max_calls=2000, eta=0.1, q=4) as run:
        first = run.ask()
        assert first is not None and first.purpose == "estimate"  # no measures: nothing to monitor
        while (req := run.ask()) is not None:
            run.tell(req, f(req.points))
        res = run.result()
    assert res.status is Status.BUDGET and res.nfev <= 2000 and "monitor" not in res.nfev_by_purpose
    assert set(res.trace.names) == {"iteration", "calls", "seconds"} and np.isnan(res.fun)
    assert np.array_equal(res.x_best, res.x)  # without measures the best point is the last recorded
    assert not res.success and "monitor=False" in res.message and "cannot be certified" in res.message


def test_a_constrained_shape_certifies_like_the_problem_object() -> None:
    """The same constrained run through the problem object and through its ProblemShape: same Result."""

    def objective(X: np.ndarray) -> np.ndarray:
        return (X[:, 0] - 2.0) ** 2 + (X[:, 1] - 1.0) ** 2

    def constraints(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.stack([X[:, 0] ** 2 - X[:, 1], X[:, 0] + X[:, 1] - 2.0], axis=1)[:, idx]

    problem = zoframe.Constrained(objective, constraints, m=2, x0=np.array([0.5, 2.5]), bounds=(0.0, 3.0))
    shape = ProblemShape(kind="constrained", dim=2, m=2, x0=problem.x0, feasible_set=problem.feasible_set)
    results = []
    for target in (problem, shape):
        with Run(target, "adszog", rng=0, max_calls=20_000) as run:
            while (req := run.ask()) is not None:
                f = problem.components if req.kind == "objective" else problem.constraints
                run.tell(req, f(req.points, req.indices))
            results.append(run.result())
    by_object, by_shape = results
    assert by_object.success and by_shape.success and by_shape.feasible is True
    assert by_shape.fun == by_object.fun and np.array_equal(by_shape.x, by_object.x)
    assert by_shape.status is by_object.status and by_shape.nfev == by_object.nfev
    with pytest.raises(InvalidInputError, match="monitor must be True or False"):
        ProblemShape(kind="finite_sum", dim=2, x0=np.zeros(2), monitor="yes")  # type: ignore[arg-type]


def test_shapes_are_validated() -> None:
    with pytest.raises(InvalidInputError, match="kind"):
        ProblemShape(kind="sum", dim=2, x0=np.zeros(2))
    with pytest.raises(ShapeError, match=r"x0 must have shape \(3,\)"):
        ProblemShape(kind="finite_sum", dim=3, x0=np.zeros(2))
    with pytest.raises(InvalidInputError, match="m >= 1"):
        ProblemShape(kind="constrained", dim=3, x0=np.zeros(3))
    with pytest.raises(InvalidInputError, match="dim_y"):
        ProblemShape(kind="minimax", dim=3, x0=np.zeros(3))
    shape = ProblemShape(kind="constrained", dim=3, m=4, n=2, x0=np.zeros(3))
    with pytest.raises(zoframe.IncompatibleProblemError):
        Run(shape, "zo-sgd", steps="paper", max_iter=3)
    with pytest.raises(InvalidInputError, match="max_time"):
        Run(shape, "dszog", max_time=1.0)


def test_result_at_any_time_is_a_running_snapshot() -> None:
    prob = ls_problem()
    run = Run(prob, "zo-sgd", steps="paper", rng=0, max_iter=5, batch=5, q=2, record_every=1)
    snap = run.result()
    assert snap.status is Status.RUNNING and snap.nit == 0 and not snap.success
    drive(run, prob, stop_after=7)
    snap = run.result()
    assert snap.status is Status.RUNNING and 0 < snap.nit < 5 and len(snap.trace) == snap.nit + 1
    drive(run, prob)
    final = run.result()
    assert final.status is Status.MAX_ITER and final.nit == 5


SCRIPT = textwrap.dedent(
    """
    import hashlib, json, sys, traceback
    import numpy as np
    import zoframe
    mode, path = sys.argv[1], sys.argv[2]

    def sources():
        # the zoframe code this process ran: a resume is only promised under the same code
        h = hashlib.sha256()
        for name, mod in sorted(sys.modules.items()):
            f = getattr(mod, "__file__", None)
            if name.split(".")[0].startswith("zoframe") and f and f.endswith(".py"):
                h.update(name.encode())
                h.update(open(f, "rb").read())
        return h.hexdigest()

    def main():
        prob = zoframe.default_registry().make_problem("kkt-qp", dim=4, m=6, n=5, seed=2)
        # small_problem=0: the penalty steps (a small problem would start in the precision phase and end sooner)
        kw = dict(max_iter=12, record_every=3, eta_w=0.02, eta_p=0.05, beta=2.0, q=3, M1=2, M2=3, M3=3, small_problem=0)

        def ev(req):
            if req.kind == "objective":
                return prob.components(req.points, req.indices)
            return prob.constraints(req.points, req.indices)

        if mode == "first":
            run = zoframe.Run(prob, "dszog", rng=5, **kw)
            for _ in range(40):
                req = run.ask()
                run.tell(req, ev(req))
            run.ask()  # a request is pending: checkpoint between ask and tell
            run.save(path)
            pending = run.ask().id
            run.close()  # the worker thread ends here, not blocked in a wait at interpreter shutdown
            return {"pending": pending}
        run = zoframe.Run(prob, "dszog", resume=path, **kw)
        req = run.ask()
        first = req.id
        while req is not None:
            run.tell(req, ev(req))
            req = run.ask()
        res = run.result()
        ref = zoframe.minimize(prob, "dszog", rng=5, **kw)
        same = {"x": np.array_equal(res.x, ref.x), "fun": res.fun == ref.fun, "nfev": res.nfev == ref.nfev,
                "nfev_by_purpose": res.nfev_by_purpose == ref.nfev_by_purpose, "message": res.message == ref.message,
                "trace": all(np.array_equal(res.trace[k], ref.trace[k]) for k in ref.trace.names if k != "seconds")}
        return {"first": first, "same": same}

    try:
        out = main()
    except Exception:
        out = {"error": traceback.format_exc()}
    print(json.dumps({**out, "sources": sources()}))
    """
)


def _phase(script: Path, mode: str, path: str) -> dict[str, Any]:
    import json

    # plugin switches of the calling environment do not reach the child (it needs kkt-qp and dszog)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZOFRAME_") or k == "ZOFRAME_DATA"}
    proc = subprocess.run([sys.executable, str(script), mode, path], capture_output=True, text=True, timeout=300,
                          env=env, cwd=script.parent)
    assert proc.returncode == 0, f"{mode} process failed:\n{proc.stdout}\n{proc.stderr}"
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_checkpoint_between_ask_and_tell_resumes_in_another_process(tmp_path: Path) -> None:
    """Saved with a request pending, resumed in a fresh process: that request is asked again and the
    Result is bit-identical to ``minimize`` (wall-clock aside).

    A resume is promised under the same code. The two processes import the working tree seconds apart,
    so a source file edited in between (a shared checkout) would break the replay for a reason that is
    not a defect: each process reports a digest of the zoframe sources it ran, and only a pair that ran
    the same code is judged (one retry when the code changed in between).
    """
    script = tmp_path / "driver.py"
    script.write_text(SCRIPT)
    for attempt in range(2):
        path = str(tmp_path / f"asktell-{attempt}.npz")
        first = _phase(script, "first", path)
        second = _phase(script, "second", path) if "error" not in first else first
        if first["sources"] == second["sources"]:
            break
    assert first["sources"] == second["sources"], "the zoframe sources changed between the two processes, twice"
    assert "error" not in first, f"the first process failed:\n{first['error']}"
    assert "error" not in second, f"the resuming process failed:\n{second['error']}"
    assert second["first"] == first["pending"] == 40  # the pending request is asked again, nothing before it
    assert all(second["same"].values()), f"the resumed run differs from minimize in: {second['same']}"


def test_resume_refuses_other_settings(tmp_path: Path) -> None:
    prob = ls_problem()
    run = Run(prob, "zo-sgd", steps="paper", rng=0, max_iter=4, batch=5, q=2)
    drive(run, prob, stop_after=3)
    path = run.save(tmp_path / "c")
    run.close()
    with pytest.raises(InvalidInputError, match="eta"):
        Run(prob, "zo-sgd", steps="paper", max_iter=4, batch=5, q=2, eta=0.5, resume=path)
    with pytest.raises(InvalidInputError, match="seed"):
        Run(prob, "zo-sgd", steps="paper", rng=1, max_iter=4, batch=5, q=2, resume=path)
    resumed = Run(prob, "zo-sgd", steps="paper", max_iter=4, batch=5, q=2, resume=path)
    drive(resumed, prob)
    ref = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=4, batch=5, q=2)
    assert np.array_equal(resumed.result().x, ref.x)


def test_a_constrained_shape_asks_for_constraints_and_minimax_shapes_for_pairs() -> None:
    shape = ProblemShape(kind="constrained", dim=3, n=2, m=4, x0=np.zeros(3))
    kinds: set[str] = set()
    # small_problem=0: three penalty steps (the precision phase from x0 would converge on this shape in two)
    with Run(shape, "dszog", rng=0, max_iter=3, q=2, M1=2, M2=2, M3=2, small_problem=0) as run:
        while (req := run.ask()) is not None:
            kinds.add(req.kind)
            if req.kind == "constraint":
                vals = req.points.sum(axis=1, keepdims=True) - 1.0 + 0.0 * req.indices  # f_j(x) = sum(x) - 1
            else:
                vals = ((req.points - 1.0) ** 2).sum(axis=1, keepdims=True) + 0.0 * req.indices
            run.tell(req, vals)
        res = run.result()
    assert kinds == {"objective", "constraint"} and res.nit == 3
    assert res.nfev_by_kind["constraint"] > 0 and res.nfev == sum(res.nfev_by_kind.values())
    mm = ProblemShape(kind="minimax", dim=2, dim_y=3, n=1, x0=np.zeros(2), y0=np.zeros(3))
    with Run(mm, "zo-gda", rng=0, max_iter=2, check_concavity=False) as run:
        req = run.ask()
        assert req is not None and req.kind == "minimax" and req.points_y is not None
        assert req.points_y.shape == (req.shape[0], 3)
