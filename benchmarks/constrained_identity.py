"""``dszog`` / ``adszog`` bit for bit: one digest per run, to compare two versions of the code on one machine.

Each run's digest is a SHA-256 over what a run produces, in the problem's own bits: the iterate after every
iteration (through the callback), ``Result.x``, ``fun``, ``nit``, ``nfev``, ``user_calls``, the evaluations by
kind and by purpose, the status and ``success``, the certificate's verdict, every trace column but the
wall-clock ``seconds``, and every array of ``Result.outputs``. The stop message and the notes are recorded
beside it (hashed separately): their wording may change while the digest may not.

The runs (both solvers each, unless said):

* ``bitid-*``: stored-iterate cases through ``zoframe.minimize`` (pairwise
  breast-cancer, pairwise a9a with 300 samples, fairness D1 with 300 samples; ``steps="paper"`` for 300
  iterations and ``"auto"`` for 150, ``p_form="dense"`` and ``"sparse"``, seeds 0 and 1; the a9a cases need
  ``ZOFRAME_DATA``);
* ``fair-*``: fairness D1 (1000 samples: not small, so the penalty phase, the restoration and the precision
  phase) and ``pair-*``: pairwise breast-cancer with ``max_calls`` (the penalty phase hands over on its share
  of the budget), dense and sparse ``p``;
* ``polytope-*``: the projection onto 3,000 random halfspaces in 8 dimensions with ``small_problem=0`` (the
  penalty phase stationary, the restoration, the precision phase converged and certified);
* ``suite-*``: ``constrained-small`` problems with bounds (hs029, hs064, hs106, hs108, g01) at the suite's
  budget of 2000 full evaluations per dimension, from ``x0`` in the precision phase (their default) and
  with ``small_problem=0``; ``eq-*``: problems with equality constraints (with and without bounds);
* ``handback``: hs106 with ``dszog``, seed 1 (a stalled precision phase hands back to the penalty phase);
* ``max-calls-*``: runs stopped by ``max_calls``; ``max-time-*``: stopped by ``max_time`` under a clock that
  advances one second per step (``zoframe.run._now`` replaced for the run), so that where it stops does not
  depend on the machine's speed;
* ``blowup-*``: ``steps="auto"`` on a problem whose penalised value is unbounded below outside the feasible set:
  from a feasible start the blow-up guard restarts the precision phase from the best feasible sample, from an
  infeasible one the run ends ``DIVERGED``;
* ``paper-restore-*``: ``steps="paper"`` with ``restore_after`` and ``restore_every`` (the restoration phase
  after the penalty steps, feasible snapshots); ``paper-diverged-dszog``: a step too large (``DIVERGED``);
* ``checkpoint-*``: a run stopped at an iteration of each phase with a checkpoint, resumed to the end; the
  resumed Result must be the straight run's (checked here: ``resumed_equal``), and its digest is compared
  across versions;
* ``asktell-*``: the same runs through ``zoframe.Run`` (ask / tell), which must give the ``minimize`` Result
  (``asktell_equal``);
* ``pool-*``: through a ``ProcessPoolExecutor(2)`` with ``chunks=3``, which must give the serial Result
  (``pool_equal``).

Run it on each version and compare the two final lines::

    python benchmarks/constrained_identity.py > new.txt
    (cd OTHER_TREE && PYTHONPATH=... python benchmarks/constrained_identity.py) > old.txt
    python benchmarks/constrained_identity.py --compare old.txt new.txt

``--only PREFIX[,PREFIX]`` runs the runs whose names start so. Prints ONE final JSON line (with ``--compare``:
the runs whose digests, messages or notes differ).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
import contextlib
import hashlib
import json
import os
from pathlib import Path
import platform
import sys
import tempfile
import time
from typing import Any

import numpy as np
import scipy

import zoframe
from zoframe.errors import DataNotFoundError

# ---------------------------------------------------------------------------------------------- problems
_A = np.array([0.3, -0.2, 0.9, 0.4])


def _columns(v: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return v[:, None][:, np.zeros(len(idx), dtype=np.intp)]


def _loose(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return _columns(X[:, 0] - 10.0, idx)


def _sum_one(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return _columns(X.sum(axis=1) - 1.0, idx)


def _circle(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return _columns((X**2).sum(axis=1) - 2.0, idx)


def _projection(X: np.ndarray) -> np.ndarray:
    out: np.ndarray = ((X - _A) ** 2).sum(axis=1)
    return out


def _linear(X: np.ndarray) -> np.ndarray:
    out: np.ndarray = X.sum(axis=1)
    return out


def _cubic(X: np.ndarray) -> np.ndarray:
    out: np.ndarray = -(X[:, 0] ** 3) + X[:, 1] ** 2
    return out


def _two_bounds(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.stack([X[:, 0] - 1.0, X[:, 1] - 5.0], axis=1)[:, idx]
    return out


def blowup_problem(x0: tuple[float, float]) -> zoframe.Constrained:
    """min -x0^3 + x1^2 s.t. x0 <= 1, x1 <= 5: the penalised value is unbounded below outside the feasible set."""
    return zoframe.Constrained(_cubic, _two_bounds, m=2, x0=np.array(x0))


def equality_problems() -> dict[str, Any]:
    """min |x - a|^2 s.t. sum x = 1 (with and without the bounds 0 <= x <= 0.5); min x0 + x1 on the circle |x|^2 = 2."""
    return {
        "eq-simplex": zoframe.Constrained(_projection, _loose, 1, np.zeros(4), equality_fun=_sum_one, m_eq=1),
        "eq-simplex-box": zoframe.Constrained(
            _projection, _loose, 1, np.full(4, 0.25), equality_fun=_sum_one, m_eq=1, bounds=(0.0, 0.5)
        ),
        "eq-circle": zoframe.Constrained(_linear, _loose, 1, np.array([0.5, -2.0]), equality_fun=_circle, m_eq=1),
    }


class Polytope:
    """The projection of a far point onto ``{A x <= 1}`` (a random polytope around 0), picklable."""

    def __init__(self, seed: int = 0, d: int = 8, m: int = 3_000) -> None:
        rng = np.random.default_rng(100 + seed)
        self.A = rng.standard_normal((m, d))
        self.a = 5.0 * rng.standard_normal(d)
        self.d, self.m = d, m

    def objective(self, X: np.ndarray) -> np.ndarray:
        out: np.ndarray = ((X - self.a) ** 2).sum(1)
        return out

    def constraints(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out: np.ndarray = X @ self.A[idx].T - 1.0
        return out

    def problem(self) -> zoframe.Constrained:
        return zoframe.Constrained(self.objective, self.constraints, m=self.m, x0=np.zeros(self.d))


# ---------------------------------------------------------------------------------------------- digests
def _feed(h: Any, obj: Any) -> None:
    """Hash ``obj`` exactly: arrays by dtype, shape and bytes, floats by their bits, mappings by sorted key."""
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        h.update(f"A{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    elif isinstance(obj, (bool, np.bool_)):
        h.update(b"B1" if obj else b"B0")
    elif isinstance(obj, (int, np.integer)):
        h.update(f"I{int(obj)}".encode())
    elif isinstance(obj, (float, np.floating)):
        h.update(b"F" + np.float64(obj).tobytes())
    elif isinstance(obj, str):
        h.update(b"S" + obj.encode())
    elif obj is None:
        h.update(b"N")
    elif isinstance(obj, dict) or hasattr(obj, "items"):
        for k in sorted(obj):
            _feed(h, str(k))
            _feed(h, obj[k])
    elif isinstance(obj, (list, tuple)):
        h.update(f"L{len(obj)}".encode())
        for v in obj:
            _feed(h, v)
    else:
        raise TypeError(f"cannot hash {type(obj).__name__}")


class Iterates:
    """A callback that hashes the iterate after every iteration (and counts them)."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.count = 0

    def __call__(self, info: zoframe.IterationInfo) -> None:
        _feed(self.h, int(info.iteration))
        _feed(self.h, np.asarray(info.x, dtype=np.float64))
        self.count += 1


