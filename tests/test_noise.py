"""``zoframe.noise``: ECNoise (More & Wild 2011) on known noise, rounding and noise-free functions.

Each statistical claim is a share over 50 seeded cases per level, as the estimator is random (its
direction) and so is the noise.
"""

from __future__ import annotations

from collections.abc import Callable
import math

import numpy as np
import pytest

import zoframe
from zoframe.errors import InvalidParameterError, ShapeError
from zoframe.imperfect import round_significant
from zoframe.noise import NoiseEstimate, NoiseFlag, estimate_noise, gamma, noise_from_line

EPS = float(np.finfo(np.float64).eps)
X0 = np.linspace(0.1, 1.3, 6)
LEVELS = (1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2)
SEEDS = 50


def _quadratic(X: np.ndarray) -> np.ndarray:
    return 3.0 * ((X - 0.3) ** 2).sum(axis=1) + 1.5


def _exp(X: np.ndarray) -> np.ndarray:
    return np.exp(X.sum(axis=1) / 3.0)


def _sin(X: np.ndarray) -> np.ndarray:
    return np.sin(X).sum(axis=1) + 2.0


def _hs043_all(X: np.ndarray) -> np.ndarray:
    """Hock & Schittkowski's problem 43: the objective and its three constraints as four columns."""
    from zoframe_constrained.suite import HS

    tp = HS["hs043"]()
    return np.column_stack([tp.f(X), tp.g(X)])


SMOOTH: dict[str, Callable[[np.ndarray], np.ndarray]] = {"quadratic": _quadratic, "exp": _exp, "sin": _sin}


