"""The optional compiled kernel (``zoframe[fast]``, numba) against the numpy code.

The switch (``ZOFRAME_KERNEL``) is tested everywhere; the kernel itself only where numba is installed
(skipped otherwise, with the reason). With numba, both paths run in one process (``simplex._K`` set
to the kernel or to ``None``): the sampling gives the same indices bit for bit, the iterates of 100
steps agree to 1e-12 relative on real problems, and long runs agree in the median over 10 seeds.
"""

from __future__ import annotations

from collections.abc import Callable
import importlib.util
from typing import Any, cast

import numpy as np
import pytest

import zoframe
from zoframe.oracle import CountingOracle
from zoframe_constrained import _kernels, simplex
from zoframe_constrained.problems import fairness, pairwise
from zoframe_constrained.solvers import ADSZOG, DSZOG

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed (pip install 'zoframe[fast]')")
K: Any = _kernels._Lazy() if HAVE_NUMBA else None


# ---------------------------------------------------------------------- the switch (with or without numba)
@pytest.mark.parametrize("value", ["numpy", "NumPy", " numpy "])
def test_numpy_turns_the_kernel_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(_kernels.ENV, value)
    assert _kernels.mode() == "numpy"
    assert _kernels.kernel() is None


def test_auto_follows_the_installation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_kernels.ENV, raising=False)
    assert _kernels.mode() == ("numba" if HAVE_NUMBA else "numpy")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)  # as without numba
    assert _kernels.mode() == "numpy"
    assert _kernels.kernel() is None


def test_numba_required_but_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_kernels.ENV, "numba")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(_kernels.KernelError, match=r"requires numba.*zoframe\[fast\]"):
        _kernels.mode()


def test_unknown_value_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_kernels.ENV, "cuda")
    with pytest.raises(_kernels.KernelError, match="not one of auto, numpy, numba"):
        _kernels.mode()


# ---------------------------------------------------------------------- the kernel's functions
def _sparse_forms(rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray, float, int]]:
    """Floor + support forms: a zero floor, a small and a large floor mass, an empty support, the support
    at both ends, single entries."""
    forms = []
    for m, k, floor_mass in [(1000, 50, 0.0), (1000, 50, 1e-3), (1000, 50, 0.7), (20000, 300, 0.05),
                             (100, 0, 1.0), (50, 1, 0.5), (10, 10, 0.0), (5000, 2, 0.999)]:  # fmt: skip
        support = np.sort(rng.choice(m, size=k, replace=False)).astype(np.intp)
        if k >= 2:
            support[0], support[-1] = 0, m - 1
        floor = floor_mass / m if k < m else 0.0
        values = rng.random(k) ** 4 + floor
        values *= (1.0 - floor * (m - k)) / values.sum() if k else 1.0
        forms.append((support, values, floor, m))
    return forms


@needs_numba
def test_sample_sparse_same_indices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simplex, "_K", None)  # simplex.* is the numpy code
    rng = np.random.default_rng(1)
    for support, values, floor, m in _sparse_forms(rng):
        u = rng.random(4000)
        u[:3] = [0.0, np.nextafter(1.0, 0.0), 0.5]
        ref = simplex.sample_sparse(support, values, floor, m, u)
        got = K.sample_sparse(support, values, floor, m, u)
        assert got.dtype == ref.dtype == np.intp
        np.testing.assert_array_equal(got, ref)


# ---------------------------------------------------------------------- iterates, both paths in one process
def _run(solver: Any, prob: Any, seed: int, steps: int, kernel: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(simplex, "_K", kernel)
    oracle = CountingOracle(prob)
    rng = np.random.default_rng(seed)
    state = solver.init(oracle, np.asarray(prob.x0, dtype=np.float64), rng)
    for _ in range(steps):
        state = solver.step(oracle, state, rng)
    return state, oracle


def _close(a: np.ndarray, b: np.ndarray, rel: float) -> bool:
    scale = max(float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0)), 1e-300)
    return a.shape == b.shape and float(np.max(np.abs(a - b), initial=0.0)) <= rel * scale


_PROBLEMS: dict[str, Any] = {
    "breast-cancer": lambda: pairwise("breast-cancer", seed=0),
    "fairness-D1": lambda: fairness("D1", seed=0),
}


