"""A solver by default for each problem kind, said where it is chosen; certificate arguments that can fail."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe import Run, hookimpl
from zoframe.certificate import certify
from zoframe.cli import main
from zoframe.errors import DuplicatePluginError, InvalidInputError, PluginError
from zoframe.oracle import CountingOracle
from zoframe.registry import Registry, default_registry
from zoframe.specs import SolverSpec
from zoframe_bench.runner import make_tasks

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples" / "my_problems.py"
DEFAULTS = {"finite_sum": "zo-sgd", "constrained": "adszog", "minimax": "zo-gdmsa", "composite": "zo-svrg-admm"}


def capped_sphere() -> zoframe.Constrained:
    """min |x - 1|^2 s.t. x_i <= 0.5: KKT point x = 0.5 (all active)."""
    return zoframe.Constrained(
        lambda X: ((X - 1.0) ** 2).sum(axis=1), lambda X, idx: X[:, idx] - 0.5, 3, np.zeros(3),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------- the defaults
def test_the_registry_resolves_each_kind_to_its_declared_default() -> None:
    from zoframe.registry import first_party_modules

    reg = default_registry()
    assert {k: reg.default_solver(k) for k in DEFAULTS} == DEFAULTS
    for kind, name in DEFAULTS.items():
        assert reg.solver(name).default_for == frozenset({kind})
        assert reg.defaults_of(reg.solver(name)) == frozenset({kind})
    assert "zoframe_constrained.plugin" in first_party_modules()


@pytest.mark.parametrize(
    ("kind", "build", "budget"),
    [
        ("finite_sum", lambda: default_registry().make_problem("quadratic", dim=3), {"max_iter": 5}),
        ("constrained", capped_sphere, {"max_calls": 3000}),
        ("minimax", lambda: default_registry().make_problem("ncsc", d1=3, d2=2), {"max_iter": 3}),
        ("composite", lambda: default_registry().make_problem("fused-lasso-toy", dim=4, n=20),
         {"max_iter": 3, "rank_check": "ignore"}),
    ],
)
def test_minimize_without_a_solver_runs_the_default_of_the_kind_and_says_so(kind: str, build: Any,
                                                                            budget: dict[str, Any]) -> None:
    res = zoframe.minimize(build(), rng=0, **budget)
    assert res.solver == DEFAULTS[kind]
    note = f"solver: {DEFAULTS[kind]}, the default for {kind} problems; pass solver= to choose another"
    assert note in res.notes
    explicit = zoframe.minimize(build(), DEFAULTS[kind], rng=0, **budget)  # a named solver: no such note
    assert not any(n.startswith("solver: ") for n in explicit.notes)
    np.testing.assert_array_equal(explicit.x, res.x)  # the same run


def test_the_constrained_default_reaches_the_kkt_point() -> None:
    res = zoframe.minimize(capped_sphere(), rng=0, max_calls=5000)
    assert res.solver == "adszog" and res.success
    np.testing.assert_allclose(res.x, 0.5, atol=1e-6)


def test_ask_tell_without_a_solver_runs_the_default() -> None:
    prob = capped_sphere()
    with Run(prob, rng=0, max_calls=3000) as run:
        while (req := run.ask()) is not None:
            vals = prob.components(req.points, req.indices) if req.kind == "objective" else \
                prob.constraints(req.points, req.indices)
            run.tell(req, np.asarray(vals))
        res = run.result()
    assert res.solver == "adszog"
    assert any(n.startswith("solver: adszog, the default for constrained problems") for n in res.notes)


def test_cli_solve_without_solver_list_and_info_say_the_default(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["solve", f"{EXAMPLES}:capped_sphere", "--max-calls", "3000", "--no-progress", "-o", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "solver='adszog'" in out and "the default for constrained problems" in out
    assert main(["info", "adszog"]) == 0
    assert "default for: constrained problems" in capsys.readouterr().out
    assert main(["info", "dszog"]) == 0
    assert "default for" not in capsys.readouterr().out
    assert main(["list"]) == 0
    listing = capsys.readouterr().out.splitlines()
    marked = {line.split()[0] for line in listing if "(default for " in line}
    assert marked == set(DEFAULTS.values())


def test_the_bench_without_solvers_runs_the_default_of_each_instance_kind() -> None:
    tasks = make_tasks("smoke", None, seeds=1, budget=50)
    reg = default_registry()
    kinds = {inst.name: inst.kind for inst in reg.suite("smoke").instances()}
    assert len(tasks) == len(kinds) and len(set(kinds.values())) > 1
    for t in tasks:
        assert t.solver == DEFAULTS[kinds[t.instance]]
    assert make_tasks("smoke", [], seeds=1, budget=50) == tasks


# ---------------------------------------------------------------------------------------------- who is the default
def _claimant(name: str, kinds: frozenset[str]) -> SimpleNamespace:
    @hookimpl
    def zoframe_solvers() -> Sequence[SolverSpec]:
        return [SolverSpec(name, "zoframe_basic.solvers:ZOSGD", "a third-party claim", "(test)",
                           frozenset({"finite_sum"}), default_for=kinds)]

    return SimpleNamespace(zoframe_solvers=zoframe_solvers)


def test_first_party_wins_and_ties_or_no_claim_are_errors() -> None:
    import zoframe_basic.plugin

    reg = Registry(autoload=False)
    reg.register(zoframe_basic.plugin, name="basic")
    reg.register(_claimant("mine", frozenset({"finite_sum"})), name="third")
    assert reg.default_solver("finite_sum") == "zo-sgd"  # the first-party claim wins
    with pytest.raises(PluginError, match="no registered solver is the default of 'constrained'"):
        reg.default_solver("constrained")
    alone = Registry(autoload=False)
    alone.register(_claimant("mine", frozenset({"finite_sum"})), name="third")
    assert alone.default_solver("finite_sum") == "mine"  # a third-party claim alone is the default
    alone.register(_claimant("yours", frozenset({"finite_sum"})), name="fourth")
    with pytest.raises(DuplicatePluginError, match=r"2 third-party solvers .*'fourth:yours'.*'third:mine'"):
        alone.default_solver("finite_sum")
    with pytest.raises(ValueError, match="does not solve"):
        SolverSpec("x", "zoframe_basic.solvers:ZOSGD", "s", "r", frozenset({"finite_sum"}),
                   default_for=frozenset({"constrained"}))


# ---------------------------------------------------------------------------------------------- certificate arguments
@pytest.mark.parametrize("tol", [100, 1e300, float("inf"), 1.0])
def test_a_tolerance_at_which_the_certificate_cannot_fail_is_refused(tol: float) -> None:
    prob = capped_sphere()
    with pytest.raises(InvalidInputError, match=r"certify_tol.*in \(0, 1\)"):
        zoframe.minimize(prob, "slsqp-fd", rng=0, max_calls=2000, certify_tol=tol)
    with pytest.raises(InvalidInputError, match="tol must be below 1"):
        certify(CountingOracle(prob), prob.x0, tol=tol)


def test_a_point_balanced_by_nothing_has_residual_one() -> None:
    """The reason for the bound: a gradient that nothing balances gives the residual 1, which every
    tolerance below 1 refuses and every tolerance from 1 on accepts."""
    prob = zoframe.FiniteSum(lambda X: ((X - 1.0) ** 2).sum(axis=1), x0=np.zeros(3))
    cert = certify(CountingOracle(prob), prob.x0, tol=0.999)
    assert not cert.passed and cert.residual == pytest.approx(1.0)


@pytest.mark.parametrize("value", ["False", "no", "", 0, 1, None])
def test_certificate_takes_real_booleans_only(value: Any) -> None:
    with pytest.raises(InvalidInputError, match="certificate must be True or False"):
        zoframe.minimize(capped_sphere(), "slsqp-fd", rng=0, max_calls=2000, certificate=value)


def test_numpy_booleans_are_booleans() -> None:
    res = zoframe.minimize(capped_sphere(), "slsqp-fd", rng=0, max_calls=2000, certificate=np.bool_(False))
    assert not res.success and "certificate off" in res.message


def test_cli_reads_certificate_arguments_as_what_they_say(capsys: pytest.CaptureFixture[str]) -> None:
    ref = f"{EXAMPLES}:capped_sphere"
    base = ["solve", ref, "--solver", "slsqp-fd", "--max-calls", "3000", "--no-progress"]
    assert main([*base, "-p", "certify_tol=100"]) == 2
    assert "in (0, 1)" in capsys.readouterr().err
    assert main([*base, "--certify-tol", "1e300"]) == 2
    capsys.readouterr()
    main([*base, "-p", "certificate=no"])
    assert "certificate off" in capsys.readouterr().out
    main([*base, "--no-certificate"])
    assert "certificate off" in capsys.readouterr().out
    assert main([*base, "-p", "certificate=maybe"]) == 2
    assert "expected true or false" in capsys.readouterr().err
