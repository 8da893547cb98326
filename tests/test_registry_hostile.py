"""The registry under hostile plugins: garbage hook results, shared names, lying specs, bad block lists,
and lazy loading (a plugin's heavy modules are imported only when one of its components is used)."""

from __future__ import annotations

from collections.abc import Iterator
import importlib
import json
from pathlib import Path
import subprocess
import sys
import textwrap

from helpers import fake_distribution
import pytest

import zoframe
from zoframe import DuplicatePluginError, PluginError, Registry, UnknownNameError
from zoframe import cli as zcli
from zoframe.registry import AmbiguousNameError, PluginLoadWarning
from zoframe.specs import SolverSpec, is_loaded, reference
from zoframe.testing.problems import SmokeFiniteSum

PLUGIN_HEAD = """
from zoframe import hookimpl, EstimatorSpec, ProblemSpec, SolverSpec
from zoframe_basic.solvers import ZOSGD
"""


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("ZOFRAME_STRICT_PLUGINS", raising=False)
    monkeypatch.delenv("ZOFRAME_BLOCK_PLUGINS", raising=False)
    importlib.invalidate_caches()
    yield tmp_path
    for mod in [m for m in sys.modules if m.startswith("hostile")]:
        del sys.modules[mod]
    importlib.invalidate_caches()


def install(site: Path, body: str, *, module: str = "hostileplug", ep: str = "hostile", dist: str = "hostile-dist") -> None:
    (site / f"{module}.py").write_text(PLUGIN_HEAD + textwrap.dedent(body))
    fake_distribution(site, dist, {ep: module})


