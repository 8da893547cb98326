"""Structural types of zoframe: problem kinds, sets, penalties, estimators and solvers.

Everything here is a :class:`typing.Protocol`, so user classes satisfy them by shape, without
inheriting from anything. All function oracles are *batched*: a matrix of points goes in, a matrix
of values comes out, one row per point and one column per component index.

Problem kinds (SPEC section 1):

``finite_sum``
    ``min_x (1/n) sum_i l_i(x)``, optionally over a simple convex set.
``constrained``
    a finite sum subject to ``f_j(x) <= 0`` for ``j = 1..m`` (``m`` may be millions).
``minimax``
    ``min_x max_{y in Y} (1/n) sum_i F_i(x, y)`` with ``Y`` closed and convex.
``composite``
    ``min (1/n) sum_i f_i(x) + sum_j psi_j(y_j)`` s.t. ``A x + sum_j B_j y_j = c``.

Capabilities that a zeroth-order solver must never use (gradients, cvxpy models, known
solutions) are separate protocols; verification code and first-order baselines test for them with
``isinstance``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:  # pragma: no cover
    from zoframe.oracle import CountingOracle, MonitorOracle

Array = NDArray[np.float64]
IntArray = NDArray[np.intp]


# --------------------------------------------------------------------------- sets and penalties
@runtime_checkable
class ConvexSet(Protocol):
    """A closed convex set with a Euclidean projection."""

    @property
    def dim(self) -> int:
        """Dimension of the space the set lives in."""
        ...

    def project(self, x: Array) -> Array:
        """Project a point ``(d,)`` or each row of ``(k, d)`` onto the set."""
        ...

    def contains(self, x: Array, tol: float = 1e-9) -> bool:
        """Whether ``x`` lies in the set up to ``tol``."""
        ...


@runtime_checkable
class Penalty(Protocol):
    """A convex, possibly nonsmooth function ``psi`` with a cheap proximal operator."""

    def value(self, y: Array) -> float:
        """``psi(y)``."""
        ...

    def prox(self, v: Array, t: float) -> Array:
        """``argmin_y psi(y) + ||y - v||^2 / (2 t)``."""
        ...

    def subdifferential_distance(self, y: Array, g: Array) -> float:
        """Euclidean distance from the vector ``g`` to the subdifferential of ``psi`` at ``y``."""
        ...


# --------------------------------------------------------------------------- problem kinds
@runtime_checkable
class FiniteSumProblem(Protocol):
    """``min_x (1/n) sum_i l_i(x)``; ``components(X, idx)[r, s] = l_{idx[s]}(X[r])``."""

    kind: str
    dim: int
    n: int
    x0: Array

    def components(self, X: Array, idx: IntArray) -> Array:
        """Values ``(k, b)`` of the components ``idx`` (``(b,)``) at the rows of ``X`` (``(k, d)``)."""
        ...


@runtime_checkable
class HasFeasibleSet(Protocol):
    """A problem whose variable is restricted to a simple convex set with a projection."""

    feasible_set: ConvexSet | None


@runtime_checkable
class ConstrainedProblem(FiniteSumProblem, Protocol):
    """A finite sum subject to ``f_j(x) <= 0``, ``j = 0..m-1`` (SPEC section 1.1)."""

    m: int
    convex_constraints: bool
    black_box_constraints: bool

    def constraints(self, X: Array, idx: IntArray) -> Array:
        """Values ``(k, b)`` of the constraints ``idx`` at the rows of ``X``."""
        ...


@runtime_checkable
class MinimaxProblem(Protocol):
    """``min_x max_{y in Y} (1/n) sum_i F_i(x, y)`` (SPEC section 1.2)."""

    kind: str
    dim: int
    dim_y: int
    n: int
    x0: Array
    y0: Array
    y_set: ConvexSet | None

    def values(self, X: Array, Y: Array, idx: IntArray) -> Array:
        """Values ``(k, b)`` of ``F_idx`` at the row pairs ``(X[r], Y[r])``."""
        ...


@runtime_checkable
class CompositeProblem(FiniteSumProblem, Protocol):
    """``min (1/n) sum_i f_i(x) + sum_j psi_j(y_j)`` s.t. ``A x + sum_j B_j y_j = c``."""

    A: Array
    B: Sequence[Array]
    c: Array
    penalties: Sequence[Penalty]
    y0: Sequence[Array]


# --------------------------------------------------------------------------- capabilities
@runtime_checkable
class HasGradient(Protocol):
    """White-box gradients of the finite-sum components (first-order baselines, verification)."""

    def component_gradients(self, x: Array, idx: IntArray) -> Array:
        """Gradients ``(b, d)`` of the components ``idx`` at one point ``x``."""
        ...


@runtime_checkable
class HasConstraintGradient(Protocol):
    """White-box gradients of the constraints."""

    def constraint_gradients(self, x: Array, idx: IntArray) -> Array:
        """Gradients ``(b, d)`` of the constraints ``idx`` at one point ``x``."""
        ...


@runtime_checkable
class HasLinearConstraints(Protocol):
    """White-box linear constraints: ``f_j(x) = D[j] @ x - e[j]``, i.e. ``D x <= e``.

    Projection and linear-minimisation baselines (ZOPSGD, ZOSCGD, ...) build their subproblems
    from this structure; it is not a function evaluation and is not counted.
    """

    def linear_constraints(self) -> tuple[Array, Array]:
        """``(D, e)`` with shapes ``(m, d)`` and ``(m,)``."""
        ...


@runtime_checkable
class HasCvxpyConstraints(Protocol):
    """White-box convex constraints stated as cvxpy expressions of a variable ``x``.

    Used only by baselines that solve projection / linear-minimisation subproblems with cvxpy.
    """

    def cvxpy_constraints(self, x: Any) -> list[Any]:
        """cvxpy constraints on the cvxpy Variable ``x`` equivalent to ``f_j(x) <= 0`` for all j."""
        ...


@runtime_checkable
class HasResiduals(Protocol):
    """Least-squares components: ``l_i(x) = r_i(x)^2`` with black-box residuals ``r_i``.

    ``residuals(X, idx)[r, s] = r_{idx[s]}(X[r])``, batched like ``components``. Solvers that model the
    residuals themselves (Gauss-Newton-type methods such as DFO-LS) read them through
    :meth:`zoframe.oracle.CountingOracle.residuals`: one residual is one evaluation of kind
    ``objective``, as one component is. An attribute ``residuals = None`` declares none (the oracle
    tests that it is callable).
    """

    def residuals(self, X: Array, idx: IntArray) -> Array:
        """Residuals ``(k, b)`` of the components ``idx`` at the rows of ``X``."""
        ...


@runtime_checkable
class HasMinimaxGradient(Protocol):
    """White-box partial gradients of a minimax objective (first-order SGDA / SGDMSA)."""

    def minimax_gradients(self, x: Array, y: Array, idx: IntArray) -> tuple[Array, Array]:
        """``(grad_x, grad_y)`` of ``F_idx`` at ``(x, y)``, shapes ``(b, d)`` and ``(b, d_y)``."""
        ...


@runtime_checkable
class HasMeasures(Protocol):
    """A problem that computes its own measures along a run (test accuracy, violation, ...).

    ``outputs`` holds the solver's current iterate (at least ``"x"``); ``monitor`` evaluates the
    problem's functions with counting under the purpose ``"monitor"``, outside the solver's budget.
    The mapping should contain ``"fun"``, the objective value reported as ``Result.fun``.
    """

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        ...


@runtime_checkable
class HasKnownSolution(Protocol):
    """A problem whose solution is known in closed form (tests and verification)."""

    def known_solution(self) -> Mapping[str, Any]:
        ...


@runtime_checkable
class HasCvxpyModel(Protocol):
    """A problem that can state itself as a cvxpy model (used only by ``zoframe_verify``).

    ``cvxpy_model()`` returns one of

    * a ``zoframe_verify.CvxpyModel(x, objective, constraints=(), y=())`` record (or a mapping with
      those keys): the cvxpy Variable ``x``, the objective expression to minimise, the constraints
      ``f_j(x) <= 0`` **in the order of the problem's constraint indices** (their sizes adding up to
      ``m``; a vector constraint counts for its length), and for a composite problem the Variables
      ``y_j`` of the blocks, with the coupling ``A x + sum_j B_j y_j = c`` as the last constraint;
    * a pair ``(cvxpy.Problem, x)``.

    Sign conventions of the duals a reference solution reports: inequality multipliers are
    ``>= 0`` (``L = f0 + sum_j alpha_j f_j``); for a composite problem ``lam`` follows the ADMM paper
    (``L = f + sum psi_j - <lam, A x + B y - c>``).
    """

    def cvxpy_model(self) -> Any:
        ...


# --------------------------------------------------------------------------- estimators
@runtime_checkable
class BatchFunction(Protocol):
    """A batched function: ``(k, d)`` points in, ``(k, b)`` values out (b components)."""

    def __call__(self, X: Array, /) -> Array:
        ...


@runtime_checkable
class Estimator(Protocol):
    """A zeroth-order gradient estimator (SPEC section 2).

    ``estimate`` builds ALL its perturbed points as one matrix and calls ``fun`` exactly once.
    ``rows(dim, points)`` is the number of rows of that matrix, so one estimate costs
    ``rows(dim, points) * b`` oracle evaluations for a batch of ``b`` components.
    """

    def rows(self, dim: int, points: int = 1) -> int:
        ...

    def estimate(
        self,
        fun: BatchFunction,
        x: Array,
        rng: np.random.Generator,
        *,
        mu: float | None = None,
        per_component: bool = False,
    ) -> Any:
        """Estimate at ``x`` (``(d,)``, or ``(P, d)`` base points sharing the same directions).

        Returns a :class:`zoframe.estimate.Estimate`.
        """
        ...


# --------------------------------------------------------------------------- solvers
StateT = TypeVar("StateT")


class Solver(Protocol[StateT]):
    """A solver: a frozen dataclass of hyper-parameters with ``init`` and ``step``.

    The solver sees only the :class:`~zoframe.oracle.CountingOracle` (function values, counted,
    plus the problem's structure such as sets, ``A``, ``B``, ``c``), never the problem object.
    ``State`` is a frozen dataclass of exactly what the algorithm carries between iterations and
    must have an ``x`` field. Optional methods, looked up with ``getattr``:

    ``validate(oracle)``
        raise a clear error before any evaluation if the problem does not suit the solver;
    ``terminate(state) -> str | None``
        a message when the solver's own stopping rule fires (status ``CONVERGED``); a
        :class:`~zoframe.solver.StopReason` ends the run with the status it carries instead
        (e.g. ``BUDGET`` when the solver stops on a reserve it kept for its last phase);
    ``outputs(state) -> Mapping[str, Array]``
        the iterate to report (default ``{"x": state.x}``; e.g. ``y`` or ``p`` as well);
    ``trace_row(state) -> Mapping[str, float]``
        the solver's own columns of each trace record, read from the state without evaluations
        (e.g. ``phase``, a code of the phase the iterate came from);
    ``final_notes(oracle, state) -> Sequence[str]``
        notes on the run added to ``Result.notes`` (e.g. its phases, their switches and their cost).
    """

    problem_kinds: ClassVar[frozenset[str]]

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> StateT:
        ...

    def step(self, oracle: CountingOracle, state: StateT, rng: np.random.Generator) -> StateT:
        ...