def digest(res: zoframe.Result, its: Iterates | None) -> dict[str, Any]:
    h = hashlib.sha256()
    cert = res.certificate
    parts: dict[str, Any] = {
        "x": np.asarray(res.x), "fun": float(res.fun), "nit": res.nit, "nfev": res.nfev, "user_calls": res.user_calls,
        "by_kind": dict(res.nfev_by_kind), "by_purpose": dict(res.nfev_by_purpose), "status": res.status.name,
        "success": bool(res.success), "x_best": np.asarray(res.x_best), "fun_best": float(res.fun_best),
        "certificate": None if cert is None else {k: cert[k] for k in ("verdict", "residual") if k in cert},
        "trace": {k: np.asarray(res.trace[k]) for k in res.trace if k != "seconds"},
        "outputs": {k: np.asarray(v) for k, v in res.outputs.items()},
        "iterates": None if its is None else its.h.hexdigest(),
    }  # fmt: skip
    _feed(h, parts)
    return {
        "digest": h.hexdigest(), "status": res.status.name, "nit": res.nit, "nfev": res.nfev, "success": bool(res.success),
        "fun": float(res.fun), "message_sha": hashlib.sha256(res.message.encode()).hexdigest()[:16],
        "message": res.message[:300], "notes": list(res.notes),
        "phases": sorted({int(v) for v in np.asarray(res.trace["phase"]).tolist()}) if "phase" in res.trace else [],
    }  # fmt: skip


