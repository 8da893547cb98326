"""benchmarks/imperfect.py: a tiny run end to end, its final JSON line and the false-claim accounting (fast)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "imperfect.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_imperfect_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_false_claims_are_counted_on_the_clean_problem(script: ModuleType) -> None:
    def row(claim: bool, err: float, passed: bool, solver: str = "cobyla") -> dict[str, object]:
        return {"group": "constrained-small", "instance": "p", "seed": 0, "level": 1e-6, "solver": solver,
                "status": "CONVERGED", "claim": claim, "rel_error": err, "violation": 0.0, "clean_passed": passed,
                "clean_residual": 0.0, "noise_ratio": 1.0, "noise_ratio_constraints": math.nan, "seconds": 0.1}
    rows = [row(True, 1e-6, True), row(True, 1e-2, True), row(True, 1e-6, False), row(True, 1e-2, False),
            row(False, 1e-2, False)]
    e = script.summarise(rows)["constrained-small"]["1e-06"]["cobyla"]
    assert (e["runs"], e["claims"], e["false_claims"], e["false_gap"], e["false_kkt"]) == (5, 4, 3, 2, 2)
    assert e["solved_gap_1e-3"] == 2 and e["median_rel_error"] == pytest.approx(1e-2)
    assert e["median_rel_error_over_sqrt_noise"] == pytest.approx(1e-2 / 1e-3)


def test_a_tiny_run_prints_its_figures(script: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    out = script.main(["--levels", "1e-6", "--seeds", "1", "--solvers", "adszog,slsqp-fd", "--only", "hs010",
                       "--m", "40", "--jobs", "1"])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("{") and '"benchmark": "imperfect"' in line
    assert out["runs"] == 2 * 2  # (1 small problem + the polytope) x 2 solvers
    for group, n in (("constrained-small", 1), ("polytope", 1)):
        for solver in ("adszog", "slsqp-fd"):
            e = out["results"][group]["1e-06"][solver]
            assert e["runs"] == n and 0 <= e["false_claims"] <= e["claims"] <= n
            assert e["noise_estimate_over_true_median"] is not None
            assert 1 / 3 <= e["noise_estimate_over_true_median"] <= 3  # relative noise 1e-6 is found at the answer
