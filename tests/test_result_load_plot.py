"""``Result.load`` is the inverse of ``Result.save``; ``result.plot()`` and ``zoframe.plot.trace`` draw traces."""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
import json
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest

import zoframe
from zoframe.errors import InvalidInputError
from zoframe.result import Result, load_metadata


def _run(solver: str = "zo-sgd", seed: int = 0) -> Result:
    A = np.random.default_rng(1).normal(size=(40, 6))
    b = A @ np.linspace(-1.0, 1.0, 6)
    prob = zoframe.FiniteSum(lambda X, idx: (X @ A[idx].T - b[idx]) ** 2, n=40, x0=np.zeros(6))
    return zoframe.minimize(prob, solver, rng=seed, max_iter=200, eta=0.005, q=5, batch=8, steps="paper")


def _minimax_run() -> Result:
    prob = zoframe.default_registry().make_problem("ncsc")
    return zoframe.minimize(prob, "zo-gda", rng=0, max_iter=30)


def _assert_same(a: Result, b: Result) -> None:
    for f in dataclasses.fields(Result):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if isinstance(va, np.ndarray):
            assert va.dtype == vb.dtype and va.shape == vb.shape and va.tobytes() == vb.tobytes(), f.name
        elif f.name == "trace":
            assert va.names == vb.names
            for col in va.names:
                assert va[col].dtype == vb[col].dtype and va[col].tobytes() == vb[col].tobytes(), col
        elif f.name == "outputs":
            assert set(va) == set(vb)
            for k in va:
                assert np.asarray(va[k]).tobytes() == np.asarray(vb[k]).tobytes(), k
        elif isinstance(va, float) and np.isnan(va):
            assert np.isnan(vb), f.name
        else:
            assert va == vb, f.name
            assert type(va) is type(vb) or isinstance(va, type(vb)) or isinstance(vb, type(va)), f.name


@pytest.mark.parametrize("make", [_run, _minimax_run], ids=["finite-sum", "minimax"])
def test_load_is_the_inverse_of_save(make: Callable[[], Result], tmp_path: Path) -> None:
    res = make()
    res.save(str(tmp_path / "run"), metadata={"problem": "mine"})
    for suffix in ("", ".json", ".npz"):
        back = Result.load(tmp_path / f"run{suffix}")
        _assert_same(res, back)
    assert load_metadata(tmp_path / "run")["problem"] == "mine"
    # saving the loaded result writes the same files
    Result.load(tmp_path / "run").save(str(tmp_path / "again"), metadata={"problem": "mine"})
    assert (tmp_path / "again.json").read_text() == (tmp_path / "run.json").read_text()


def test_load_keeps_non_finite_numbers(tmp_path: Path) -> None:
    res = dataclasses.replace(_run(), fun=float("inf"), fun_best=float("nan"))
    res.save(str(tmp_path / "r"))
    back = Result.load(tmp_path / "r")
    assert back.fun == float("inf") and np.isnan(back.fun_best)


def test_load_errors_say_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"no saved run .*missing"):
        Result.load(tmp_path / "nothing")
    (tmp_path / "bad.json").write_text(json.dumps({"solver": "x"}))
    with pytest.raises(InvalidInputError, match=r"\.npz is missing"):
        Result.load(tmp_path / "bad")
    _run().save(str(tmp_path / "part"))
    doc = json.loads((tmp_path / "part.json").read_text())
    del doc["nit"]
    (tmp_path / "part.json").write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match=r"not a run saved by Result.save .*nit"):
        Result.load(tmp_path / "part")


def test_plot_draws_labelled_traces(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, b = _run(seed=0), _run("zo-signsgd", seed=1)
    ax = zoframe.plot.trace(a, b, y="fun", x="calls")
    assert [line.get_label() for line in ax.get_lines()] == ["zo-sgd (seed 0)", "zo-signsgd (seed 1)"]
    assert ax.get_legend() is not None
    assert "nfev" in ax.get_xlabel() and "fun" in ax.get_ylabel()
    xs, ys = ax.get_lines()[0].get_data()
    assert np.array_equal(np.asarray(xs), a.trace["calls"]) and np.array_equal(np.asarray(ys), a.trace["fun"])
    plt.savefig(tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 0
    ax2 = a.plot(x="iteration", label="mine")
    assert [line.get_label() for line in ax2.get_lines()] == ["mine"] and ax2.get_xlabel() == "iteration"
    plt.close("all")
    with pytest.raises(InvalidInputError, match=r"no column 'nope'; its columns are \["):
        zoframe.plot.trace(a, y="nope")
    with pytest.raises(InvalidInputError, match="one label per result"):
        zoframe.plot.trace(a, b, labels=["only one"])
    with pytest.raises(InvalidInputError, match="at least one Result"):
        zoframe.plot.trace()


def test_plot_without_matplotlib_names_the_extra(tmp_path: Path) -> None:
    """In an interpreter where matplotlib cannot be imported, plotting says to install the plot extra."""
    _run().save(str(tmp_path / "r"))
    code = f"""
import sys
sys.modules["matplotlib"] = None  # an import of matplotlib now fails as if it were not installed
import zoframe
res = zoframe.Result.load({str(tmp_path / "r")!r})
try:
    res.plot()
except ImportError as exc:
    print(type(exc).__name__, exc)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("MissingDependencyError") and "zoframe[plot]" in out and "plotting a trace" in out


def test_result_save_is_one_unit_a_crash_between_the_renames_is_rolled_forward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Result.save`` writes its pair through temporaries: a crash leaves the old or the new run, never a mix."""
    import os

    from zoframe import checkpoint

    prob = zoframe.FiniteSum(lambda X: (X * X).sum(1), x0=np.ones(3))
    old = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=3)
    new = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=1, max_iter=5)
    base = tmp_path / "run"
    old.save(str(base))
    real_replace = os.replace
    calls: list[str] = []

    def crash_after_first(src: object, dst: object) -> None:
        calls.append(str(dst))
        if len(calls) == 2:
            raise OSError("simulated crash between the renames")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", crash_after_first)
    with pytest.raises(OSError, match="simulated crash"):
        new.save(str(base))
    monkeypatch.setattr(os, "replace", real_replace)
    with pytest.raises(zoframe.InvalidInputError, match="mixed pair"):
        zoframe.Result.load(str(base))  # new .npz beside the old .json: refused, not mixed
    checkpoint.settle_pair(str(base))
    back = zoframe.Result.load(str(base))
    assert back.nit == new.nit and np.array_equal(back.x, new.x)
    assert not list(tmp_path.glob("*pending*")) and not list(tmp_path.glob("*.tmp*"))