def run(problem: Any, solver: str, **kw: Any) -> dict[str, Any]:
    its = Iterates()
    res = zoframe.minimize(problem, solver, callback=its, **kw)
    return digest(res, its)


@contextlib.contextmanager
def one_second_per_step() -> Iterator[None]:
    """``zoframe.run._now`` replaced by a clock that advances one second per call pair (one step)."""
    import zoframe.run as run_mod

    ticks = iter(range(10**9))
    saved = run_mod._now
    run_mod._now = lambda: 0.5 * next(ticks)  # type: ignore[assignment]
    try:
        yield
    finally:
        run_mod._now = saved


# ---------------------------------------------------------------------------------------------- the runs
SOLVERS = ("dszog", "adszog")


def bitidentity_cases() -> Iterator[tuple[str, Callable[[], dict[str, Any]]]]:
    from zoframe_constrained.problems import fairness, pairwise

    problems: dict[str, Callable[[], Any]] = {
        "bc": lambda: pairwise("breast-cancer", seed=0),
        "a9a": lambda: pairwise("a9a", n_samples=300, seed=0),
        "fair": lambda: fairness("D1", n_samples=300, seed=0),
    }
    batches = {"bc": {"M1": 128, "M2": 128, "M3": 128}, "a9a": {"M1": 64, "M2": 64, "M3": 64},
               "fair": {"M1": 64, "M2": 10, "M3": 10}}  # fmt: skip
    base = {"eta_w": 1e-2, "eta_p": 1e-2, "beta": 1.0, "lam": 1e-6, "q": 10, "mu": 1e-3}
    for prob in problems:
        for solver in SOLVERS:
            for steps in ("paper", "auto"):
                for form in ("dense", "sparse"):
                    for seed in (0, 1):
                        params: dict[str, Any] = {**base, **batches[prob], "steps": steps, "p_form": form}
                        if solver == "adszog":
                            params.update(a=0.9, b=0.9, c=1e-8)
                        if steps == "auto":
                            params.update(stall_window=10, M2=None)
                        iters = 300 if steps == "paper" else 150

                        def go(prob: str = prob, solver: str = solver, seed: int = seed, params: dict[str, Any] = params,
                               iters: int = iters) -> dict[str, Any]:  # fmt: skip
                            return run(problems[prob](), solver, rng=seed, max_iter=iters, record_every=7, **params)

                        yield f"bitid-{prob}-{solver}-{steps}-{form}-{seed}", go


