"""The ``constrained-small`` suite: small nonlinear constrained problems with known optima.

Two parts, both black boxes through :class:`zoframe.Constrained` (objective and all inequality
constraints as vectorized numpy functions; simple bounds as ``bounds=``, kept by projection):

* ``hs*`` and ``g*``: problems of the published test literature, implemented here from their
  published definitions, with the published starting point, optimal value ``f*`` and solution
  ``x*``: W. Hock and K. Schittkowski, *Test Examples for Nonlinear Programming Codes*, Lecture
  Notes in Economics and Mathematical Systems 187, Springer 1981 (``hs010`` .. ``hs113``);
  K. Schittkowski, *More Test Examples for Nonlinear Programming Codes*, LNEMS 282, Springer
  1987 (``hs215`` .. ``hs249``); J. J. Liang et al., *Problem definitions and evaluation criteria
  for the CEC 2006 special session on constrained real-parameter optimization*, 2006 (``g01``,
  ``g08``, ``g24``; these give no starting point: ours is stated with the problem). Only problems
  with inequality constraints and bounds are included (no equalities), each with at least one
  general constraint. HS writes constraints as ``c(x) >= 0``; here every constraint is
  ``g(x) = -c(x) <= 0``.
* ``qp-*`` and ``qcqp-*``: random convex quadratic programs (linear constraints) and quadratically
  constrained quadratic programs, seeded, whose solution is computed with cvxpy (Clarabel) when
  the instance is built for its ``f*`` (``f_star`` is filled in by :func:`instances`).

``instances(seed=0, random=12)`` returns the :class:`~zoframe.specs.SuiteInstance` records;
``benchmarks/constrained_suite.py`` runs solvers on all of them at equal budgets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
import functools
import math
from typing import Any

import numpy as np

import zoframe
from zoframe.protocols import Array, IntArray
from zoframe.specs import SuiteInstance

__all__ = ["HS", "TestProblem", "build", "instances", "random_problem"]

_INF = math.inf
_S3 = math.sqrt(3.0)


@dataclass(frozen=True)
class TestProblem:
    """One published test problem: ``min f(x)`` s.t. ``g(x) <= 0`` and ``lower <= x <= upper``.

    ``f(X)`` maps ``(k, d)`` points to ``(k,)`` values and ``g(X)`` to ``(k, m)`` constraint
    values; ``x0`` is the published start, ``f_star`` / ``x_star`` the published optimum.
    """

    name: str
    f: Callable[[Array], Array]
    g: Callable[[Array], Array]
    x0: tuple[float, ...]
    f_star: float
    x_star: tuple[float, ...]
    lower: tuple[float, ...] | None = None
    upper: tuple[float, ...] | None = None
    reference: str = "Hock & Schittkowski 1981"
    tags: frozenset[str] = frozenset()

    @property
    def dim(self) -> int:
        return len(self.x0)

    @functools.cached_property
    def m(self) -> int:
        return int(self.g(np.asarray(self.x0, dtype=np.float64)[None, :]).shape[1])

    def problem(self) -> zoframe.Constrained:
        """The black-box problem (objective and constraints through the counting oracle)."""
        g = self.g

        def constraints(X: Array, idx: IntArray) -> Array:
            out: Array = g(X)[:, idx]
            return out

        bounds = None
        if self.lower is not None or self.upper is not None:
            bounds = (
                self.lower if self.lower is not None else -_INF,
                self.upper if self.upper is not None else _INF,
            )
        return zoframe.Constrained(
            self.f, constraints, m=self.m, x0=np.asarray(self.x0, dtype=np.float64), bounds=bounds, name=self.name,
        )  # fmt: skip


def _cols(X: Array) -> list[Array]:
    return [X[:, i] for i in range(X.shape[1])]


def _stack(*cs: Array) -> Array:
    """Constraints ``c_j(x) >= 0`` (HS form) to the ``g_j = -c_j <= 0`` matrix."""
    return -np.stack(cs, axis=1)


def _rosen(X: Array) -> Array:
    x1, x2 = X[:, 0], X[:, 1]
    out: Array = 100.0 * (x2 - x1**2) ** 2 + (1.0 - x1) ** 2
    return out


# ---------------------------------------------------------------------------------------------- HS 1981
def _hs10() -> TestProblem:
    return TestProblem(
        "hs010", lambda X: X[:, 0] - X[:, 1],
        lambda X: _stack(-3 * X[:, 0] ** 2 + 2 * X[:, 0] * X[:, 1] - X[:, 1] ** 2 + 1),
        (-10.0, 10.0), -1.0, (0.0, 1.0),
    )  # fmt: skip


def _hs11() -> TestProblem:
    return TestProblem(
        "hs011", lambda X: (X[:, 0] - 5) ** 2 + X[:, 1] ** 2 - 25, lambda X: _stack(-X[:, 0] ** 2 + X[:, 1]),
        (4.9, 0.1), -8.498464223, (1.2347728, 1.5246639),
    )  # fmt: skip


def _hs12() -> TestProblem:
    def f(X: Array) -> Array:
        x1, x2 = _cols(X)
        out: Array = 0.5 * x1**2 + x2**2 - x1 * x2 - 7 * x1 - 7 * x2
        return out

    return TestProblem("hs012", f, lambda X: _stack(25 - 4 * X[:, 0] ** 2 - X[:, 1] ** 2), (0.0, 0.0), -30.0, (2.0, 3.0))


def _hs13() -> TestProblem:
    return TestProblem(
        "hs013", lambda X: (X[:, 0] - 2) ** 2 + X[:, 1] ** 2, lambda X: _stack((1 - X[:, 0]) ** 3 - X[:, 1]),
        (-2.0, -2.0), 1.0, (1.0, 0.0), lower=(0.0, 0.0), tags=frozenset({"degenerate"}),
    )  # fmt: skip


def _hs15() -> TestProblem:
    return TestProblem(
        "hs015", _rosen, lambda X: _stack(X[:, 0] * X[:, 1] - 1, X[:, 0] + X[:, 1] ** 2),
        (-2.0, 1.0), 306.5, (0.5, 2.0), upper=(0.5, _INF),
    )  # fmt: skip


def _hs16() -> TestProblem:
    return TestProblem(
        "hs016", _rosen, lambda X: _stack(X[:, 0] + X[:, 1] ** 2, X[:, 0] ** 2 + X[:, 1]),
        (-2.0, 1.0), 0.25, (0.5, 0.25), lower=(-0.5, -_INF), upper=(0.5, 1.0),
    )  # fmt: skip


def _hs17() -> TestProblem:
    return TestProblem(
        "hs017", _rosen, lambda X: _stack(X[:, 1] ** 2 - X[:, 0], X[:, 0] ** 2 - X[:, 1]),
        (-2.0, 1.0), 1.0, (0.0, 0.0), lower=(-0.5, -_INF), upper=(0.5, 1.0),
    )  # fmt: skip


def _hs18() -> TestProblem:
    return TestProblem(
        "hs018", lambda X: 0.01 * X[:, 0] ** 2 + X[:, 1] ** 2,
        lambda X: _stack(X[:, 0] * X[:, 1] - 25, X[:, 0] ** 2 + X[:, 1] ** 2 - 25),
        (2.0, 2.0), 5.0, (math.sqrt(250.0), math.sqrt(2.5)), lower=(2.0, 0.0), upper=(50.0, 50.0),
    )  # fmt: skip


def _hs19() -> TestProblem:
    return TestProblem(
        "hs019", lambda X: (X[:, 0] - 10) ** 3 + (X[:, 1] - 20) ** 3,
        lambda X: _stack((X[:, 0] - 5) ** 2 + (X[:, 1] - 5) ** 2 - 100, -((X[:, 1] - 5) ** 2) - (X[:, 0] - 6) ** 2 + 82.81),
        (20.1, 5.84), -6961.81381, (14.095, 0.84296079), lower=(13.0, 0.0), upper=(100.0, 100.0),
    )  # fmt: skip


def _hs20() -> TestProblem:
    return TestProblem(
        "hs020", _rosen,
        lambda X: _stack(X[:, 0] + X[:, 1] ** 2, X[:, 0] ** 2 + X[:, 1], X[:, 0] ** 2 + X[:, 1] ** 2 - 1),
        (-2.0, 1.0), 81.5 - 25 * _S3, (0.5, _S3 / 2), lower=(-0.5, -_INF), upper=(0.5, _INF),
    )  # fmt: skip


def _hs21() -> TestProblem:
    return TestProblem(
        "hs021", lambda X: 0.01 * X[:, 0] ** 2 + X[:, 1] ** 2 - 100, lambda X: _stack(10 * X[:, 0] - X[:, 1] - 10),
        (-1.0, -1.0), -99.96, (2.0, 0.0), lower=(2.0, -50.0), upper=(50.0, 50.0),
    )  # fmt: skip


def _hs22() -> TestProblem:
    return TestProblem(
        "hs022", lambda X: (X[:, 0] - 2) ** 2 + (X[:, 1] - 1) ** 2,
        lambda X: _stack(-X[:, 0] - X[:, 1] + 2, -X[:, 0] ** 2 + X[:, 1]),
        (2.0, 2.0), 1.0, (1.0, 1.0),
    )  # fmt: skip


def _hs23_g(X: Array) -> Array:
    x1, x2 = X[:, 0], X[:, 1]
    return _stack(x1 + x2 - 1, x1**2 + x2**2 - 1, 9 * x1**2 + x2**2 - 9, x1**2 - x2, x2**2 - x1)


def _hs23() -> TestProblem:
    return TestProblem(
        "hs023", lambda X: X[:, 0] ** 2 + X[:, 1] ** 2, _hs23_g, (3.0, 1.0), 2.0, (1.0, 1.0),
        lower=(-50.0, -50.0), upper=(50.0, 50.0),
    )  # fmt: skip


def _hs24() -> TestProblem:
    return TestProblem(
        "hs024", lambda X: ((X[:, 0] - 3) ** 2 - 9) * X[:, 1] ** 3 / (27 * _S3),
        lambda X: _stack(X[:, 0] / _S3 - X[:, 1], X[:, 0] + _S3 * X[:, 1], -X[:, 0] - _S3 * X[:, 1] + 6),
        (1.0, 0.5), -1.0, (3.0, _S3), lower=(0.0, 0.0),
    )  # fmt: skip


def _hs29() -> TestProblem:
    return TestProblem(
        "hs029", lambda X: -X[:, 0] * X[:, 1] * X[:, 2],
        lambda X: _stack(-X[:, 0] ** 2 - 2 * X[:, 1] ** 2 - 4 * X[:, 2] ** 2 + 48),
        (1.0, 1.0, 1.0), -16 * math.sqrt(2.0), (4.0, 2 * math.sqrt(2.0), 2.0),
    )  # fmt: skip


def _hs30() -> TestProblem:
    return TestProblem(
        "hs030", lambda X: (X**2).sum(axis=1), lambda X: _stack(X[:, 0] ** 2 + X[:, 1] ** 2 - 1),
        (1.0, 1.0, 1.0), 1.0, (1.0, 0.0, 0.0), lower=(1.0, -10.0, -10.0), upper=(10.0, 10.0, 10.0),
    )  # fmt: skip


def _hs31() -> TestProblem:
    return TestProblem(
        "hs031", lambda X: 9 * X[:, 0] ** 2 + X[:, 1] ** 2 + 9 * X[:, 2] ** 2, lambda X: _stack(X[:, 0] * X[:, 1] - 1),
        (1.0, 1.0, 1.0), 6.0, (1 / _S3, _S3, 0.0), lower=(-10.0, 1.0, -10.0), upper=(10.0, 10.0, 1.0),
    )  # fmt: skip


def _hs33() -> TestProblem:
    return TestProblem(
        "hs033", lambda X: (X[:, 0] - 1) * (X[:, 0] - 2) * (X[:, 0] - 3) + X[:, 2],
        lambda X: _stack(X[:, 2] ** 2 - X[:, 0] ** 2 - X[:, 1] ** 2, (X**2).sum(axis=1) - 4),
        (0.0, 0.0, 3.0), math.sqrt(2.0) - 6, (0.0, math.sqrt(2.0), math.sqrt(2.0)),
        lower=(0.0, 0.0, 0.0), upper=(_INF, _INF, 5.0),
    )  # fmt: skip


def _hs34() -> TestProblem:
    return TestProblem(
        "hs034", lambda X: -X[:, 0], lambda X: _stack(X[:, 1] - np.exp(X[:, 0]), X[:, 2] - np.exp(X[:, 1])),
        (0.0, 1.05, 2.9), -math.log(math.log(10.0)), (math.log(math.log(10.0)), math.log(10.0), 10.0),
        lower=(0.0, 0.0, 0.0), upper=(100.0, 100.0, 10.0),
    )  # fmt: skip


def _hs35() -> TestProblem:
    def f(X: Array) -> Array:
        x1, x2, x3 = _cols(X)
        out: Array = 9 - 8 * x1 - 6 * x2 - 4 * x3 + 2 * x1**2 + 2 * x2**2 + x3**2 + 2 * x1 * x2 + 2 * x1 * x3
        return out

    return TestProblem(
        "hs035", f, lambda X: _stack(3 - X[:, 0] - X[:, 1] - 2 * X[:, 2]), (0.5, 0.5, 0.5), 1 / 9, (4 / 3, 7 / 9, 4 / 9),
        lower=(0.0, 0.0, 0.0),
    )  # fmt: skip


def _hs36() -> TestProblem:
    return TestProblem(
        "hs036", lambda X: -X[:, 0] * X[:, 1] * X[:, 2], lambda X: _stack(72 - X[:, 0] - 2 * X[:, 1] - 2 * X[:, 2]),
        (10.0, 10.0, 10.0), -3300.0, (20.0, 11.0, 15.0), lower=(0.0, 0.0, 0.0), upper=(20.0, 11.0, 42.0),
    )  # fmt: skip


def _hs37() -> TestProblem:
    return TestProblem(
        "hs037", lambda X: -X[:, 0] * X[:, 1] * X[:, 2],
        lambda X: _stack(72 - X[:, 0] - 2 * X[:, 1] - 2 * X[:, 2], X[:, 0] + 2 * X[:, 1] + 2 * X[:, 2]),
        (10.0, 10.0, 10.0), -3456.0, (24.0, 12.0, 12.0), lower=(0.0, 0.0, 0.0), upper=(42.0, 42.0, 42.0),
    )  # fmt: skip


def _hs43() -> TestProblem:
    def f(X: Array) -> Array:
        x1, x2, x3, x4 = _cols(X)
        out: Array = x1**2 + x2**2 + 2 * x3**2 + x4**2 - 5 * x1 - 5 * x2 - 21 * x3 + 7 * x4
        return out

    def g(X: Array) -> Array:
        x1, x2, x3, x4 = _cols(X)
        return _stack(
            8 - x1**2 - x2**2 - x3**2 - x4**2 - x1 + x2 - x3 + x4,
            10 - x1**2 - 2 * x2**2 - x3**2 - 2 * x4**2 + x1 + x4,
            5 - 2 * x1**2 - x2**2 - x3**2 - 2 * x1 + x2 + x4,
        )

    return TestProblem("hs043", f, g, (0.0,) * 4, -44.0, (0.0, 1.0, 2.0, -1.0))


def _hs44() -> TestProblem:
    def f(X: Array) -> Array:
        x1, x2, x3, x4 = _cols(X)
        out: Array = x1 - x2 - x3 - x1 * x3 + x1 * x4 + x2 * x3 - x2 * x4
        return out

    def g(X: Array) -> Array:
        x1, x2, x3, x4 = _cols(X)
        return _stack(8 - x1 - 2 * x2, 12 - 4 * x1 - x2, 12 - 3 * x1 - 4 * x2, 8 - 2 * x3 - x4, 8 - x3 - 2 * x4, 5 - x3 - x4)

    return TestProblem("hs044", f, g, (0.0,) * 4, -15.0, (0.0, 3.0, 0.0, 4.0), lower=(0.0,) * 4)


def _hs64() -> TestProblem:
    def f(X: Array) -> Array:
        x1, x2, x3 = _cols(X)
        out: Array = 5 * x1 + 50000 / x1 + 20 * x2 + 72000 / x2 + 10 * x3 + 144000 / x3
        return out

    return TestProblem(
        "hs064", f, lambda X: _stack(1 - 4 / X[:, 0] - 32 / X[:, 1] - 120 / X[:, 2]),
        (1.0, 1.0, 1.0), 6299.842428, (108.7347, 85.12613, 204.3247), lower=(1e-5,) * 3,
    )  # fmt: skip


def _hs65() -> TestProblem:
    return TestProblem(
        "hs065", lambda X: (X[:, 0] - X[:, 1]) ** 2 + (X[:, 0] + X[:, 1] - 10) ** 2 / 9 + (X[:, 2] - 5) ** 2,
        lambda X: _stack(48 - (X**2).sum(axis=1)),
        (-5.0, 5.0, 0.0), 0.9535288567, (3.650461821, 3.65046168, 4.6204170507),
        lower=(-4.5, -4.5, -5.0), upper=(4.5, 4.5, 5.0),
    )  # fmt: skip


def _hs66() -> TestProblem:
    return TestProblem(
        "hs066", lambda X: 0.2 * X[:, 2] - 0.8 * X[:, 0],
        lambda X: _stack(X[:, 1] - np.exp(X[:, 0]), X[:, 2] - np.exp(X[:, 1])),
        (0.0, 1.05, 2.9), 0.5181632741, (0.1841264879, 1.202167873, 3.327322322),
        lower=(0.0, 0.0, 0.0), upper=(100.0, 100.0, 10.0),
    )  # fmt: skip


def _hs72() -> TestProblem:
    def g(X: Array) -> Array:
        x1, x2, x3, x4 = _cols(X)
        return _stack(
            0.0401 - 4 / x1 - 2.25 / x2 - 1 / x3 - 0.25 / x4, 0.010085 - 0.16 / x1 - 0.36 / x2 - 0.64 / x3 - 0.64 / x4
        )

    return TestProblem(
        "hs072", lambda X: 1 + X.sum(axis=1), g, (1.0,) * 4, 727.67937, (193.4071, 179.5475, 185.0186, 168.7062),
        lower=(0.001,) * 4, upper=(4e5, 3e5, 2e5, 1e5),
    )  # fmt: skip


def _hs76() -> TestProblem:
    def f(X: Array) -> Array:
        x1, x2, x3, x4 = _cols(X)
        out: Array = x1**2 + 0.5 * x2**2 + x3**2 + 0.5 * x4**2 - x1 * x3 + x3 * x4 - x1 - 3 * x2 + x3 - x4
        return out

    def g(X: Array) -> Array:
        x1, x2, x3, x4 = _cols(X)
        return _stack(5 - x1 - 2 * x2 - x3 - x4, 4 - 3 * x1 - x2 - 2 * x3 + x4, x2 + 4 * x3 - 1.5)

    return TestProblem(
        "hs076", f, g, (0.5,) * 4, -4.681818181, (0.2727273, 2.090909, 0.0, 0.5454545), lower=(0.0,) * 4
    )


def _hs83() -> TestProblem:
    def f(X: Array) -> Array:
        x1, x3, x5 = X[:, 0], X[:, 2], X[:, 4]
        out: Array = 5.3578547 * x3**2 + 0.8356891 * x1 * x5 + 37.293239 * x1 - 40792.141
        return out

    def g(X: Array) -> Array:
        x1, x2, x3, x4, x5 = _cols(X)
        a1 = 85.334407 + 0.0056858 * x2 * x5 + 0.0006262 * x1 * x4 - 0.0022053 * x3 * x5
        a2 = 80.51249 + 0.0071317 * x2 * x5 + 0.0029955 * x1 * x2 + 0.0021813 * x3**2
        a3 = 9.300961 + 0.0047026 * x3 * x5 + 0.0012547 * x1 * x3 + 0.0019085 * x3 * x4
        return _stack(a1, 92 - a1, a2 - 90, 110 - a2, a3 - 20, 25 - a3)

    return TestProblem(
        "hs083", f, g, (78.0, 33.0, 27.0, 27.0, 27.0), -30665.53867, (78.0, 33.0, 29.99526, 45.0, 36.77581),
        lower=(78.0, 33.0, 27.0, 27.0, 27.0), upper=(102.0, 45.0, 45.0, 45.0, 45.0),
    )  # fmt: skip


def _hs93() -> TestProblem:
    def parts(X: Array) -> tuple[Array, Array]:
        x1, x2, x3, x4 = X[:, 0], X[:, 1], X[:, 2], X[:, 3]
        return x1 * x4 * (x1 + x2 + x3), x2 * x3 * (x1 + 1.57 * x2 + x4)

    def f(X: Array) -> Array:
        a, b = parts(X)
        out: Array = 0.0204 * a + 0.0187 * b + 0.0607 * a * X[:, 4] ** 2 + 0.0437 * b * X[:, 5] ** 2
        return out

    def g(X: Array) -> Array:
        a, b = parts(X)
        return _stack(0.001 * np.prod(X, axis=1) - 2.07, 1 - 0.00062 * a * X[:, 4] ** 2 - 0.00058 * b * X[:, 5] ** 2)

    return TestProblem(
        "hs093", f, g, (5.54, 4.4, 12.02, 11.82, 0.702, 0.852), 135.075961,
        (5.332666, 4.656744, 10.43299, 12.08230, 0.7526074, 0.8786508), lower=(0.0,) * 6,
    )  # fmt: skip


def _hs95_family(name: str, b: tuple[float, float, float, float], f_star: float, x_star: tuple[float, ...]) -> TestProblem:
    def f(X: Array) -> Array:
        out: Array = X @ np.array([4.3, 31.8, 63.3, 15.8, 68.5, 4.7])
        return out

    def g(X: Array) -> Array:
        x1, x2, x3, x4, x5, x6 = _cols(X)
        c1 = (17.1 * x1 + 38.2 * x2 + 204.2 * x3 + 212.3 * x4 + 623.4 * x5 + 1495.5 * x6 - 169 * x1 * x3
              - 3580 * x3 * x5 - 3810 * x4 * x5 - 18500 * x4 * x6 - 24300 * x5 * x6)  # fmt: skip
        c2 = (17.9 * x1 + 36.8 * x2 + 113.9 * x3 + 169.7 * x4 + 337.8 * x5 + 1385.2 * x6 - 139 * x1 * x3
              - 2450 * x4 * x5 - 16600 * x4 * x6 - 17200 * x5 * x6)  # fmt: skip
        c3 = -273 * x2 - 70 * x4 - 819 * x5 + 26000 * x4 * x5
        c4 = 159.9 * x1 - 311 * x2 + 587 * x4 + 391 * x5 + 2198 * x6 - 14000 * x1 * x6
        return _stack(c1 - b[0], c2 - b[1], c3 - b[2], c4 - b[3])

    return TestProblem(
        name, f, g, (0.0,) * 6, f_star, x_star, lower=(0.0,) * 6, upper=(0.31, 0.046, 0.068, 0.042, 0.028, 0.0134),
    )  # fmt: skip


def _hs95() -> TestProblem:
    return _hs95_family("hs095", (4.97, -1.88, -29.08, -78.02), 0.015619514, (0.0, 0.0, 0.0, 0.0, 0.0, 4.97 / 1495.5))


def _hs96() -> TestProblem:
    return _hs95_family("hs096", (4.97, -1.88, -69.08, -118.02), 0.015619514, (0.0, 0.0, 0.0, 0.0, 0.0, 4.97 / 1495.5))


def _hs97() -> TestProblem:
    return _hs95_family(
        "hs097", (32.97, 25.12, -29.08, -78.02), 3.1358091, (0.2685649, 0.0, 0.0, 0.0, 0.028, 0.0134)
    )


def _hs98() -> TestProblem:
    return _hs95_family(
        "hs098", (32.97, 25.12, -124.08, -173.02), 3.1358091, (0.2685649, 0.0, 0.0, 0.0, 0.028, 0.0134)
    )


def _hs100() -> TestProblem:
    def f(X: Array) -> Array:
        x1, x2, x3, x4, x5, x6, x7 = _cols(X)
        out: Array = ((x1 - 10) ** 2 + 5 * (x2 - 12) ** 2 + x3**4 + 3 * (x4 - 11) ** 2 + 10 * x5**6 + 7 * x6**2
                      + x7**4 - 4 * x6 * x7 - 10 * x6 - 8 * x7)  # fmt: skip
        return out

    def g(X: Array) -> Array:
        x1, x2, x3, x4, x5, x6, x7 = _cols(X)
        return _stack(
            127 - 2 * x1**2 - 3 * x2**4 - x3 - 4 * x4**2 - 5 * x5,
            282 - 7 * x1 - 3 * x2 - 10 * x3**2 - x4 + x5,
            196 - 23 * x1 - x2**2 - 6 * x6**2 + 8 * x7,
            -4 * x1**2 - x2**2 + 3 * x1 * x2 - 2 * x3**2 - 5 * x6 + 11 * x7,
        )

    return TestProblem(
        "hs100", f, g, (1.0, 2.0, 0.0, 4.0, 0.0, 1.0, 1.0), 680.6300573,
        (2.330499, 1.951372, -0.4775414, 4.365726, -0.6244870, 1.038131, 1.594227),
    )  # fmt: skip


def _hs104() -> TestProblem:
    def f(X: Array) -> Array:
        x = _cols(X)
        out: Array = 0.4 * x[0] ** 0.67 * x[6] ** -0.67 + 0.4 * x[1] ** 0.67 * x[7] ** -0.67 + 10 - x[0] - x[1]
        return out

    def g(X: Array) -> Array:
        x = _cols(X)
        fx = f(X)
        return _stack(
            1 - 0.0588 * x[4] * x[6] - 0.1 * x[0],
            1 - 0.0588 * x[5] * x[7] - 0.1 * x[0] - 0.1 * x[1],
            1 - 4 * x[2] / x[4] - 2 / (x[2] ** 0.71 * x[4]) - 0.0588 * x[6] / x[2] ** 1.3,
            1 - 4 * x[3] / x[5] - 2 / (x[3] ** 0.71 * x[5]) - 0.0588 * x[7] / x[3] ** 1.3,
            fx - 0.1,
            4.2 - fx,
        )

    return TestProblem(
        "hs104", f, g, (6.0, 3.0, 0.4, 0.2, 6.0, 6.0, 1.0, 0.5), 3.9511634396,
        (6.465114, 2.232709, 0.6673975, 0.5957564, 5.932676, 5.527235, 1.013322, 0.4006682),
        lower=(0.1,) * 8, upper=(10.0,) * 8,
    )  # fmt: skip


def _hs106() -> TestProblem:
    def g(X: Array) -> Array:
        x1, x2, x3, x4, x5, x6, x7, x8 = _cols(X)
        return _stack(
            1 - 0.0025 * (x4 + x6),
            1 - 0.0025 * (x5 + x7 - x4),
            1 - 0.01 * (x8 - x5),
            x1 * x6 - 833.33252 * x4 - 100 * x1 + 83333.333,
            x2 * x7 - 1250 * x5 - x2 * x4 + 1250 * x4,
            x3 * x8 - 1250000 - x3 * x5 + 2500 * x5,
        )

    return TestProblem(
        "hs106", lambda X: X[:, 0] + X[:, 1] + X[:, 2], g, (5000.0, 5000.0, 5000.0, 200.0, 350.0, 150.0, 225.0, 425.0),
        7049.248020528, (579.3035, 1359.9613, 5109.9832, 182.0174, 295.6007, 217.9826, 286.4168, 395.6007),
        lower=(100.0, 1000.0, 1000.0, 10.0, 10.0, 10.0, 10.0, 10.0), upper=(10000.0,) * 3 + (1000.0,) * 5,
        reference="Hock & Schittkowski 1981; f* as corrected in CEC 2006 (g10): 7049.2480, not 7049.3309",
        tags=frozenset({"badly-scaled"}),
    )  # fmt: skip


def _hs108() -> TestProblem:
    def f(X: Array) -> Array:
        x = _cols(X)
        out: Array = -0.5 * (x[0] * x[3] - x[1] * x[2] + x[2] * x[8] - x[4] * x[8] + x[4] * x[7] - x[5] * x[6])
        return out

    def g(X: Array) -> Array:
        x = _cols(X)
        return _stack(
            1 - x[2] ** 2 - x[3] ** 2,
            1 - x[8] ** 2,
            1 - x[4] ** 2 - x[5] ** 2,
            1 - x[0] ** 2 - (x[1] - x[8]) ** 2,
            1 - (x[0] - x[4]) ** 2 - (x[1] - x[5]) ** 2,
            1 - (x[0] - x[6]) ** 2 - (x[1] - x[7]) ** 2,
            1 - (x[2] - x[4]) ** 2 - (x[3] - x[5]) ** 2,
            1 - (x[2] - x[6]) ** 2 - (x[3] - x[7]) ** 2,
            1 - x[6] ** 2 - (x[7] - x[8]) ** 2,
            x[0] * x[3] - x[1] * x[2],
            x[2] * x[8],
            -x[4] * x[8],
            x[4] * x[7] - x[5] * x[6],
        )

    return TestProblem(
        "hs108", f, g, (1.0,) * 9, -0.8660254038,
        (0.8841292, 0.4672425, 0.03742076, 0.9992996, 0.8841292, 0.4672425, 0.03742076, 0.9992996, 0.0),
        lower=(-_INF,) * 8 + (0.0,),
    )  # fmt: skip


def _hs113() -> TestProblem:
    def f(X: Array) -> Array:
        x = _cols(X)
        out: Array = (x[0] ** 2 + x[1] ** 2 + x[0] * x[1] - 14 * x[0] - 16 * x[1] + (x[2] - 10) ** 2
                      + 4 * (x[3] - 5) ** 2 + (x[4] - 3) ** 2 + 2 * (x[5] - 1) ** 2 + 5 * x[6] ** 2
                      + 7 * (x[7] - 11) ** 2 + 2 * (x[8] - 10) ** 2 + (x[9] - 7) ** 2 + 45)  # fmt: skip
        return out

    def g(X: Array) -> Array:
        x = _cols(X)
        return _stack(
            105 - 4 * x[0] - 5 * x[1] + 3 * x[6] - 9 * x[7],
            -10 * x[0] + 8 * x[1] + 17 * x[6] - 2 * x[7],
            8 * x[0] - 2 * x[1] - 5 * x[8] + 2 * x[9] + 12,
            -3 * (x[0] - 2) ** 2 - 4 * (x[1] - 3) ** 2 - 2 * x[2] ** 2 + 7 * x[3] + 120,
            -5 * x[0] ** 2 - 8 * x[1] - (x[2] - 6) ** 2 + 2 * x[3] + 40,
            -0.5 * (x[0] - 8) ** 2 - 2 * (x[1] - 4) ** 2 - 3 * x[4] ** 2 + x[5] + 30,
            -x[0] ** 2 - 2 * (x[1] - 2) ** 2 + 2 * x[0] * x[1] - 14 * x[4] + 6 * x[5],
            3 * x[0] - 6 * x[1] - 12 * (x[8] - 8) ** 2 + 7 * x[9],
        )

    return TestProblem(
        "hs113", f, g, (2.0, 3.0, 5.0, 5.0, 1.0, 2.0, 7.0, 3.0, 6.0, 10.0), 24.3062091,
        (2.171996, 2.363683, 8.773926, 5.095984, 0.9906548, 1.430574, 1.321644, 9.828726, 8.280092, 8.375927),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------- Schittkowski 1987
_S87 = "Schittkowski 1987"


def _hs215() -> TestProblem:
    return TestProblem(
        "hs215", lambda X: X[:, 1], lambda X: _stack(X[:, 1] - X[:, 0] ** 2), (1.0, 1.0), 0.0, (0.0, 0.0),
        lower=(0.0, -_INF), reference=_S87,
    )  # fmt: skip


def _hs218() -> TestProblem:
    return TestProblem(
        "hs218", lambda X: X[:, 1], lambda X: _stack(X[:, 1] - X[:, 0] ** 2), (9.0, 100.0), 0.0, (0.0, 0.0),
        lower=(-_INF, 0.0), reference=_S87,
    )  # fmt: skip


def _hs224() -> TestProblem:
    def g(X: Array) -> Array:
        x1, x2 = _cols(X)
        return _stack(x1 + 3 * x2, 18 - x1 - 3 * x2, x1 + x2, 8 - x1 - x2)

    return TestProblem(
        "hs224", lambda X: 2 * X[:, 0] ** 2 + X[:, 1] ** 2 - 48 * X[:, 0] - 40 * X[:, 1], g, (0.1, 0.1), -304.0,
        (4.0, 4.0), lower=(0.0, 0.0), upper=(6.0, 6.0), reference=_S87,
    )  # fmt: skip


def _hs226() -> TestProblem:
    return TestProblem(
        "hs226", lambda X: -X[:, 0] * X[:, 1],
        lambda X: _stack(X[:, 0] ** 2 + X[:, 1] ** 2, 1 - X[:, 0] ** 2 - X[:, 1] ** 2),
        (0.8, 0.05), -0.5, (1 / math.sqrt(2.0), 1 / math.sqrt(2.0)), lower=(0.0, 0.0), reference=_S87,
    )  # fmt: skip


def _hs227() -> TestProblem:
    return TestProblem(
        "hs227", lambda X: (X[:, 0] - 2) ** 2 + (X[:, 1] - 1) ** 2,
        lambda X: _stack(-X[:, 0] ** 2 + X[:, 1], X[:, 0] - X[:, 1] ** 2), (0.5, 0.5), 1.0, (1.0, 1.0), reference=_S87,
    )  # fmt: skip


def _hs228() -> TestProblem:
    return TestProblem(
        "hs228", lambda X: X[:, 0] ** 2 + X[:, 1],
        lambda X: _stack(-X[:, 0] - X[:, 1] + 1, -(X[:, 0] ** 2 + X[:, 1] ** 2) + 9), (0.0, 0.0), -3.0, (0.0, -3.0),
        reference=_S87,
    )  # fmt: skip


def _hs231() -> TestProblem:
    return TestProblem(
        "hs231", _rosen, lambda X: _stack(X[:, 0] / 3 + X[:, 1] + 0.1, -X[:, 0] / 3 + X[:, 1] + 0.1),
        (-1.2, 1.0), 0.0, (1.0, 1.0), reference=_S87,
    )  # fmt: skip


def _hs233() -> TestProblem:
    return TestProblem(
        "hs233", _rosen, lambda X: _stack(X[:, 0] ** 2 + X[:, 1] ** 2 - 0.25), (1.2, 1.0), 0.0, (1.0, 1.0),
        reference=_S87,
    )  # fmt: skip


def _hs234() -> TestProblem:
    return TestProblem(
        "hs234", lambda X: (X[:, 1] - X[:, 0]) ** 4 - (1 - X[:, 0]), lambda X: _stack(1 - X[:, 0] ** 2 - X[:, 1] ** 2),
        (1.0, 1.0), -0.8, (0.2, 0.2), lower=(0.2, 0.2), upper=(2.0, 2.0), reference=_S87,
    )  # fmt: skip


def _hs249() -> TestProblem:
    return TestProblem(
        "hs249", lambda X: (X**2).sum(axis=1), lambda X: _stack(X[:, 0] ** 2 + X[:, 1] ** 2 - 1),
        (1.0, 1.0, 1.0), 1.0, (1.0, 0.0, 0.0), lower=(1.0, -_INF, -_INF), reference=_S87,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------- CEC 2006
_CEC = "Liang et al., CEC 2006 constrained real-parameter optimization (our start point)"


def _g01() -> TestProblem:
    def f(X: Array) -> Array:
        out: Array = 5 * X[:, :4].sum(axis=1) - 5 * (X[:, :4] ** 2).sum(axis=1) - X[:, 4:].sum(axis=1)
        return out

    def g(X: Array) -> Array:
        x = _cols(X)
        c = [  # CEC writes g <= 0
            2 * x[0] + 2 * x[1] + x[9] + x[10] - 10,
            2 * x[0] + 2 * x[2] + x[9] + x[11] - 10,
            2 * x[1] + 2 * x[2] + x[10] + x[11] - 10,
            -8 * x[0] + x[9],
            -8 * x[1] + x[10],
            -8 * x[2] + x[11],
            -2 * x[3] - x[4] + x[9],
            -2 * x[5] - x[6] + x[10],
            -2 * x[7] - x[8] + x[11],
        ]
        return np.stack(c, axis=1)

    up = (1.0,) * 9 + (100.0, 100.0, 100.0, 1.0)
    return TestProblem(
        "g01", f, g, (0.0,) * 13, -15.0, (1.0,) * 9 + (3.0, 3.0, 3.0, 1.0), lower=(0.0,) * 13, upper=up, reference=_CEC,
    )  # fmt: skip


def _g08() -> TestProblem:
    def f(X: Array) -> Array:
        x1, x2 = _cols(X)
        out: Array = -(np.sin(2 * np.pi * x1) ** 3) * np.sin(2 * np.pi * x2) / (x1**3 * (x1 + x2))
        return out

    def g(X: Array) -> Array:
        x1, x2 = _cols(X)
        return np.stack([x1**2 - x2 + 1, 1 - x1 + (x2 - 4) ** 2], axis=1)

    return TestProblem(
        "g08", f, g, (1.0, 4.0), -0.0958250415, (1.2279713, 4.2453733), lower=(0.0, 0.0), upper=(10.0, 10.0),
        reference=_CEC, tags=frozenset({"multimodal"}),
    )  # fmt: skip


def _g24() -> TestProblem:
    def g(X: Array) -> Array:
        x1, x2 = _cols(X)
        return np.stack(
            [-2 * x1**4 + 8 * x1**3 - 8 * x1**2 + x2 - 2, -4 * x1**4 + 32 * x1**3 - 88 * x1**2 + 96 * x1 + x2 - 36], axis=1
        )

    return TestProblem(
        "g24", lambda X: -X[:, 0] - X[:, 1], g, (0.0, 0.0), -5.50801327, (2.32952019747762, 3.17849307411774),
        lower=(0.0, 0.0), upper=(3.0, 4.0), reference=_CEC,
    )  # fmt: skip


#: the published problems, by name
HS: dict[str, Callable[[], TestProblem]] = {
    fn().name: fn
    for fn in (
        _hs10, _hs11, _hs12, _hs13, _hs15, _hs16, _hs17, _hs18, _hs19, _hs20, _hs21, _hs22, _hs23, _hs24, _hs29,
        _hs30, _hs31, _hs33, _hs34, _hs35, _hs36, _hs37, _hs43, _hs44, _hs64, _hs65, _hs66, _hs72, _hs76,
        _hs83, _hs93, _hs95, _hs96, _hs97, _hs98, _hs100, _hs104, _hs106, _hs108, _hs113, _hs215, _hs218,
        _hs224, _hs226, _hs227, _hs228, _hs231, _hs233, _hs234, _hs249, _g01, _g08, _g24,
    )
}  # fmt: skip


# ---------------------------------------------------------------------------------------------- random convex
def random_problem(kind: str, index: int, seed: int = 0) -> tuple[TestProblem, Any]:
    """A random convex QP (``kind="qp"``) or QCQP (``"qcqp"``) and its cvxpy form (solved for ``f*``).

    ``d`` cycles through 2, 5, 10, ``m`` through 3, 8 (QP) or 2, 4 (QCQP). Objective
    ``0.5 x'Px + c'x`` with ``P = A'A/d + 0.1 I``; QP constraints ``G x <= h`` (unit rows) with a
    strictly feasible point at distance ~1.5 from the unconstrained minimiser, which some rows cut
    off; QCQP constraints
    ``||x - a_j||^2 <= r_j^2`` (balls whose intersection contains a known point). Start: a point at
    distance ~2 from the solution region, generally infeasible.
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed, 911, index, 0 if kind == "qp" else 1]))
    d = (2, 5, 10)[index % 3]
    A = rng.standard_normal((d, d))
    P = A.T @ A / d + 0.1 * np.eye(d)
    x_free = rng.standard_normal(d) * 2.0
    c = -P @ x_free  # unconstrained minimiser x_free
    if kind == "qp":
        m = (3, 8)[(index // 3) % 2]
        G = rng.standard_normal((m, d))
        G /= np.linalg.norm(G, axis=1, keepdims=True)
        x_in = x_free + 1.5 * rng.standard_normal(d)  # strictly feasible: h > G x_in
        h = G @ x_in + rng.uniform(0.1, 1.0, m)  # rows with G (x_free - x_in) > slack cut x_free off

        def g(X: Array) -> Array:
            out: Array = X @ G.T - h
            return out

        def cons(w: Any) -> list[Any]:
            return [G @ w <= h]

    else:
        m = (2, 4)[(index // 3) % 2]
        centre = x_free * 0.3
        a = centre + rng.standard_normal((m, d)) * 0.5
        r = np.linalg.norm(a - centre, axis=1) + rng.uniform(0.3, 1.0, m)  # all balls contain `centre`

        def g(X: Array) -> Array:
            diff = X[:, None, :] - a[None, :, :]
            out: Array = (diff**2).sum(axis=2) - r**2
            return out

        def cons(w: Any) -> list[Any]:
            from zoframe._optional import require

            cp: Any = require("cvxpy", extra="cvxpy", feature="the random QCQP instances of the constrained-small suite")
            return [cp.sum_squares(w - a[j]) <= r[j] ** 2 for j in range(m)]

    def f(X: Array) -> Array:
        out: Array = 0.5 * np.einsum("ki,ij,kj->k", X, P, X) + X @ c
        return out

    x0 = x_free + rng.standard_normal(d) * 2.0
    tp = TestProblem(
        f"{kind}-{index:02d}", f, g, tuple(float(v) for v in x0), math.nan, (), reference="random convex, cvxpy",
        tags=frozenset({"convex", kind}),
    )  # fmt: skip
    return tp, (P, c, cons)


def _solve_random(kind: str, index: int, seed: int) -> TestProblem:
    """The random problem with ``f*`` and ``x*`` from cvxpy (Clarabel)."""
    from zoframe._optional import require

    cp = require("cvxpy", extra="cvxpy", feature="the random QP / QCQP instances of the constrained-small suite")
    tp, (P, c, cons) = random_problem(kind, index, seed)
    w = cp.Variable(tp.dim)
    prob = cp.Problem(cp.Minimize(0.5 * cp.quad_form(w, cp.psd_wrap(P)) + c @ w), cons(w))
    prob.solve(solver=cp.CLARABEL)  # default tolerances (1e-8): far below the suite's 1e-2 relative error
    if prob.status != cp.OPTIMAL:  # pragma: no cover - the generator makes feasible, bounded problems
        raise RuntimeError(f"cvxpy could not solve {tp.name}: {prob.status}")
    x_star = np.asarray(w.value, dtype=np.float64)
    return TestProblem(
        tp.name, tp.f, tp.g, tp.x0, float(tp.f(x_star[None, :])[0]), tuple(float(v) for v in x_star),
        reference=tp.reference, tags=tp.tags,
    )  # fmt: skip


def build(name: str, seed: int = 0) -> TestProblem:
    """The test problem ``name`` (a published one, or ``qp-NN`` / ``qcqp-NN`` for ``seed``)."""
    if name in HS:
        return HS[name]()
    kind, _, idx = name.partition("-")
    if kind in ("qp", "qcqp") and idx.isdigit():
        return _solve_random(kind, int(idx), seed)
    raise KeyError(f"unknown problem {name!r} in the constrained-small suite")


def instances(seed: int = 0, random: int = 12) -> Sequence[SuiteInstance]:
    """The suite: every published problem, then ``random`` QPs and ``random`` QCQPs... half each.

    ``random`` random convex instances in all (half QPs, half QCQPs), generated from ``seed``;
    their ``f*`` is computed with cvxpy here, when the list is made.
    """
    out: list[SuiteInstance] = []
    for fn in HS.values():
        out.append(_instance(fn()))
    for i in range(random):
        kind = "qp" if i % 2 == 0 else "qcqp"
        tp = _solve_random(kind, i // 2, seed)
        out.append(_instance(tp))
    return out


def _instance(tp: TestProblem) -> SuiteInstance:
    return SuiteInstance(
        name=tp.name, build=tp.problem, kind="constrained", dim=tp.dim, m=tp.m, f_star=tp.f_star, x_star=tp.x_star,
        reference=tp.reference, tags=tp.tags,
    )  # fmt: skip
