"""Plugin discovery: a third-party package, broken plugins, strict mode, duplicates, blocking, names."""

from __future__ import annotations

from collections.abc import Iterator
import importlib
from pathlib import Path
import sys
import textwrap

from helpers import fake_distribution
import numpy as np
import pytest

import zoframe
from zoframe import DuplicatePluginError, PluginError, Registry, UnknownNameError
from zoframe.registry import PluginLoadWarning
from zoframe.testing import check_estimator, check_solver
from zoframe.testing.problems import SmokeFiniteSum

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "zoframe-example-plugin"


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    for mod in [m for m in sys.modules if m.startswith(("zoframe_example", "brokenplug", "dupplug"))]:
        del sys.modules[mod]
    importlib.invalidate_caches()


def test_third_party_plugin_appears_and_is_usable_by_name(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    fake_distribution(site, "zoframe-example-plugin", {"example": "zoframe_example.plugin"})
    reg = Registry()
    assert "tiny-signsgd" in reg.solvers() and "antithetic" in reg.estimators()
    assert "zoframe-example-plugin" in reg.solvers()["tiny-signsgd"].provider
    res = zoframe.minimize(SmokeFiniteSum(), "tiny-signsgd", estimator="antithetic", rng=0, max_iter=200, registry=reg)
    assert res.fun < 0.5 * res.trace["fun"][0]
    check_solver("tiny-signsgd", registry=reg)
    check_estimator("antithetic", registry=reg)


def test_broken_plugin_warns_and_the_rest_load(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (site / "brokenplug.py").write_text("raise RuntimeError('boom at import')\n")
    fake_distribution(site, "broken-dist", {"broken": "brokenplug"})
    monkeypatch.delenv("ZOFRAME_STRICT_PLUGINS", raising=False)
    with pytest.warns(PluginLoadWarning, match=r"plugin 'broken' failed to load: RuntimeError: boom at import"):
        reg = Registry()
    assert "zo-sgd" in reg.solvers() and "broken" in reg.failed


def test_broken_plugin_is_an_error_in_strict_mode(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (site / "brokenplug.py").write_text("raise RuntimeError('boom at import')\n")
    fake_distribution(site, "broken-dist", {"broken": "brokenplug"})
    monkeypatch.setenv("ZOFRAME_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="'broken' failed to load"):
        Registry()


def test_blocked_plugin_is_not_loaded(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (site / "brokenplug.py").write_text("raise RuntimeError('must not be imported')\n")
    fake_distribution(site, "broken-dist", {"broken": "brokenplug"})
    monkeypatch.setenv("ZOFRAME_BLOCK_PLUGINS", "broken,basic")
    reg = Registry()
    assert "brokenplug" not in sys.modules and "zo-sgd" not in reg.solvers()
    assert "gaussian" in reg.estimators()


def test_duplicate_names_are_qualified_and_the_bare_name_raises_naming_both_providers(site: Path) -> None:
    (site / "dupplug.py").write_text(
        textwrap.dedent(
            """
            from zoframe import hookimpl, SolverSpec
            from zoframe_basic.solvers import ZOSGD

            @hookimpl
            def zoframe_solvers():
                return [SolverSpec("zo-sgd", ZOSGD, "copy", "none", frozenset({"finite_sum"}))]
            """
        )
    )
    fake_distribution(site, "dup-dist", {"dup": "dupplug"})
    reg = Registry()
    assert {"basic:zo-sgd", "dup:zo-sgd"} <= set(reg.solvers())
    with pytest.raises(DuplicatePluginError, match=r"'zo-sgd'.*basic \(zoframe.*dup \(dup-dist: dupplug\)"):
        reg.solver("zo-sgd")


def test_autoload_can_be_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOFRAME_DISABLE_PLUGIN_AUTOLOAD", "1")
    reg = Registry()
    assert reg.solvers() == {}
    import zoframe_basic.plugin as basic

    reg.register(basic, name="basic")
    assert set(reg.solvers()) == {"zo-sgd", "zo-signsgd"}


def test_unknown_names_get_suggestions_and_the_list() -> None:
    reg = Registry()
    with pytest.raises(UnknownNameError, match=r"unknown estimator 'gausian'. Did you mean 'gaussian'\?") as info:
        reg.estimator("gausian")
    assert "coordinate" in str(info.value) and "sphere" in str(info.value)
    with pytest.raises(UnknownNameError, match="Known components"):
        reg.find("nothing-like-it")


def test_spec_rejects_unknown_problem_kinds() -> None:
    with pytest.raises(ValueError, match="unknown problem kinds"):
        zoframe.SolverSpec("x", object, "s", "r", frozenset({"quantum"}))


def test_params_are_described_with_symbols() -> None:
    from zoframe.specs import describe_params
    from zoframe_basic.solvers import ZOSGD

    params = {p.name: p for p in describe_params(ZOSGD)}
    assert params["eta"].symbol == "eta" and params["eta"].default == 1e-2 and "step" in params["eta"].doc


def test_first_party_plugins_pass_the_estimator_contract_for_each_input_shape() -> None:
    x = np.zeros(3)
    for name in ("gaussian", "sphere", "coordinate"):
        est = Registry().estimator(name).cls()
        out = est.estimate(lambda X: (X**2).sum(1), x, np.random.default_rng(0))
        assert out.grad.shape == (3,)
