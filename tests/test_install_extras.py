"""The core install (numpy, scipy, pluggy, tqdm, threadpoolctl) and the extras.

A child interpreter runs with cvxpy, scikit-learn, matplotlib, dask and the peers (pycma, nevergrad,
PDFO, COCO) made unimportable (a meta-path finder installed by a ``sitecustomize`` module on
``PYTHONPATH``), as in a fresh environment with only ``pip install zoframe``. There ``import zoframe``, the CLI's ``list`` and ``minimize`` on user
problems must work, and every feature that needs an extra must fail with an error naming that extra.
The checks run in one child (one interpreter start-up); each test asserts on its part of the report.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess
import sys
import textwrap
import tomllib
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = ("cvxpy", "sklearn", "matplotlib", "dask", "distributed", "cma", "nevergrad", "pdfo", "cocoex", "pooch",
           "platformdirs", "requests")

SITECUSTOMIZE = f"""
import importlib.abc
import sys

BLOCKED = {BLOCKED!r}


class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: core install)", name=name)
        return None


sys.meta_path.insert(0, _Blocker())
"""

CHILD = textwrap.dedent(
    r"""
    import contextlib, io, json, sys, tempfile
    from pathlib import Path
    import numpy as np

    report = {}

    def attempt(key, fn):
        try:
            value = fn()
            report[key] = {"ok": True, "value": value}
        except Exception as exc:  # the report carries the error for the test to judge
            report[key] = {"ok": False, "type": type(exc).__name__, "message": str(exc),
                           "is_import_error": isinstance(exc, ImportError)}

    import zoframe
    report["blocked_loaded"] = sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED_NAMES)

    def user_finite_sum():
        A = np.random.default_rng(0).normal(size=(50, 5))
        b = A @ np.ones(5)
        prob = zoframe.FiniteSum(lambda X, idx: (X @ A[idx].T - b[idx]) ** 2, n=50, x0=np.zeros(5))
        res = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=1500, eta=0.01, q=10, batch=10)
        return [float(res.fun), float(prob.components(prob.x0[None], np.arange(50)).mean()), res.nfev]

    def user_constrained():
        # min ||x - 2||^2 s.t. x_j <= 1: the solution is x = 1 (objective d)
        d = 4
        prob = zoframe.Constrained(lambda X: ((X - 2.0) ** 2).sum(axis=1),
                                   lambda X, idx: X[:, idx] - 1.0, m=d, x0=np.zeros(d))
        res = zoframe.minimize(prob, "adszog", rng=0, max_iter=2000, M1=1, M2=d, M3=d, restore_after=1000)
        return [float(res.fun), float(np.max(res.x)), bool(res.feasible)]

    def cli_list():
        from zoframe.cli import main
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = main(["list"])
        return [code, buf.getvalue()]

    attempt("minimize_finite_sum", user_finite_sum)
    attempt("minimize_constrained", user_constrained)
    attempt("cli_list", cli_list)

    reg = zoframe.default_registry()

    def cvxpy_baseline():
        prob = reg.make_problem("fairness", dataset="D1")
        zoframe.minimize(prob, "zopsgd", rng=0, max_iter=2)

    def cvxpy_reference():
        from zoframe_verify.reference import reference_solution
        reference_solution(reg.make_problem("kkt-qp"))

    def sklearn_libsvm():
        from zoframe_datasets import load_libsvm
        path = Path(tempfile.mkdtemp()) / "tiny.libsvm"
        path.write_text("+1 1:0.5 2:1\n-1 2:0.25\n")
        load_libsvm(path)

    def sklearn_bundled():
        reg.make_problem("pairwise", dataset="breast-cancer")

    def matplotlib_figure():
        from zoframe_minimax.reproduce import plot
        plot(Path(tempfile.mkdtemp()), {}, 0.01)

    def trace_plot():
        prob = zoframe.FiniteSum(lambda X: (X ** 2).sum(axis=1), x0=np.ones(3))
        zoframe.plot.trace(zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=5, eta=0.05))

    def save_and_load():
        prob = zoframe.FiniteSum(lambda X: (X ** 2).sum(axis=1), x0=np.ones(3))
        res = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=5, eta=0.05)
        base = str(Path(tempfile.mkdtemp()) / "run")
        res.save(base)
        back = zoframe.Result.load(base)
        return [back.x.tobytes() == res.x.tobytes(), back.nfev == res.nfev]

    def dask_executor():
        from zoframe.cli import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            code = main(["rate", "zo-sgd", "least-squares", "--seeds", "2", "--budget", "20",
                         "--executor", "dask", "--workers", "2", "--out", tempfile.mkdtemp(),
                         "--db", str(Path(tempfile.mkdtemp()) / "rates.sqlite")])
        raise RuntimeError(f"exit {code}: {err.getvalue()}")

    def pooch_fetch():
        from zoframe_datasets.fetch import fetch
        fetch("svmguide3.t", url="http://127.0.0.1:9/svmguide3.t", dest=tempfile.mkdtemp())

    def data_list():  # the cache directory without platformdirs: the XDG rule
        from zoframe.cli import main
        from zoframe_datasets.paths import cache_dir
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = main(["data", "list"])
        return [code, str(cache_dir()), buf.getvalue()]

    attempt("pooch_fetch", pooch_fetch)
    attempt("data_list", data_list)
    attempt("cvxpy_baseline", cvxpy_baseline)
    attempt("cvxpy_reference", cvxpy_reference)
    attempt("sklearn_libsvm", sklearn_libsvm)
    attempt("sklearn_bundled", sklearn_bundled)
    attempt("matplotlib_figure", matplotlib_figure)
    attempt("dask_executor", dask_executor)
    attempt("trace_plot", trace_plot)

    def peers_cma():
        prob = zoframe.FiniteSum(lambda X: (X * X).sum(1), x0=np.ones(3))
        zoframe.minimize(prob, "cma-es", rng=0, max_calls=50)

    def peers_nevergrad():
        prob = zoframe.FiniteSum(lambda X: (X * X).sum(1), x0=np.ones(3))
        zoframe.minimize(prob, "ng-cobyla", rng=0, max_calls=50)

    attempt("peers_cma", peers_cma)
    attempt("peers_nevergrad", peers_nevergrad)
    attempt("save_and_load", save_and_load)
    print("REPORT " + json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def core_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    site = tmp_path_factory.mktemp("core-install")
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "ZOFRAME_CACHE": str(site / "cache"),
        "ZOFRAME_OUT": str(site / "out"),
    }
    code = f"BLOCKED_NAMES = {BLOCKED!r}\n" + CHILD
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=site, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT ")]
    assert line, proc.stdout[-3000:] + proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(line[-1][len("REPORT "):])
    return report


