"""``minimize`` with the basic solvers, bit for bit against stored references and a plain loop.

The stored references (``tests/data/run_bitidentity.json``) hold, for a set of runs of ``zo-sgd`` and
``zo-signsgd`` (full batch and mini-batches, a dense trace, the default trace and none, the default
and the sphere and coordinate estimators, a callback, a ``max_calls`` stop, a box, ``nonfinite="inf"``, a checkpoint
and its resume), every deterministic field of the :class:`~zoframe.Result`: ``x``, ``x_best``,
``fun``, ``fun_best``, ``nit``, ``nfev``, ``user_calls``, the counts by kind and purpose, the status,
message and success, the measures, the outputs and every trace column but ``seconds``; plus what a
callback saw. Floats are stored as hexadecimal, so the comparison is exact.

The references were written on one machine; matrix products may round differently elsewhere
(another BLAS or CPU). A fixed probe (seeded products through the problem's BLAS paths) is stored
with them: where it differs, floats are compared to ``1e-9`` of their scale instead of exactly, and
not at all in a run whose iterates grow exponentially (``_AMPLIFYING``: its structure, counts and
status still are).
The runs pass ``steps="paper"`` (the papers' fixed steps, bit for bit); the two runs that run away
(``sgd-diverges``, ``sgd-nonfinite``) end DIVERGED at the divergence test of :mod:`zoframe.phases`, and
:func:`test_paper_steps_until_the_divergence_test_match_a_plain_loop` checks their iterates up to there.
Rewrite the references only on purpose::

    python tests/test_run_bitidentity.py --write

Independently of the stored data, :func:`test_zo_sgd_matches_a_plain_loop` checks ``minimize``
bit for bit against a straightforward loop over the oracle and the estimator's ``estimate``.
"""

from __future__ import annotations

from collections.abc import Callable
import json
import math
from pathlib import Path
import sys
from typing import Any
import warnings

import numpy as np
import pytest

import zoframe
from zoframe.estimators import GaussianEstimator, SphereEstimator
from zoframe.oracle import CountingOracle
from zoframe.sets import Box
from zoframe_basic.problems import LeastSquares, Quadratic

_FILE = Path(__file__).resolve().parent / "data" / "run_bitidentity.json"


def _ls() -> LeastSquares:
    return LeastSquares(dim=12, n=150, seed=3)


def _boxed(fun: Callable[..., Any]) -> Any:
    return zoframe.FiniteSum(fun, x0=np.full(6, 0.3), n=40, feasible_set=Box(6, -0.25, 0.5))