def run_cli(reg: Registry, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    monkeypatch.setattr(zcli, "default_registry", lambda: reg)
    code = zcli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------------------------------- item 1
GARBAGE = {
    "a string": ('return "zo-sgd"', r"returned 'zo-sgd', not a list of SolverSpec"),
    "a dict": ('return {"name": "x"}', r"returned dict, not a list of SolverSpec"),
    "42 and None": ("return [42, None]", r"item 0 is 42, not a SolverSpec"),
    "cls not a class": (
        'return [SolverSpec("not-a-class", 42, "s", "r", frozenset({"finite_sum"}))]',
        r"'not-a-class' is invalid and skipped: cls=42 is not a class but int",
    ),
    "cls of the wrong shape": (
        'return [SolverSpec("no-step", dict, "s", "r", frozenset({"finite_sum"}))]',
        r"'no-step' is invalid.*is not a solver class: it has no init\(\) and no step\(\) method",
    ),
    "an iterator that raises": ("return iter(lambda: 1 / 0, None)", r"raised ZeroDivisionError while its result was read"),
    "a name with spaces": (
        'return [SolverSpec("my solver", ZOSGD, "s", "r", frozenset({"finite_sum"}))]',
        r"name 'my solver' is not a valid component name",
    ),
}


@pytest.mark.parametrize("case", sorted(GARBAGE))
def test_garbage_hook_result_is_skipped_with_a_warning_naming_the_plugin(
    site: Path, case: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    body, what = GARBAGE[case]
    install(site, f"\n@hookimpl\ndef zoframe_solvers():\n    {body}\n")
    reg = Registry()
    with pytest.warns(PluginLoadWarning, match=r"hostile \(hostile-dist: hostileplug\): zoframe_solvers\(\).*" + what):
        solvers = reg.solvers()
    assert "zo-sgd" in solvers and "dszog" in solvers  # every other plugin is there
    assert not any(k.startswith("hostile") or k in ("not-a-class", "no-step", "my solver") for k in solvers)
    code, out, _ = run_cli(reg, ["list"], monkeypatch, capsys)
    assert code == 0 and "zo-sgd" in out and "hostile-dist" in out  # the failure is listed too


@pytest.mark.parametrize("case", ["a string", "42 and None", "cls of the wrong shape"])
def test_garbage_hook_result_is_an_error_in_strict_mode(site: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    body, what = GARBAGE[case]
    install(site, f"\n@hookimpl\ndef zoframe_solvers():\n    {body}\n")
    monkeypatch.setenv("ZOFRAME_STRICT_PLUGINS", "1")
    reg = Registry()
    with pytest.raises(PluginError, match=r"hostile-dist.*" + what + r".*strict mode"):
        reg.solvers()


def test_garbage_in_other_hooks_is_skipped(site: Path) -> None:
    install(
        site,
        """
        @hookimpl
        def zoframe_problems():
            return [ProblemSpec("p1", 3.5, "s", "r", "finite_sum"),
                    ProblemSpec("p2", dict, "s", "r", "quantum"),
                    SolverSpec("wrong-hook", ZOSGD, "s", "r", frozenset({"finite_sum"}))]

        @hookimpl
        def zoframe_estimators():
            return [EstimatorSpec("not-an-estimator", ZOSGD, "s", "r")]

        @hookimpl
        def zoframe_commands():
            return "data"
        """,
    )
    reg = Registry()
    with pytest.warns(PluginLoadWarning) as rec:
        problems, estimators, commands = reg.problems(), reg.estimators(), reg.commands()
    text = "\n".join(str(w.message) for w in rec)
    assert "factory=3.5 is not callable" in text and "kind 'quantum' is not one of" in text
    assert "item 2 is SolverSpec, not a ProblemSpec" in text
    assert "is not a estimator class" in text or "is not an estimator class" in text or "no estimate() and no rows()" in text
    assert "zoframe_commands() returned 'data'" in text
    assert not {"p1", "p2", "wrong-hook"} & set(problems) and "quadratic" in problems
    assert "not-an-estimator" not in estimators and "gaussian" in estimators
    assert "data" in commands  # the datasets plugin's command is untouched


# ---------------------------------------------------------------------------------------- item 2
DUP = """
@hookimpl
def zoframe_solvers():
    return [SolverSpec("zo-sgd", ZOSGD, "a third-party copy", "none", frozenset({"finite_sum"}))]
"""


def test_shared_name_keeps_zoframe_working_with_qualified_names(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(site, DUP, ep="dup", dist="dup-dist")
    reg = Registry()
    solvers = reg.solvers()
    assert {"basic:zo-sgd", "dup:zo-sgd"} <= set(solvers) and "zo-sgd" not in solvers
    assert solvers["dup:zo-sgd"].spec.summary == "a third-party copy"
    assert "dup-dist" in solvers["dup:zo-sgd"].provider
    assert reg.solver("basic:zo-sgd").summary != "a third-party copy"
    # the bare name is the only thing that fails, and it names both providers and both qualified names
    with pytest.raises(zoframe.AmbiguousNameError, match=r"'zo-sgd' is ambiguous.*'basic:zo-sgd' from basic \(zoframe.*'dup:zo-sgd' from dup \(dup-dist: hostileplug") as info:
        reg.solver("zo-sgd")
    assert isinstance(info.value, DuplicatePluginError) and zoframe.AmbiguousNameError is AmbiguousNameError
    with pytest.raises(DuplicatePluginError, match="basic:zo-sgd"):
        reg.find("zo-sgd")
    # unambiguous names, qualified names and the rest of the host keep working
    assert reg.solver("zo-signsgd").name == "zo-signsgd" and reg.solver("basic:zo-signsgd").name == "zo-signsgd"
    res = zoframe.minimize(SmokeFiniteSum(), "dup:zo-sgd", steps="paper", rng=0, max_iter=20, registry=reg)
    assert res.nit == 20
    code, out, _ = run_cli(reg, ["list"], monkeypatch, capsys)
    assert code == 0 and "basic:zo-sgd" in out and "dup:zo-sgd" in out and "zo-signsgd" in out
    code, out, _ = run_cli(reg, ["info", "dup:zo-sgd"], monkeypatch, capsys)
    assert code == 0 and "a third-party copy" in out
    code, _, err = run_cli(reg, ["info", "zo-sgd"], monkeypatch, capsys)
    assert code == 2 and "basic:zo-sgd" in err and "dup:zo-sgd" in err


def test_qualified_names_of_unknown_plugins_are_unknown(site: Path) -> None:
    reg = Registry()
    with pytest.raises(UnknownNameError, match="unknown solver 'nope:zo-sgd'"):
        reg.solver("nope:zo-sgd")


# ---------------------------------------------------------------------------------------- item 3
def test_spec_problem_kinds_that_contradict_the_class_are_refused(site: Path) -> None:
    install(
        site,
        """
        @hookimpl
        def zoframe_solvers():
            return [SolverSpec("liar", ZOSGD, "claims minimax", "none", frozenset({"minimax"}))]
        """,
    )
    reg = Registry()
    with pytest.warns(PluginLoadWarning, match=r"'liar' is invalid.*problem_kinds \['finite_sum'\] but the spec declares \['minimax'\]"):
        assert "liar" not in reg.solvers()
    strict = Registry(strict=True)
    with pytest.raises(PluginError, match="problem_kinds"):
        strict.solvers()


def test_lazy_spec_with_contradicting_problem_kinds_is_refused_on_first_use(site: Path) -> None:
    install(
        site,
        """
        @hookimpl
        def zoframe_solvers():
            return [SolverSpec("lazy-liar", "zoframe_basic.solvers:ZOSGD", "claims minimax", "none",
                               frozenset({"minimax"}))]
        """,
    )
    reg = Registry()
    spec = reg.solver("lazy-liar")  # listed: nothing is imported to list it
    with pytest.raises(PluginError, match=r"solver 'lazy-liar' of plugin hostile \(hostile-dist.*problem_kinds"):
        spec.cls  # noqa: B018
    with pytest.raises(PluginError, match="problem_kinds"):
        zoframe.minimize(SmokeFiniteSum(), "lazy-liar", rng=0, max_iter=5, registry=reg)
    strict = Registry(strict=True)  # strict mode loads references when it collects the specs
    with pytest.raises(PluginError, match=r"'lazy-liar' is invalid.*problem_kinds.*strict mode"):
        strict.solvers()


def test_lazy_reference_to_a_missing_module_is_a_plugin_error_naming_it(site: Path) -> None:
    install(
        site,
        """
        @hookimpl
        def zoframe_solvers():
            return [SolverSpec("ghost", "hostile_missing.mod:Solver", "s", "r", frozenset({"finite_sum"}))]
        """,
    )
    reg = Registry()
    assert "ghost" in reg.solvers() and "zo-sgd" in reg.solvers()
    with pytest.raises(PluginError, match=r"solver 'ghost' of plugin hostile.*cannot load cls='hostile_missing.mod:Solver': ModuleNotFoundError"):
        zoframe.minimize(SmokeFiniteSum(), "ghost", rng=0, max_iter=5, registry=reg)
    problems = reg.check_references()  # a plugin's CI finds every bad reference at once
    assert list(problems) == ["solver hostile:ghost: cls"] and "ModuleNotFoundError" in problems["solver hostile:ghost: cls"]


def test_a_broken_command_reference_is_skipped_and_the_cli_keeps_working(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(
        site,
        """
        from zoframe.specs import CommandSpec

        @hookimpl
        def zoframe_commands():
            return [CommandSpec("boom", "a command whose module is missing", "hostile_missing:add", "hostile_missing:run")]
        """,
    )
    reg = Registry()
    with pytest.warns(PluginLoadWarning, match=r"command 'boom' is invalid.*cannot load add_arguments='hostile_missing:add'"):
        code, out, _ = run_cli(reg, ["list"], monkeypatch, capsys)
    assert code == 0 and "zo-sgd" in out and "boom" not in reg.commands() and "data" in reg.commands()


def test_malformed_reference_is_refused_when_the_spec_is_built() -> None:
    with pytest.raises(ValueError, match="'module:attr' reference"):
        SolverSpec("x", "not a reference", "s", "r", frozenset({"finite_sum"}))


# ---------------------------------------------------------------------------------------- item 4
def test_block_list_names_that_match_nothing_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOFRAME_BLOCK_PLUGINS", "basic,no-such-plugin,minimx")
    with pytest.warns(PluginLoadWarning, match=r"no installed zoframe plugin is called 'minimx' \(did you mean 'minimax'\?\), 'no-such-plugin'.*entry-point names are: .*admm.*basic.*minimax") as rec:
        reg = Registry()
    assert len(rec) == 1 and "'basic'" not in str(rec[0].message).split("names are")[0]
    assert "zo-sgd" not in reg.solvers() and "dszog" in reg.solvers()


# ---------------------------------------------------------------------------------------- item 16
_PROBE = """
import json, sys
from zoframe.registry import Registry
reg = Registry()
for table in (reg.solvers(), reg.estimators(), reg.problems(), reg.suites()):  # what list and info read
    pass
heavy = ["zoframe_basic.solvers", "zoframe_basic.problems", "zoframe_admm.solvers", "zoframe_admm.problems",
         "zoframe_admm.reproduce", "zoframe_minimax.solvers", "zoframe_minimax.problems", "zoframe_minimax.reproduce",
         "zoframe_constrained.baselines", "zoframe_constrained.reproduce", "zoframe_datasets.cli", "zoframe_verify.cli",
         "zoframe_peers.solvers", "cma", "nevergrad",
         "zoframe_verify.checks", "zoframe_verify.rates", "zoframe_verify.reference", "zoframe_verify.study",
         "zoframe_verify.verify", "zoframe_verify.problems", "zoframe_constrained.solvers", "zoframe_constrained.problems",
         "zoframe_datasets.catalog", "zoframe_datasets.libsvm", "zoframe_datasets.paths", "zoframe_datasets.sampling",
         "zoframe_datasets.fetch"]
before = [m for m in heavy if m in sys.modules]
spec = reg.solver("zo-sgd")
cls = spec.cls
after = [m for m in heavy if m in sys.modules]
print(json.dumps({"before": before, "after": after, "cls": cls.__name__}))
"""


def test_listing_imports_no_solver_or_problem_module() -> None:
    """Listing solvers, estimators, problems and suites imports none of their modules; using one imports it.

    That covers the peers (no scipy/pycma/nevergrad wrappers), and the hook modules of the verification
    and datasets plugins, whose packages import their submodules on first use of a public name.
    (Commands and reproductions are loaded when collected: the CLI builds their parsers at start-up.)
    """
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=120)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["before"] == [], f"imported while listing: {got['before']}"
    assert got["after"] == ["zoframe_basic.solvers"] and got["cls"] == "ZOSGD"


@pytest.mark.parametrize("package", ["zoframe_verify", "zoframe_datasets"])
def test_light_packages_still_export_every_public_name(package: str) -> None:
    """The lazy ``__init__`` of the verification and datasets packages: every name of ``__all__`` imports."""
    importlib.import_module(f"{package}.cli")  # binds its submodules as package attributes, as the CLI does
    mod = importlib.import_module(package)
    for name in mod.__all__:
        value = getattr(mod, name)
        assert not isinstance(value, type(sys)), f"{package}.{name} is the submodule, not the public object"
        if not name.isupper():  # constants aside, each object comes from one of the package's submodules
            assert value.__module__.startswith(f"{package}."), (name, value.__module__)
    assert callable(mod.verify if package == "zoframe_verify" else mod.load_libsvm)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = mod.no_such_name


def test_lazy_specs_report_their_reference_without_importing() -> None:
    spec = SolverSpec("later", "zoframe_basic.solvers:ZOSignSGD", "s", "r", frozenset({"finite_sum"}))
    assert not is_loaded(spec, "cls") and reference(spec, "cls") == "zoframe_basic.solvers:ZOSignSGD"
    assert spec.cls.__name__ == "ZOSignSGD" and is_loaded(spec, "cls")
    assert reference(spec, "cls") == "zoframe_basic.solvers:ZOSignSGD"


def test_the_constrained_package_exports_every_public_name_on_first_use() -> None:
    """``zoframe_constrained`` imports its solvers (and scipy.optimize) only when a public name is used."""
    mod = importlib.import_module("zoframe_constrained")
    for name in mod.__all__:
        value = getattr(mod, name)
        assert value.__module__ in (
            "zoframe_constrained.solvers", "zoframe_constrained.penalty", "zoframe_constrained.problems"
        ), (name, value)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = mod.no_such_name
