"""The optional compiled kernel (``zoframe[fast]``, numba) against the numpy code.

The switch (``ZOFRAME_KERNEL``) is tested everywhere; the kernel itself only where numba is installed
(skipped otherwise, with the reason). With numba, both paths run in one process (``simplex._K`` set
to the kernel or to ``None``): each compiled function gives the numpy code's result bit for bit (the
sampling, the sparse p step of both solvers, numpy's pairwise sums, the arithmetic of G_L), the two
paths draw the same random numbers, the iterates of 100 steps agree to 1e-12 relative on real
problems, and long runs agree in the median over 10 seeds.
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


@needs_numba
def test_add_reduce_is_numpys_pairwise_sum() -> None:
    rng = np.random.default_rng(2)
    for n in [*range(0, 300), 1000, 1023, 4097, 100_003]:
        a = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
        assert K.add_reduce(a, n) == float(np.add.reduce(a)), n
    rows = rng.standard_normal((11, 256)) * 10.0 ** rng.integers(-8, 8, (11, 256))
    assert [K.add_reduce(r.copy(), 256) for r in rows] == np.add.reduce(rows, axis=1).tolist()


def _pz_forms(rng: np.random.Generator) -> list[simplex.PZ]:
    """ADSZOG's p and z_p in the floor + support form: with and without a floor, a full support, z of both signs."""
    out = []
    for m, k, p_floor, z_floor in [(1000, 50, 1e-5, -2e-9), (1000, 50, 0.0, 0.0), (20000, 300, 1e-7, 3e-10),
                                   (64, 64, 0.0, 0.0), (5000, 1, 1e-4, -1e-6)]:  # fmt: skip
        support = np.sort(rng.choice(m, size=k, replace=False)).astype(np.intp)
        p = rng.random(k) ** 3
        p *= (1.0 - p_floor * (m - k)) / p.sum()
        z = rng.standard_normal(k) * 1e-2
        out.append(simplex.PZ(p, z, support, p_floor, z_floor, m))
    return out


def _same_pz(a: simplex.PZ, b: simplex.PZ) -> bool:
    same = [np.array_equal(a.p, b.p), np.array_equal(a.z, b.z), np.array_equal(a.support, b.support)]
    return all(same) and (a.p_floor, a.z_floor, a.m) == (b.p_floor, b.z_floor, b.m)


@needs_numba
def test_sparse_p_steps_are_the_numpy_code_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADSZOG's projection + averaging and moving average, DSZOG's ascent: the same arrays, the same bits."""
    rng = np.random.default_rng(8)
    for pz in _pz_forms(rng):
        for eta in (1e-3, 0.3, 50.0):
            idx = rng.choice(pz.m, size=min(128, pz.m), replace=False).astype(np.intp)
            gain = rng.standard_normal(idx.shape[0]) * eta * (rng.random(idx.shape[0]) < 0.3)
            h = simplex.Ascent(idx, gain, 1e-6)
            results = []
            for kernel in (None, K):
                monkeypatch.setattr(simplex, "_K", kernel)
                pa = simplex.pz_project_average(pz, eta, 0.9)
                ema = simplex.pz_ema(pz, h, 0.9)
                asc = simplex.ascent_sparse(pz.support, pz.p, pz.p_floor, pz.m, eta, h)
                results.append((pa, ema, asc))
            (pa0, ema0, asc0), (pa1, ema1, asc1) = results
            assert _same_pz(pa0, pa1) and _same_pz(ema0, ema1)
            assert all(np.array_equal(u, v) for u, v in zip(asc0[:2], asc1[:2])) and asc0[2] == asc1[2]
            assert asc1[0].dtype == np.intp and ema1.support is not None and ema1.support.dtype == np.intp
    monkeypatch.setattr(simplex, "_K", None)
    ref = simplex.pz_average(pz, simplex.pz_project(pz, 0.1), 0.5)  # the fused call is the two steps
    assert _same_pz(simplex.pz_project_average(pz, 0.1, 0.5), ref)


@needs_numba
@pytest.mark.parametrize("n_floor", [0, 1, 9, 100_000])
def test_threshold_is_the_numpy_threshold_bit_for_bit(n_floor: int) -> None:
    rng = np.random.default_rng(9)
    for n in (1, 2, 7, 130, 3000):
        for scale in (1e-6, 1e-2, 1.0, 1e3):
            v = np.abs(rng.standard_normal(n)) * scale * (rng.random(n) < 0.7)
            want = simplex._floor_threshold(v.copy(), n_floor) if n_floor else simplex.simplex_threshold(v)
            assert K.threshold(v.copy(), n_floor) == want


@needs_numba
def test_lagrangian_sums_are_the_estimators_arithmetic() -> None:
    """[loss, max(f, 0)^2] * weights, differences to the base row over mu, their row sums: as numpy takes them."""
    from zoframe_constrained.penalty import _column_weights, _weighted_terms

    rng = np.random.default_rng(10)
    for b1, b2, beta in ((128, 128, 1.0), (5, 300, 3e4), (1, 1, 1e-3)):
        loss = rng.standard_normal((11, b1))
        f = rng.standard_normal((11, b2)) * 1e-2
        f[:, ::3] = -0.0
        weights = _column_weights(b1, b2, beta)
        vals = _weighted_terms(loss, f, weights)
        diffs = vals[1:] - vals[0]
        diffs *= 1.0 / 1e-3
        sums, nonzero, base = K.lagrangian_sums(loss, f, weights, 1.0 / 1e-3)
        assert np.array_equal(sums, np.add.reduce(diffs, axis=1)) and nonzero
        assert base == float(vals[0].sum())
    flat = np.ones((11, 4))
    assert not K.lagrangian_sums(flat, flat, np.ones(8), 1e3)[1]


# ---------------------------------------------------------------------- iterates, both paths in one process
def _run(solver: Any, prob: Any, seed: int, steps: int, kernel: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(simplex, "_K", kernel)
    oracle = CountingOracle(prob)
    rng = np.random.default_rng(seed)
    state = solver.init(oracle, np.asarray(prob.x0, dtype=np.float64), rng)
    for _ in range(steps):
        state = solver.step(oracle, state, rng)
    oracle.rng_state = rng.bit_generator.state  # type: ignore[attr-defined]  # the draws made (for the test)
    return state, oracle


def _close(a: np.ndarray, b: np.ndarray, rel: float) -> bool:
    scale = max(float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0)), 1e-300)
    return a.shape == b.shape and float(np.max(np.abs(a - b), initial=0.0)) <= rel * scale


_PROBLEMS: dict[str, Any] = {
    "breast-cancer": lambda: pairwise("breast-cancer", seed=0),
    "fairness-D1": lambda: fairness("D1", seed=0),
}


@needs_numba
@pytest.mark.parametrize(("prob_name", "form"), [("breast-cancer", "sparse"), ("breast-cancer", "dense"),
                                                  ("fairness-D1", "sparse")])  # fmt: skip
@pytest.mark.parametrize("solver_name", ["adszog", "dszog"])
@pytest.mark.parametrize("steps", ["paper", "auto"])
def test_iterates_agree_over_100_steps(prob_name: str, solver_name: str, steps: str, form: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Sparse p: the form the kernel compiles (fairness: m = 40); dense p on breast-cancer (m = 18,868):
    G_L's arithmetic compiled, p's numpy code (the dense form of a small problem never calls the kernel). The same random numbers drawn (the generator's state after
    100 steps), the same counts, the iterates within 1e-12 relative."""
    prob = _PROBLEMS[prob_name]()
    cls = ADSZOG if solver_name == "adszog" else DSZOG
    solver = cls(steps=cast(Any, steps), p_form=cast(Any, form))
    for seed in (0, 1):
        ref, ref_oracle = _run(solver, prob, seed, 100, None, monkeypatch)
        ref_draws = ref_oracle.rng_state
        got, got_oracle = _run(solver, prob, seed, 100, K, monkeypatch)
        assert got_oracle.rng_state == ref_draws  # the same random numbers, as many of them
        assert (got_oracle.calls, got_oracle.user_calls) == (ref_oracle.calls, ref_oracle.user_calls)
        dense: list[Callable[[Any], Any]] = [lambda s: s.x, lambda s: solver.outputs(s)["p"]]
        if solver_name == "adszog":
            dense.append(lambda s: s.inner.z_w)
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