def _boxed_fun(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    w = (np.arange(40, dtype=np.float64)[idx] + 1.0) / 40.0
    z = X - 1.0
    return (z * z).sum(axis=1)[:, None] * w[None, :] + np.sin(X[:, :1])


def _runaway(X: np.ndarray) -> np.ndarray:
    return -np.exp(4.0 * X).sum(axis=1)


def _runs(tmp: Path) -> dict[str, Any]:
    """Every case: name -> (result, what a callback saw or the warnings caught, or None)."""
    out: dict[str, Any] = {}
    ls = _ls()
    out["sgd-full"] = (zoframe.minimize(ls, "zo-sgd", steps="paper", rng=1, max_iter=40, record_every=1, eta=0.05), None)
    out["sgd-b10-notrace"] = (zoframe.minimize(ls, "zo-sgd", steps="paper", rng=2, max_iter=300, record_every=0, eta=0.05,
                                               batch=10), None)
    out["sgd-b37-every7"] = (zoframe.minimize(ls, "zo-sgd", steps="paper", rng=3, max_iter=100, record_every=7, eta=0.03, q=4,
                                              mu=1e-4, batch=37), None)
    out["sgd-budget"] = (zoframe.minimize(ls, "zo-sgd", steps="paper", rng=4, max_calls=11 * 20 * 33 + 5, record_every=5,
                                          eta=0.05, batch=20), None)
    seen: list[list[float]] = []

    def cb(info: zoframe.IterationInfo) -> bool:
        m = info.measures
        seen.append([float(info.nit), float(info.calls), float(info.x.sum()),
                     math.nan if m is None else float(m["fun"])])
        return info.nit >= 23

    out["sgd-callback"] = (zoframe.minimize(ls, "zo-sgd", steps="paper", rng=5, max_iter=100, record_every=4, eta=0.05, batch=15,
                                            callback=cb), seen)
    out["sgd-sphere"] = (zoframe.minimize(ls, "zo-sgd", steps="paper", rng=6, max_iter=60, record_every=1, eta=0.01, batch=30,
                                          estimator="sphere",
                                          estimator_params={"q": 3, "mu": 1e-3}), None)
    out["sgd-coordinate"] = (zoframe.minimize(ls, "zo-sgd", steps="paper", rng=7, max_iter=30, record_every=1, eta=0.05, batch=25,
                                              estimator="coordinate"), None)
    out["sgd-gaussian-instance"] = (zoframe.minimize(ls, "zo-sgd", steps="paper", rng=8, max_iter=50, record_every=1, eta=0.05, batch=50,
                                                     estimator=GaussianEstimator(q=6, mu=2e-3)), None)
    out["sgd-box"] = (zoframe.minimize(_boxed(_boxed_fun), "zo-sgd", steps="paper", rng=9, max_iter=80, eta=0.05, batch=8,
                                       record_every=3), None)
    out["sgd-quadratic-inf"] = (zoframe.minimize(Quadratic(dim=8, cond=50.0, seed=1), "zo-sgd", steps="paper", rng=10,
                                                 max_iter=120, record_every=2, eta=0.02, nonfinite="inf"), None)
    with warnings.catch_warnings(record=True) as caught:  # the estimate underflows on the way out
        warnings.simplefilter("always")
        res = zoframe.minimize(Quadratic(dim=5, cond=10.0, seed=2), "zo-sgd", steps="paper", rng=11, max_iter=400, eta=1.5,
                               nonfinite="inf", record_every=0)
    out["sgd-diverges"] = (res, [f"{w.category.__name__}: {w.message}" for w in caught])
    with warnings.catch_warnings(record=True) as caught:  # exp overflows: +inf values, then a NaN iterate
        warnings.simplefilter("always")
        res = zoframe.minimize(zoframe.FiniteSum(_runaway, x0=np.zeros(3)), "zo-sgd", steps="paper", rng=15, max_iter=200, eta=1.0,
                               nonfinite="inf", record_every=10)
    out["sgd-nonfinite"] = (res, sorted({w.category.__name__ for w in caught}))
    out["signsgd"] = (zoframe.minimize(ls, "zo-signsgd", steps="paper", rng=12, max_iter=80, record_every=1, eta=0.01, batch=16),
                      None)
    out["signsgd-decay"] = (zoframe.minimize(ls, "zo-signsgd", steps="paper", rng=13, max_iter=80, eta=0.02, decay=True,
                                             record_every=0), None)
    # the default trace: records at 0, 1, 2, 3, 5, 7, 10, ... and the last iteration
    out["sgd-default-trace"] = (zoframe.minimize(ls, "zo-sgd", steps="paper", rng=16, max_iter=321, eta=0.05, batch=10), None)
    out["sgd-default-trace-budget"] = (zoframe.minimize(ls, "zo-sgd", steps="paper", rng=17, max_calls=11 * 20 * 77 + 5, eta=0.05,
                                                        batch=20), None)
    path = tmp / "ckpt"
    first = zoframe.minimize(ls, "zo-sgd", steps="paper", rng=14, max_iter=30, eta=0.05, batch=12, record_every=6,
                             checkpoint=path, checkpoint_every=10)
    out["sgd-checkpoint-first"] = (first, None)
    out["sgd-checkpoint-resumed"] = (zoframe.minimize(ls, "zo-sgd", steps="paper", max_iter=55, eta=0.05, batch=12,
                                                      record_every=6, resume=path), None)
    return out


def _hex(v: float) -> str:
    return float(v).hex()


def _fields(res: zoframe.Result, seen: Any) -> dict[str, Any]:
    trace = {k: [_hex(v) for v in np.asarray(res.trace[k])] for k in res.trace if k != "seconds"}
    return {
        "x": [_hex(v) for v in res.x],
        "x_best": [_hex(v) for v in res.x_best],
        "fun": _hex(res.fun),
        "fun_best": _hex(res.fun_best),
        "nit": res.nit,
        "nfev": res.nfev,
        "user_calls": res.user_calls,
        "nfev_by_kind": dict(sorted(res.nfev_by_kind.items())),
        "nfev_by_purpose": dict(sorted(res.nfev_by_purpose.items())),
        "status": res.status.name,
        "message": res.message,
        "success": res.success,
        "measures": {k: _hex(v) for k, v in sorted(res.measures.items())},
        "outputs": {k: [_hex(v) for v in np.ravel(a)] for k, a in sorted(res.outputs.items())},
        "trace": trace,
        "seed": res.seed,
        "seen": None if seen is None else [r if isinstance(r, str) else [_hex(v) for v in r] for r in seen],
    }


def _probe() -> list[str]:
    """Seeded products through the paths the problems use (BLAS matrix products, pairwise sums)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((150, 12)) / np.sqrt(12)
    X = rng.standard_normal((11, 12))
    R = X @ A[rng.choice(150, 37, replace=False)].T
    v = rng.standard_normal(12)
    return [_hex(float((R * R).sum())), _hex(float(A.T @ (A @ v) @ v)), _hex(float(np.add.reduce(R, axis=1) @ X[:, 0]))]


def _compute(tmp: Path) -> dict[str, Any]:
    return {"probe": _probe(), "cases": {k: _fields(r, s) for k, (r, s) in _runs(tmp).items()}}


def _close(a: Any, b: Any, exact: bool, where: str) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), where
        for k in a:
            _close(a[k], b[k], exact, f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            _close(u, v, exact, f"{where}[{i}]")
    elif isinstance(a, str) and isinstance(b, str) and (a.startswith(("0x", "-0x")) or a in ("inf", "-inf", "nan")):
        fa, fb = float.fromhex(a), float.fromhex(b)
        if exact or not (math.isfinite(fa) and math.isfinite(fb)):
            assert a == b, f"{where}: {fa!r} != {fb!r}"
        else:
            assert math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-12), f"{where}: {fa!r} != {fb!r}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_runs_match_the_stored_references(tmp_path: Path) -> None:
    stored = json.loads(_FILE.read_text())
    got = _compute(tmp_path)
    exact = got["probe"] == stored["probe"]
    assert sorted(got["cases"]) == sorted(stored["cases"])
    for name in stored["cases"]:
        if not exact and name in _AMPLIFYING:  # floats grow exponentially: compare what is not a float
            _close(_no_floats(got["cases"][name]), _no_floats(stored["cases"][name]), exact, name)
            continue
        _close(got["cases"][name], stored["cases"][name], exact, name)


#: runs whose iterates grow exponentially: on a machine that rounds differently, their floats are not compared
_AMPLIFYING = frozenset({"sgd-diverges", "sgd-nonfinite"})


def _no_floats(doc: Any) -> Any:
    """``doc`` without its floats (hexadecimal strings): the structure, counts, statuses and messages."""
    if isinstance(doc, dict):
        return {k: _no_floats(v) for k, v in doc.items() if k not in ("message", "seen", "notes")}
    if isinstance(doc, list):
        return [_no_floats(v) for v in doc]
    if isinstance(doc, str) and (doc.startswith(("0x", "-0x")) or doc in ("inf", "-inf", "nan")):
        return "<float>"
    return doc


def _plain_zo_sgd(problem: Any, iters: int, eta: float, batch: int | None, est: Any, seed: int) -> np.ndarray:
    """ZO-SGD written out plainly: sample, one ``estimate`` per step, the update."""
    oracle = CountingOracle(problem)
    rng = np.random.default_rng(seed)
    x = np.array(problem.x0, dtype=np.float64, copy=True)
    for _ in range(iters):
        idx = None if batch is None else oracle.sample(batch, rng)
        g = est.estimate(lambda X, idx=idx: oracle.objective(X, idx), x, rng).grad
        x = x - eta * g
    return x


@pytest.mark.parametrize("batch", [None, 1, 10, 149])
@pytest.mark.parametrize("sphere", [False, True])
def test_zo_sgd_matches_a_plain_loop(batch: int | None, sphere: bool) -> None:
    ls = _ls()
    est: Any = SphereEstimator(q=5, mu=1e-3) if sphere else GaussianEstimator(q=10, mu=1e-3)
    x = _plain_zo_sgd(ls, 120, 0.02, batch, est, seed=21)
    res = zoframe.minimize(ls, "zo-sgd", steps="paper", rng=21, max_iter=120, eta=0.02, batch=batch, estimator=est,
                           record_every=0)
    assert np.array_equal(res.x, x)
    if not sphere:  # the default estimator of zo-sgd is gaussian(q, mu)
        res = zoframe.minimize(ls, "zo-sgd", steps="paper", rng=21, max_iter=120, eta=0.02, batch=batch, record_every=0)
        assert np.array_equal(res.x, x)


def test_paper_steps_until_the_divergence_test_match_a_plain_loop() -> None:
    """The run that runs away is the paper's iteration bit for bit until the divergence test stops it."""
    prob = Quadratic(dim=5, cond=10.0, seed=2)
    res = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=11, max_iter=400, eta=1.5, nonfinite="inf",
                           record_every=0)  # fmt: skip
    assert res.status is zoframe.Status.DIVERGED and "diverged at iteration" in res.message
    assert 1 < res.nit < 400 and "exceeds" in res.message
    assert np.array_equal(res.x, _plain_zo_sgd(prob, res.nit, 1.5, None, GaussianEstimator(q=10, mu=1e-3), 11))


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/test_run_bitidentity.py --write")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        data = _compute(Path(d))
    _FILE.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print(f"wrote {_FILE} ({len(data['cases'])} cases)")