def test_the_blocker_really_blocks(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for mod in ("cvxpy", "sklearn.datasets", "matplotlib.pyplot", "distributed"):
        proc = subprocess.run([sys.executable, "-c", f"import {mod}"], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, (mod, proc.stderr)


def test_import_zoframe_loads_no_optional_dependency(core_report: dict[str, Any]) -> None:
    assert core_report["blocked_loaded"] == []


def test_minimize_on_user_problems_works_with_the_core_install(core_report: dict[str, Any]) -> None:
    fs = core_report["minimize_finite_sum"]
    assert fs["ok"], fs
    fun, fun0, nfev = fs["value"]
    assert fun < 0.05 * fun0 and nfev > 0
    con = core_report["minimize_constrained"]
    assert con["ok"], con
    fun, xmax, feasible = con["value"]
    assert feasible and xmax <= 1.0 + 1e-3 and abs(fun - 4.0) < 0.05  # x = 1: objective d * (2 - 1)^2 = 4


def test_save_and_load_need_no_extra(core_report: dict[str, Any]) -> None:
    res = core_report["save_and_load"]
    assert res["ok"], res
    assert res["value"] == [True, True]


def test_the_cli_lists_every_plugin_with_the_core_install(core_report: dict[str, Any]) -> None:
    res = core_report["cli_list"]
    assert res["ok"], res
    code, out = res["value"]
    assert code == 0
    assert "failed to load" not in out
    for name in ("zo-sgd", "adszog", "zopsgd", "zo-svrg-admm", "zo-gda", "pairwise", "kkt-qp"):
        assert name in out


@pytest.mark.parametrize(
    ("feature", "extra", "dist"),
    [
        ("cvxpy_baseline", "cvxpy", "cvxpy"),
        ("cvxpy_reference", "cvxpy", "cvxpy"),
        ("sklearn_libsvm", "data", "scikit-learn"),
        ("sklearn_bundled", "data", "scikit-learn"),
        ("matplotlib_figure", "plot", "matplotlib"),
        ("trace_plot", "plot", "matplotlib"),
        ("dask_executor", "distributed", "dask[distributed]"),
        ("peers_cma", "peers", "cma"),
        ("peers_nevergrad", "peers", "nevergrad"),
        ("pooch_fetch", "data", "pooch"),
    ],
)
def test_each_optional_feature_names_its_extra(core_report: dict[str, Any], feature: str, extra: str, dist: str) -> None:
    res = core_report[feature]
    assert not res["ok"], f"{feature} ran without its optional dependency"
    assert f"zoframe[{extra}]" in res["message"], res
    assert f"needs {dist}" in res["message"], res
    from zoframe._optional import ALL_EXTRAS

    # the message says exactly whether zoframe[all] installs it
    says = "'zoframe[all]' includes it" if extra in ALL_EXTRAS else "'zoframe[all]' does not"
    assert says in res["message"], res
    if feature != "dask_executor":  # the CLI turns the error into exit status 2 and a message
        assert res["type"] in ("MissingDependencyError", "RunFailedError"), res


def test_data_list_needs_no_extra(core_report: dict[str, Any]) -> None:
    res = core_report["data_list"]
    assert res["ok"], res
    code, cache, out = res["value"]
    assert code == 0 and cache.endswith(os.path.join("zoframe", "data")) and "user cache directory" in out


def test_extras_declare_what_the_errors_name() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {dep.split(">")[0].split("[")[0].strip().lower() for dep in meta["dependencies"]}
    assert core == {"numpy", "scipy", "pluggy", "tqdm", "threadpoolctl"}
    extras = meta["optional-dependencies"]
    from zoframe._optional import _DISTRIBUTIONS, EXTRAS

    for module, extra in EXTRAS.items():
        dist = _DISTRIBUTIONS.get(module, module).split("[")[0]
        assert any(req.startswith(dist) for req in extras[extra]), (module, extra, extras[extra])
    from zoframe._optional import ALL_EXTRAS

    assert len(extras["all"]) == 1 and set(extras["all"][0].split("[")[1].rstrip("]").split(",")) == set(ALL_EXTRAS)
    assert any(req.startswith("zoframe[all") for req in extras["dev"])
