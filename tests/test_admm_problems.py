"""The fused-lasso and structured-attack problems, and ``zoframe reproduce admm`` on a tiny configuration."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

import zoframe
from zoframe.errors import InvalidInputError
from zoframe.measures import central_difference_gradient
from zoframe_admm.problems import FusedLasso, StructuredAttack


@pytest.fixture(scope="module")
def news(tmp_path_factory: pytest.TempPathFactory) -> FusedLasso:
    with pytest.MonkeyPatch.context() as mp:  # the graph cache goes to a temporary directory
        mp.setenv("ZOFRAME_CACHE", str(tmp_path_factory.mktemp("cache")))
        return FusedLasso("20news", n_samples=600, seed=0)


@pytest.mark.data("20news_w100")
def test_fused_lasso_structure_and_gradient(news: FusedLasso) -> None:
    assert news.n == 300 and news.dim == 100
    assert news.test.shape[0] == 300
    assert set(np.unique(news.labels)) <= {-1.0, 1.0}
    F = news.F
    assert F.shape[1] == 100 and 0 < F.shape[0] <= 200
    np.testing.assert_array_equal(np.sort(F, axis=1)[:, [0, -1]], np.tile([-1.0, 1.0], (F.shape[0], 1)))  # e_i - e_j rows
    x = np.random.default_rng(0).standard_normal(100) * 0.1
    idx = np.arange(5)
    num = central_difference_gradient(lambda X: news.components(X, idx), x)
    np.testing.assert_allclose(news.component_gradients(x, idx), num, atol=1e-7)
    np.testing.assert_allclose(news.full_gradient(x), news.component_gradients(x, np.arange(news.n)).mean(0), atol=1e-12)


@pytest.mark.data("20news_w100")
def test_fused_lasso_svrg_admm_decreases_objective_and_test_loss(news: FusedLasso) -> None:
    res = zoframe.minimize(news, "zo-svrg-admm", rng=0, max_iter=300, rho=0.1, eta=5.0, rank_check="ignore", steps="paper")
    fun, test = res.trace["fun"], res.trace["test_loss"]
    assert fun[-1] < 0.6 * fun[0]
    assert test[-1] < 0.7 * test[0]
    assert res.measures["stationarity"] < 1e-2 * res.trace["stationarity"][0]


def test_fused_lasso_rejects_unknown_dataset() -> None:
    with pytest.raises(zoframe.InvalidInputError, match="covtype"):
        FusedLasso("covtype")


def test_structured_attack_is_black_box_and_lowers_the_attack_loss() -> None:
    prob = StructuredAttack(n=10, tau1=0.1, tau2=0.1)
    assert prob.accuracy > 0.9  # the classifier trained at construction is a real one
    X = np.zeros((3, 64))
    vals = prob.components(X, np.arange(10))
    assert vals.shape == (3, 10) and np.all(vals > 0)  # correctly classified images: positive margin
    res = zoframe.minimize(prob, "zo-saga-admm", rng=0, max_iter=150, b=4, eta=0.02, rank_check="ignore", steps="paper")
    loss = res.trace["attack_loss"]
    assert loss[-1] < 0.2 * loss[0]
    assert res.measures["fooled"] >= 0.5


@pytest.mark.data("20news_w100")
def test_reproduce_admm_tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from zoframe.cli import main

    monkeypatch.setenv("ZOFRAME_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "rep"
    code = main(["reproduce", "admm", "--quick", "--datasets", "20news", "--n-samples", "600", "--seconds", "0.4",
                 "--attack-iters", "20", "--out", str(out), "--no-progress", "--reference-iters", "300"])
    assert code == 0
    for name in ("fig1_objective_gap.png", "fig2_attack_loss.png", "fig3_group_sparsity.png", "fig4_test_loss.png"):
        assert (out / name).stat().st_size > 1000
    with (out / "fused_lasso_20news.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["solver"] for r in rows} == {"zo-svrg-admm", "zo-saga-admm", "zo-admm", "zo-sgd-admm", "zo-prox-svrg", "zo-prox-saga"}
    summary = json.loads((out / "summary.json").read_text())
    info = summary["datasets"]["20news"]
    assert set(info["seconds_to_gap"]) == {r["solver"] for r in rows}
    # the gap is taken to the reference solver's objective, not to the best compared run
    assert info["reference"]["method"].startswith("L-BFGS-B on the smoothed problem")
    best = {name: min(float(r["fun"]) for r in rows if r["solver"] == name) for name in info["seconds_to_gap"]}
    for r in rows:
        assert float(r["gap"]) == pytest.approx(float(r["fun"]) - info["f_ref"], abs=1e-15)
    assert info["f_ref"] not in best.values()
    assert {str(out / "summary.json"), str(out / "fig1_objective_gap.png")} <= set(summary["files"])
    with (out / "attack.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) >= 6 * 2


def _trace(seconds: list[float], fun: list[float]) -> dict[str, np.ndarray]:
    return {"seconds": np.asarray(seconds), "fun": np.asarray(fun)}


def test_time_to_gap_depends_on_each_run_only() -> None:
    """Adding a solver that stops early (even one far below everyone) changes no other solver's time."""
    from zoframe_admm.reproduce import time_to_gap, winner

    traces = {
        "a": _trace([0.1, 0.2, 0.3, 0.4], [1.0, 0.5, 0.1001, 0.10001]),
        "b": _trace([0.1, 0.2, 0.3], [1.0, 0.2, 0.102]),
    }
    before = time_to_gap(traces, 1e-3, 0.1)
    assert before == {"a": 0.3, "b": None}
    for extra in (_trace([0.05], [0.01]), _trace([0.05, 0.06], [2.0, 1.5]), _trace([0.01], [0.1])):
        after = time_to_gap({**traces, "early": extra}, 1e-3, 0.1)
        assert {k: after[k] for k in traces} == before
    assert winner(time_to_gap({**traces, "early": _trace([0.05], [0.01])}, 1e-3, 0.1)) == "early"
    assert winner({"a": None}) is None
    with pytest.raises(InvalidInputError, match="finite reference"):
        time_to_gap(traces, 1e-3, float("nan"))


@pytest.mark.data("20news_w100")
def test_reference_objective_is_independent_deterministic_and_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zoframe_admm.problems import FusedLasso
    from zoframe_admm.reproduce import fused_params, reference_objective

    monkeypatch.setenv("ZOFRAME_CACHE", str(tmp_path / "cache"))
    prob = FusedLasso("20news", n_samples=300, seed=0)
    ref = reference_objective(prob, iters=3000, cache_key="t")
    assert not ref.cached and ref.iterations <= 3000 and ref.grad_inf < 1e-6 and ref.smoothing_bound < 1e-9
    again = reference_objective(prob, iters=3000, cache_key="t")
    assert again.cached and again.f_ref == ref.f_ref
    assert reference_objective(prob, iters=3000, cache=False).f_ref == ref.f_ref  # deterministic
    # a short ZO run does not get below the reference by more than the reference's own accuracy
    params = fused_params(prob.smoothness(), float(np.linalg.eigvalsh(prob.A.T @ prob.A)[-1]))["zo-svrg-admm"]
    res = zoframe.minimize(prob, "zo-svrg-admm", rng=0, max_iter=300, **params)
    assert res.fun >= ref.f_ref - 1e-6
    assert ref.f_ref <= float(np.min(res.trace["fun"])) + 1e-6
