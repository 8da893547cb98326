"""benchmarks/peers.py: its command line, the best-peer headline and the final JSON line (fast)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "peers.py"


@pytest.fixture(scope="module")
def peers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_peers_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_headline_is_against_the_fastest_peer_and_names_it(peers: ModuleType) -> None:
    medians = {"adszog": 0.1, "adszog+restore": 0.25, "scipy-cobyla": 5.0, "slsqp-fd": 0.3, "zopsgd": 40.0,
               "cma-al": None}  # fmt: skip
    head = peers.best_peer_ratio(medians, budget=60.0)
    assert head["best_peer"] == "slsqp-fd"
    assert head["best_peer_median_time"] == 0.3
    assert head["best_adszog"] == "adszog"
    assert head["speedup_adszog_vs_best_peer"] == pytest.approx(3.0)
    assert head["peers_not_reaching_target"] == ["cma-al"]
    assert head["speedup_lower_bound"] is None
    # the faster adszog variant is the one compared
    head = peers.best_peer_ratio({"adszog": 0.5, "adszog+restore": 0.2, "slsqp-fd": 1.0}, budget=60.0)
    assert head["best_adszog"] == "adszog+restore"
    assert head["speedup_adszog_vs_best_peer"] == pytest.approx(5.0)


def test_headline_when_one_side_never_reaches_the_target(peers: ModuleType) -> None:
    head = peers.best_peer_ratio({"adszog": 0.2, "slsqp-fd": None, "scipy-cobyla": None}, budget=30.0)
    assert head["best_peer"] is None and head["speedup_adszog_vs_best_peer"] is None
    assert head["speedup_lower_bound"] == pytest.approx(150.0)
    assert head["peers_not_reaching_target"] == ["scipy-cobyla", "slsqp-fd"]
    head = peers.best_peer_ratio({"adszog": None, "slsqp-fd": 2.0}, budget=30.0)
    assert head["best_peer"] == "slsqp-fd" and head["best_adszog"] is None
    assert head["speedup_adszog_vs_best_peer"] is None and head["speedup_lower_bound"] is None


def test_the_defaults_headline_compares_adszog_defaults_alone(peers: ModuleType) -> None:
    """``adszog-defaults`` is an adszog variant (never a peer); the defaults' headline leaves the other variants out."""
    medians = {"adszog-defaults": 0.5, "adszog": 0.1, "slsqp-fd": 2.0, "zoframe-slsqp-fd": 1.0}
    head = peers.best_peer_ratio(medians, budget=60.0)
    assert head["best_adszog"] == "adszog" and head["best_peer"] == "zoframe-slsqp-fd"
    peers_only = {k: v for k, v in medians.items() if k not in peers.ZOFRAME}
    alone = peers.best_peer_ratio({**peers_only, "adszog-defaults": 0.5}, budget=60.0)
    assert alone["best_adszog"] == "adszog-defaults" and alone["speedup_adszog_vs_best_peer"] == pytest.approx(2.0)
    assert "adszog-defaults" in peers.METHODS and "adszog-defaults" in peers.ZOFRAME


def test_defaults_include_slsqp_fd(peers: ModuleType) -> None:
    args = peers.parse_args([])
    assert "slsqp-fd" in args.methods and "adszog" in args.methods
    assert args.seeds == [0, 1, 2, 3, 4]
    assert "zoframe-slsqp-fd" in args.methods
    assert {"slsqp-fd", "zoframe-slsqp-fd"} <= set(peers.DETERMINISTIC)  # run once, like the COBYLAs


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--methods", "adszog,slsqp"], "unknown or no methods ['slsqp']"),
        (["--methods", ","], "unknown or no methods"),
        (["--seeds", "0,x"], "--seeds must be comma-separated integers"),
        (["--seeds", ""], "--seeds is empty"),
        (["--budget", "0"], "--budget must be a positive number"),
        (["--budget", "nan"], "--budget must be a positive number"),
        (["--peer-seeds", "0"], "--peer-seeds must be at least 1"),
        (["--repeats", "0"], "--repeats must be at least 1"),
        (["--problems", " "], "--problems is empty"),
    ],
)
def test_bad_arguments_are_clear_errors(
    peers: ModuleType, capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        peers.parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert words in err
    if "methods" in words:
        assert "slsqp-fd" in err  # the error lists the choices


def test_final_line_is_json_with_the_headline(peers: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    # short runs of the two SLSQP peers on breast-cancer pairwise (scikit-learn's bundled data): a few seconds
    out = peers.main(["--problems", "breast-cancer", "--methods", "slsqp-fd,zoframe-slsqp-fd", "--budget", "1",
                      "--seeds", "0"])  # fmt: skip
    lines = capsys.readouterr().out.strip().splitlines()
    final: dict[str, Any] = json.loads(lines[-1])
    assert final["headline"] == json.loads(json.dumps(out["headline"]))
    entry = final["problems"]["breast-cancer"]
    head = final["headline"]["breast-cancer"]
    assert head["target_f0"] == 0.18
    medians = {k: v["median_time_to_target"] for k, v in entry["methods"].items()}
    reached = {k: v for k, v in medians.items() if v is not None}
    # the best peer is the fastest of those that reached the target (None if neither did in 1 s)
    assert head["best_peer"] == (min(reached, key=reached.__getitem__) if reached else None)
    assert head["best_adszog"] is None and head["speedup_adszog_vs_best_peer"] is None  # adszog was not run
    assert head["defaults_to_target"] is None and head["defaults_to_optimum"] is None  # nor were its defaults
    assert entry["optimum_f0"] == pytest.approx(entry["reference_f0"] * (1 + peers.OPT_REL))
    for name in ("slsqp-fd", "zoframe-slsqp-fd"):  # timed to the white-box optimum too (None: not in 1 s)
        assert "median_time_to_optimum" in entry["methods"][name] and len(entry["methods"][name]["times_to_optimum"]) == 1
    d = entry["d"]
    for name in ("slsqp-fd", "zoframe-slsqp-fd"):
        run = entry["methods"][name]["runs"][0]
        assert "error" not in run, run
        assert run["evaluations"] > d + 1  # at least one forward-difference gradient, each point counted
        assert run["best_feasible_f0"] is not None and run["final_max_violation"] <= peers.VIOLATION_TOL
    assert set(final["versions"]) >= {"numpy", "scipy"} and final["blas_threads"] == 1