def _with_noise(f: Callable[[np.ndarray], np.ndarray], level: float, kind: str, seed: int) -> Callable[[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(10_000 + seed)

    def noisy(X: np.ndarray) -> np.ndarray:
        v = f(X)
        z = rng.standard_normal(v.shape)
        out: np.ndarray = v + level * z if kind == "absolute" else v * (1.0 + level * z)
        return out

    return noisy


@pytest.mark.parametrize("kind", ["absolute", "relative"])
@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_known_noise_is_found_within_a_factor_3(name: str, kind: str) -> None:
    f = SMOOTH[name]
    fx = abs(float(f(X0[None, :])[0]))
    for level in LEVELS:
        ratios = []
        for seed in range(SEEDS):
            est = estimate_noise(_with_noise(f, level, kind, seed), X0, np.random.default_rng(seed))
            true = level if kind == "absolute" else level * fx
            ratios.append(est.absolute / true)
        r = np.asarray(ratios)
        share = float(np.mean((r <= 3.0) & (r >= 1.0 / 3.0)))
        assert share >= 0.9, (name, kind, level, share, np.nanmedian(r))


@pytest.mark.parametrize("kind", ["absolute", "relative"])
def test_the_constraints_of_a_problem_are_estimated_column_by_column_from_one_table(kind: str) -> None:
    """HS043's objective and three constraints, all noisy: one table, four levels, each within a factor 3."""
    x = np.array([0.1, 0.9, 2.1, -0.9])  # near the solution (0, 1, 2, -1): constraints near 0 too
    fx = np.abs(_hs043_all(x[None, :])[0])
    for level in LEVELS:
        ratios = []
        for seed in range(SEEDS):
            est = estimate_noise(_with_noise(_hs043_all, level, kind, seed), x, np.random.default_rng(seed))
            assert est.per_column.shape == (4,)
            true = level if kind == "absolute" else level * fx
            ratios.append(est.per_column / true)
        r = np.asarray(ratios)
        share = float(np.mean((r <= 3.0) & (r >= 1.0 / 3.0)))
        assert share >= 0.9, (kind, level, share)


def test_a_noise_free_function_reports_its_rounding_and_says_so() -> None:
    for name, f in SMOOTH.items():
        fx = abs(float(f(X0[None, :])[0]))
        for seed in range(10):
            est = estimate_noise(f, X0, np.random.default_rng(seed))
            assert est.status == "no noise detected", (name, seed, est.status)
            assert 0.0 < est.absolute <= 4.0 * EPS * fx, (name, est.absolute / (EPS * fx))
            assert "no noise detected" in str(est) and "eps |f|" in str(est)


@pytest.mark.parametrize("digits", [4, 6, 8, 10])
def test_rounded_values_show_the_rounding_level(digits: int) -> None:
    """Values rounded to ``digits`` significant digits: a uniform error of one quantum ``q``,
    ``q = 10^(e - digits + 1)`` for ``|f|`` in ``[10^e, 10^(e+1))``, of standard deviation ``q / sqrt(12)``.

    (Not on ``_quadratic``: its Hessian is ``6 I``, so its second differences along any unit direction are
    the same number ``6 h^2``, and where that is a whole number of quanta the rounded values lie exactly
    on a parabola: no noise to see along any line at that step.)
    """
    for f in (_exp, _sin):
        fx = abs(float(f(X0[None, :])[0]))
        q = 10.0 ** (math.floor(math.log10(fx)) - digits + 1)
        ratios = []
        for seed in range(SEEDS):
            est = estimate_noise(lambda X, f=f: round_significant(f(X), digits), X0, np.random.default_rng(seed))
            ratios.append(est.absolute / (q / math.sqrt(12.0)))
        r = np.asarray(ratios)
        share = float(np.mean((r <= 3.0) & (r >= 1.0 / 3.0)))
        assert share >= 0.85 and 0.7 <= float(np.nanmedian(r)) <= 1.4, (f.__name__, digits, share, np.median(r))


def test_vectorised_columns_agree_with_column_by_column_runs() -> None:
    rng = np.random.default_rng(0)
    t = np.arange(9.0) - 4.0
    smooth = np.column_stack([np.exp(1e-3 * t), 1.0 + 1e-4 * t**2, np.sin(1e-3 * t) + 0.5, np.full(9, 2.0)])
    table = smooth + rng.standard_normal((9, 4)) * np.array([1e-9, 1e-6, 1e-12, 0.0])
    table[:, 3] = [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]  # constant: h too small
    levels, flags = noise_from_line(table)
    for j in range(4):
        lv, fl = noise_from_line(table[:, j])
        assert fl.shape == (1,) and fl[0] == flags[j]
        assert (math.isnan(lv[0]) and math.isnan(levels[j])) or lv[0] == levels[j]
    assert flags[3] == NoiseFlag.H_TOO_SMALL and math.isnan(levels[3])
    # estimate_noise: the same direction (same seed), every column decided at the first attempt
    fns = [_with_noise(f, 1e-8, "relative", 1) for f in (_quadratic, _exp, _sin)]
    seeds = [np.random.default_rng(3) for _ in range(4)]

    def together(X: np.ndarray) -> np.ndarray:
        return np.column_stack([fns[0](X), fns[1](X), fns[2](X)])

    fns_again = [_with_noise(f, 1e-8, "relative", 1) for f in (_quadratic, _exp, _sin)]
    est = estimate_noise(together, X0, seeds[0])
    assert est.attempts == 1 and est.status == "ok"
    for j in range(3):
        one = estimate_noise(fns_again[j], X0, seeds[j + 1])
        assert one.per_column[0] == est.per_column[j] and one.column_status[0] == est.column_status[j]


def test_one_batched_call_of_all_points_per_attempt() -> None:
    calls: list[int] = []

    def coarse(X: np.ndarray) -> np.ndarray:  # 3 digits: h = 1e-6 sees a constant, h too small first
        calls.append(X.shape[0])
        return round_significant(_quadratic(X), 3)

    est = estimate_noise(coarse, X0, np.random.default_rng(0), points=11)
    assert est.attempts >= 2 and len(calls) == est.attempts and all(k == 11 for k in calls)
    assert est.evaluations == 11 * est.attempts and est.h > 1e-6 * 1.3
    calls.clear()
    est = estimate_noise(_with_noise(_exp, 1e-6, "absolute", 0), X0, np.random.default_rng(0))
    assert calls == [] and est.attempts == 1 and est.evaluations == 9  # (the noisy wrapper is not counted)


def test_the_flags_h_too_small_and_h_too_large() -> None:
    const = estimate_noise(lambda X: np.full(X.shape[0], 3.0), X0, np.random.default_rng(0), retries=0)
    assert const.status == "h too small" and math.isnan(const.absolute) and const.attempts == 1
    wide = estimate_noise(_exp, X0, np.random.default_rng(0), h=0.5, retries=0)
    assert wide.status == "h too large" and math.isnan(wide.absolute)
    assert "no noise level could be estimated: h too large" in str(wide)
    # with retries the step shrinks from 0.5 until the rounding of exp shows
    again = estimate_noise(_exp, X0, np.random.default_rng(0), h=0.5, retries=3)
    assert again.status in ("ok", "no noise detected") and again.h < 0.5 and again.attempts >= 2


def test_non_finite_columns_and_mixed_statuses() -> None:
    def two(X: np.ndarray) -> np.ndarray:
        v = _with_noise(_exp, 1e-7, "absolute", 5)(X)
        bad = np.where(np.arange(X.shape[0]) == 2, np.nan, 1.0)
        return np.column_stack([v, bad])

    est = estimate_noise(two, X0, np.random.default_rng(0))
    assert est.column_status == ("ok", "non-finite values") and est.status == "non-finite values"
    assert 1e-7 / 3 < est.absolute < 3e-7 and est.accepted.tolist() == [True, False]
    assert "(the largest of 2 columns)" in str(est)


def test_gamma_and_the_unbiased_level_of_white_noise() -> None:
    assert gamma(1) == 0.5 and gamma(2) == pytest.approx(1.0 / 6.0) and gamma(4) == pytest.approx(576.0 / 40320.0)
    rng = np.random.default_rng(1)
    levels, flags = noise_from_line(rng.standard_normal((9, 4000)) * 2.5)  # pure noise: accepted at j = 1
    ok = flags == NoiseFlag.OK
    assert ok.mean() > 0.9 and abs(float(np.sqrt(np.mean(levels[ok] ** 2))) / 2.5 - 1.0) < 0.05


def test_lazy_public_names_and_the_estimate_record() -> None:
    assert zoframe.estimate_noise is estimate_noise and zoframe.noise_from_line is noise_from_line
    est = zoframe.estimate_noise(_with_noise(_sin, 1e-5, "relative", 2), X0, 4)
    assert isinstance(est, NoiseEstimate) and est.points == 9 and est.direction.shape == (6,)
    assert abs(np.linalg.norm(est.direction) - 1.0) < 1e-12
    assert est.relative == pytest.approx(est.absolute / abs(est.fx[0]))
    assert not est.per_column.flags.writeable
    assert "noise level" in str(est) and "relative to |f(x)|" in str(est)


def test_bad_input_is_refused_with_the_reason() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match="points must be odd"):
        estimate_noise(_exp, X0, rng, points=8)
    with pytest.raises(InvalidParameterError, match="points must be an integer >= 5"):
        estimate_noise(_exp, X0, rng, points=3)
    with pytest.raises(InvalidParameterError, match="h must be a finite positive step"):
        estimate_noise(_exp, X0, rng, h=0.0)
    with pytest.raises(ShapeError, match="must return"):
        estimate_noise(lambda X: np.zeros((2, 2)), X0, rng)
    with pytest.raises(ShapeError, match="1-D array"):
        estimate_noise(_exp, np.zeros((2, 2)), rng)
    with pytest.raises(ShapeError, match="at least 4 points"):
        noise_from_line(np.zeros((3, 2)))
    with pytest.raises(InvalidParameterError, match="rng must be a numpy Generator"):
        estimate_noise(_exp, X0, "seed")  # type: ignore[arg-type]
    x = X0.copy()
    estimate_noise(_exp, x, rng)
    assert np.array_equal(x, X0)  # the caller's point is not touched