@needs_numba
@pytest.mark.parametrize("prob_name", sorted(_PROBLEMS))
@pytest.mark.parametrize("solver_name", ["adszog", "dszog"])
@pytest.mark.parametrize("steps", ["paper", "auto"])
def test_iterates_agree_over_100_steps(prob_name: str, solver_name: str, steps: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    prob = _PROBLEMS[prob_name]()
    cls = ADSZOG if solver_name == "adszog" else DSZOG
    solver = cls(steps=cast(Any, steps), p_form="sparse")  # the form the kernel compiles (fairness: m = 40)
    for seed in (0, 1):
        ref, ref_oracle = _run(solver, prob, seed, 100, None, monkeypatch)
        got, got_oracle = _run(solver, prob, seed, 100, K, monkeypatch)
        assert (got_oracle.calls, got_oracle.user_calls) == (ref_oracle.calls, ref_oracle.user_calls)
        dense: list[Callable[[Any], Any]] = [lambda s: s.x, lambda s: solver.outputs(s)["p"]]
        if solver_name == "adszog":
            dense.append(lambda s: s.z_w)
        for field in dense:
            assert _close(np.asarray(field(got), float), np.asarray(field(ref), float), 1e-12)


@needs_numba
@pytest.mark.slow
@pytest.mark.parametrize("solver_name", ["adszog", "dszog"])
def test_long_runs_agree_in_the_median(solver_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Median final objective and max violation over 10 seeds, 3000 steps, breast-cancer pairwise:
    within 1e-6 relative (objective) and 1e-6 absolute (violation) of the numpy path's."""
    prob = pairwise("breast-cancer", seed=0)
    cls = ADSZOG if solver_name == "adszog" else DSZOG
    solver = cls(steps="paper")
    med: dict[str, list[float]] = {"f": [], "v": []}
    figures: dict[str, tuple[float, float]] = {}
    for name, kernel in [("numpy", None), ("numba", K)]:
        f0, viol = [], []
        for seed in range(10):
            state, _ = _run(solver, prob, seed, 3000, kernel, monkeypatch)
            x = np.asarray(state.x, dtype=np.float64)
            f0.append(float(np.mean(prob.components(x[None, :], np.arange(prob.n, dtype=np.intp)))))
            viol.append(prob.violations(x)["max_violation"])
        figures[name] = (float(np.median(f0)), float(np.median(viol)))
        med["f"].append(figures[name][0])
        med["v"].append(figures[name][1])
    assert abs(med["f"][0] - med["f"][1]) <= 1e-6 * abs(med["f"][0]), figures
    assert abs(med["v"][0] - med["v"][1]) <= 1e-6, figures


# ---------------------------------------------------------------------- numba installed but not importable
def test_broken_numba_falls_back_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto``: the first kernel call warns and the numpy code takes over, with its result."""
    import sys

    monkeypatch.setitem(sys.modules, "zoframe_constrained._kernels_numba", None)  # its import now fails
    support, values = np.array([3, 7], dtype=np.intp), np.array([0.4, 0.5])
    u = np.random.default_rng(5).random(64)
    monkeypatch.setattr(simplex, "_K", None)
    ref = simplex.sample_sparse(support, values, 0.001, 102, u)
    monkeypatch.setattr(simplex, "_K", _kernels._Lazy(required=False))
    with pytest.warns(RuntimeWarning, match="could not be imported.*numpy code is used"):
        got = simplex.sample_sparse(support, values, 0.001, 102, u)
    np.testing.assert_array_equal(got, ref)
    assert simplex._K is None


def test_broken_numba_required_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "zoframe_constrained._kernels_numba", None)
    with pytest.raises(_kernels.KernelError, match="ZOFRAME_KERNEL=numba: numba is installed but could not be"):
        _ = _kernels._Lazy(required=True).sample_sparse


# ---------------------------------------------------------------------- what the dense form pays
def test_dense_form_runs_never_import_numba() -> None:
    """Small problems (dense p, as the README quick start's fairness table, m = 40-80) never reach the
    compiled functions, so they do not pay numba's import (about 0.7 s) even with the kernel on."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, zoframe\n"
        "from zoframe_constrained.problems import fairness\n"
        "for name in ('adszog', 'dszog'):\n"
        "    zoframe.minimize(fairness('D1', seed=0), name, rng=0, max_iter=50)\n"
        "print('numba' in sys.modules)\n"
    )
    env = dict(os.environ, ZOFRAME_KERNEL="auto")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr


# ---------------------------------------------------------------------- determinism with the kernel on
_RUN: dict[str, Any] = {"rng": 3, "max_iter": 40, "record_every": 10}


def _solve(kernel: str, executor: Any = None, chunks: int | None = None) -> tuple[Any, ...]:
    """A short sparse-form adszog run with the given implementation (also run inside pool workers)."""
    simplex._K = K if kernel == "numba" else None
    res = zoframe.minimize(pairwise("breast-cancer", seed=0), "adszog", executor=executor, chunks=chunks, **_RUN)
    return res.x, res.fun, res.nfev, res.outputs["p"], np.asarray(res.trace["fun"])


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return all(np.array_equal(np.asarray(u), np.asarray(v)) for u, v in zip(a, b, strict=True))


@needs_numba
def test_kernel_runs_are_bit_identical_serially_with_chunks_and_in_a_process_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the kernel on: the same seed gives the same Result serially, with ``chunks`` on a thread pool,
    with a process pool evaluating the batches, and run whole inside a pool worker; and the same as the
    numpy path's."""
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    monkeypatch.setattr(simplex, "_K", simplex._K)  # restored after the test (_solve sets it)
    serial = _solve("numba")
    assert _same(serial, _solve("numpy"))
    with ThreadPoolExecutor(2) as ex:
        assert _same(serial, _solve("numba", ex, chunks=3))
    with ProcessPoolExecutor(2) as ex:
        assert _same(serial, _solve("numba", ex))
        whole = [ex.submit(_solve, "numba").result() for _ in range(2)]
    assert all(_same(serial, w) for w in whole)