def other_cases() -> Iterator[tuple[str, Callable[[], dict[str, Any]]]]:
    from zoframe_constrained.problems import fairness, pairwise
    from zoframe_constrained.suite import HS

    def fair() -> Any:
        return fairness("D1", seed=0)

    def bc() -> Any:
        return pairwise("breast-cancer", seed=0)

    for solver in SOLVERS:
        for form in ("dense", "sparse"):
            yield f"fair-{solver}-{form}", lambda s=solver, f=form: run(fair(), s, rng=0, max_calls=400_000, p_form=f)
            yield f"pair-{solver}-{form}", lambda s=solver, f=form: run(bc(), s, rng=1, max_calls=1_500_000, p_form=f)
        yield f"polytope-{solver}", lambda s=solver: run(Polytope().problem(), s, rng=0, max_calls=300_000,
                                                          small_problem=0, record_every=1)  # fmt: skip
        for name in ("hs029", "hs064", "hs106", "hs108", "g01"):
            tp = HS[name]()
            budget = 2000 * len(tp.x0) * (1 + tp.m)
            yield f"suite-{name}-{solver}", lambda s=solver, tp=tp, b=budget: run(tp.problem(), s, rng=0, max_calls=b)
            yield f"suite-{name}-{solver}-penalty", lambda s=solver, tp=tp, b=budget: run(
                tp.problem(), s, rng=0, max_calls=b, small_problem=0)  # fmt: skip
        for name, prob in equality_problems().items():
            yield f"{name}-{solver}", lambda s=solver, p=prob: run(p, s, rng=0, max_calls=20_000)
        yield f"max-calls-{solver}-auto", lambda s=solver: run(bc(), s, rng=2, max_calls=60_000)
        yield f"max-calls-{solver}-paper", lambda s=solver: run(bc(), s, rng=2, max_calls=60_000, steps="paper")

        def timed(s: str = solver) -> dict[str, Any]:
            with one_second_per_step():
                return run(bc(), s, rng=3, max_time=10.5, max_iter=10**6)

        yield f"max-time-{solver}", timed
        yield f"paper-restore-{solver}", lambda s=solver: run(
            Polytope(1, d=10, m=2000).problem(), s, rng=0, max_iter=400, steps="paper",
            eta_w=0.002 if s == "dszog" else 0.05, beta=1.0 if s == "dszog" else 10.0, restore_after=300, restore_every=100, violation_tol=1e-6)  # fmt: skip
        for tag, start in (("feasible", (0.0, 0.0)), ("infeasible", (3.0, 0.0))):
            yield f"blowup-{tag}-{solver}", lambda s=solver, x0=start: run(
                blowup_problem(x0), s, rng=0, max_calls=200_000, small_problem=0, record_every=1)  # fmt: skip
    yield "paper-diverged-dszog", lambda: run(
        Polytope(1, d=10, m=2000).problem(), "dszog", rng=0, max_iter=400, steps="paper", eta_w=0.05, beta=10.0)
    tp = HS["hs106"]()
    yield "handback", lambda: run(tp.problem(), "dszog", rng=1, max_calls=2000 * len(tp.x0) * (1 + tp.m), record_every=0)
    for solver in SOLVERS:
        yield f"checkpoint-{solver}", lambda s=solver: checkpointed(s)
        yield f"asktell-{solver}", lambda s=solver: asktell(s)
        yield f"pool-{solver}", lambda s=solver: pooled(s)


def _same(a: zoframe.Result, b: zoframe.Result) -> bool:
    return digest(a, None)["digest"] == digest(b, None)["digest"] and a.message == b.message


def checkpointed(solver: str) -> dict[str, Any]:
    """The polytope run stopped (with a checkpoint) at iterations in the penalty phase, at the hand-over, in the
    restoration and in the precision phase, and resumed to the straight run's end."""
    prob = Polytope().problem()
    kw: dict[str, Any] = {"max_calls": 300_000, "small_problem": 0, "record_every": 1}
    straight = zoframe.minimize(prob, solver, rng=0, **kw)
    phases = np.asarray(straight.trace["phase"])
    iters = np.asarray(straight.trace["iteration"])
    firsts = {int(iters[np.flatnonzero(phases == code)[0]]) for code in np.unique(phases)}  # each phase's first record
    stops = sorted({k for k in firsts | {k + 1 for k in firsts} | {5} if 1 <= k < straight.nit})
    out: dict[str, Any] = {"stops": stops, "resumed_equal": []}
    h = hashlib.sha256()
    with tempfile.TemporaryDirectory() as tmp:
        for k in stops:
            path = Path(tmp) / f"ck{k}"
            zoframe.minimize(prob, solver, rng=0, checkpoint=path, **{**kw, "max_iter": k})
            resumed = zoframe.minimize(prob, solver, resume=path, **kw)
            out["resumed_equal"].append(_same(straight, resumed))
            _feed(h, digest(resumed, None)["digest"])
    return {**digest(straight, None), "resumed_digest": h.hexdigest(), **out}


def _tell(problem: Any, req: Any) -> np.ndarray:
    if req.kind == "objective":
        return np.asarray(problem.components(req.points, req.indices))
    if req.kind == "equality":
        return np.asarray(problem.equalities(req.points, req.indices))
    return np.asarray(problem.constraints(req.points, req.indices))