def _solve(kernel: str, executor: Any = None, chunks: int | None = None, solver: str = "adszog",
           asktell: bool = False) -> tuple[Any, ...]:  # fmt: skip
    """A short sparse-form run with the given implementation (also run inside pool workers); ``asktell``:
    through :class:`zoframe.Run`, the user's functions evaluated by the caller."""
    simplex._K = K if kernel == "numba" else None
    prob = pairwise("breast-cancer", seed=0)
    if asktell:
        with zoframe.Run(prob, solver, **_RUN) as run:
            while (req := run.ask()) is not None:
                fn = prob.components if req.kind == "objective" else prob.constraints
                run.tell(req, np.asarray(fn(req.points, req.indices)))
            res = run.result()
    else:
        res = zoframe.minimize(prob, solver, executor=executor, chunks=chunks, **_RUN)
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
    for solver in ("adszog", "dszog"):
        serial = _solve("numba", solver=solver)
        assert _same(serial, _solve("numpy", solver=solver))
        assert _same(serial, _solve("numba", solver=solver, asktell=True))
        with ThreadPoolExecutor(2) as ex:
            assert _same(serial, _solve("numba", ex, chunks=3, solver=solver))
    serial = _solve("numba")
    with ProcessPoolExecutor(2) as ex:
        assert _same(serial, _solve("numba", ex))
        whole = [ex.submit(_solve, "numba").result() for _ in range(2)]
    assert all(_same(serial, w) for w in whole)


@needs_numba
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_kernel_runs_are_bit_identical_on_dask(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the kernel on, a run whose batches are evaluated on a dask cluster (loopback) is the serial run."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(simplex, "_K", simplex._K)
    serial = _solve("numba")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        assert _same(serial, _solve("numba", client.get_executor(), chunks=3))


@needs_numba
def test_auto_loads_the_kernel_only_after_enough_calls_and_the_switch_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ZOFRAME_KERNEL=auto``: the numpy code for the first ``AUTO_AFTER_CALLS`` calls of a process, then the
    kernel; a run during which the switch happens gives the numpy path's Result bit for bit."""
    auto = _kernels._Lazy(required=False)
    assert auto.auto
    monkeypatch.setattr(simplex, "_K", None)
    reference = _solve("numpy")
    monkeypatch.setattr(simplex, "_K", auto)
    monkeypatch.setattr(simplex, "_AUTO", auto)
    monkeypatch.setattr(simplex, "_waited", 0)
    assert simplex._kernel_now() is None  # the first calls: numpy
    monkeypatch.setattr(simplex, "_waited", simplex.AUTO_AFTER_CALLS - 25)  # the switch inside the next run
    prob = pairwise("breast-cancer", seed=0)
    res = zoframe.minimize(prob, "adszog", **_RUN)
    assert simplex._waited == simplex.AUTO_AFTER_CALLS and simplex._kernel_now() is auto
    got = (res.x, res.fun, res.nfev, res.outputs["p"], np.asarray(res.trace["fun"]))
    assert _same(got, reference)