def asktell(solver: str) -> dict[str, Any]:
    """The polytope run and an equality-constrained one through ask / tell."""
    cases = [(Polytope().problem(), {"max_calls": 300_000, "small_problem": 0, "rng": 0}),
             (equality_problems()["eq-simplex-box"], {"max_calls": 20_000, "rng": 0})]  # fmt: skip
    h = hashlib.sha256()
    equal = []
    for prob, kw in cases:
        ref = zoframe.minimize(prob, solver, **kw)
        with zoframe.Run(prob, solver, **kw) as r:
            while (req := r.ask()) is not None:
                r.tell(req, _tell(prob, req))
            res = r.result()
        equal.append(_same(ref, res))
        _feed(h, digest(res, None)["digest"])
    return {"digest": h.hexdigest(), "asktell_equal": equal}


def pooled(solver: str) -> dict[str, Any]:
    """Pairwise breast-cancer (``steps="auto"``, 30 iterations) and the polytope through a process pool with chunks."""
    from zoframe_constrained.problems import pairwise

    cases = [(pairwise("breast-cancer", seed=0), {"max_iter": 30, "rng": 4}),
             (Polytope().problem(), {"max_calls": 300_000, "small_problem": 0, "rng": 0})]  # fmt: skip
    h = hashlib.sha256()
    equal = []
    with ProcessPoolExecutor(2) as ex:
        for prob, kw in cases:
            serial = zoframe.minimize(prob, solver, block_rows=64, **kw)
            par = zoframe.minimize(prob, solver, executor=ex, chunks=3, block_rows=64, **kw)
            equal.append(_same(serial, par))
            _feed(h, digest(par, None)["digest"])
    return {"digest": h.hexdigest(), "pool_equal": equal}


# ---------------------------------------------------------------------------------------------- main
def compare(old_file: str, new_file: str) -> dict[str, Any]:
    def last(path: str) -> dict[str, Any]:
        line = [ln for ln in Path(path).read_text().splitlines() if ln.strip().startswith("{")][-1]
        return dict(json.loads(line))

    a, b = last(old_file)["runs"], last(new_file)["runs"]
    keys = sorted(set(a) | set(b))
    differ = [k for k in keys if k not in a or k not in b or a[k].get("digest") != b[k].get("digest")
              or a[k].get("resumed_digest") != b[k].get("resumed_digest")]  # fmt: skip
    messages = [k for k in keys if k in a and k in b and a[k].get("message_sha") != b[k].get("message_sha")]
    notes = [k for k in keys if k in a and k in b and a[k].get("notes") != b[k].get("notes")]
    skipped = [k for k in keys if "skipped" in a.get(k, {}) or "skipped" in b.get(k, {})]
    return {"runs": len(keys), "same_digest": len(keys) - len(differ), "digest_differs": differ,
            "message_differs": messages, "notes_differ": len(notes), "skipped": skipped}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated prefixes of run names")
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"), help="compare the final lines of two outputs")
    args = ap.parse_args()
    if args.compare:
        print(json.dumps(compare(*args.compare)))
        return
    prefixes = tuple(p for p in args.only.split(",") if p)
    t0 = time.perf_counter()
    runs: dict[str, Any] = {}
    for name, go in [*bitidentity_cases(), *other_cases()]:
        if prefixes and not name.startswith(prefixes):
            continue
        t = time.perf_counter()
        try:
            runs[name] = go()
        except DataNotFoundError as exc:
            runs[name] = {"skipped": str(exc)[:200]}
        print(f"{name}: {runs[name].get('status', '-')} {runs[name].get('digest', '')[:16]} "
              f"({time.perf_counter() - t:.1f} s)", file=sys.stderr, flush=True)  # fmt: skip
    internal = [all(v) for r in runs.values() for k, v in r.items() if k.endswith("_equal")]
    print(json.dumps({
        "runs": runs, "all_internal_equal": all(internal),
        "seconds": round(time.perf_counter() - t0, 1), "machine": platform.machine(), "python": platform.python_version(),
        "numpy": np.__version__, "scipy": scipy.__version__, "cpus": os.cpu_count(), "zoframe": zoframe.__file__,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
