"""Reference solutions of convex problems with cvxpy (SPEC section 6, "convex reference").

A problem offers a reference by implementing ``cvxpy_model()`` (the capability
:class:`zoframe.protocols.HasCvxpyModel`). It returns a :class:`CvxpyModel`, or any object with the
same attributes (or a mapping with the same keys):

``x``
    the cvxpy ``Variable`` of shape ``(dim,)`` that stands for the problem's ``x``;
``objective``
    a convex cvxpy expression equal to the problem's objective at ``x``: ``(1/n) sum_i l_i(x)`` for a
    finite sum / constrained problem, ``(1/n) sum_i f_i(x) + sum_j psi_j(y_j)`` for a composite one;
``constraints``
    a list of cvxpy constraints. For a *constrained* problem they state ``f_j(x) <= 0`` for
    ``j = 0..m-1`` in the problem's index order: each entry is an inequality ``expr <= rhs`` (or
    ``>=``) of any size, and the sizes add up to ``m``, so that concatenating their dual values gives
    ``alpha_0 .. alpha_{m-1}`` (one vectorised ``D @ x <= e`` is the fast way to state many
    constraints). For a *composite* problem the list holds the single coupling equality
    ``A @ x + sum_j B_j @ y_j == c``;
``y`` (optional)
    for a composite problem, the list of cvxpy Variables ``y_1 .. y_k``.

A pair ``(cvxpy.Problem, x)`` is accepted too (a minimisation problem over ``x``); for a composite
problem stated that way (``y`` eliminated) the reference has ``x*`` and ``f*`` but no multipliers.

Sign conventions, pinned by the tests: inequality multipliers are ``>= 0`` and satisfy
``grad f0 + sum_j alpha_j grad f_j = 0`` at the solution (ICML DSZOG Definition 5.2); the
coupling multiplier ``lam`` follows the ADMM paper's Lagrangian
``L = f + sum_j psi_j - <lam, A x + sum_j B_j y_j - c>`` (IJCAI 2019 Definition 1), i.e. ``lam`` is
the *negative* of cvxpy's dual value for the equality written as ``A x + B y == c``.

:func:`reference_solution` solves to high accuracy (Clarabel with tight tolerances by default),
accepts only the status ``optimal`` and caches the answer as JSON, keyed by a hash of the problem's
data and the versions of cvxpy and of the solver, in ``cache_dir`` (default: the environment
variable ``ZOFRAME_CACHE`` (zoframe's cache root) + ``/references``, else
``$XDG_CACHE_HOME/zoframe/references``, else ``~/.cache/zoframe/references``). A repeated check is then a file read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import dataclasses
from dataclasses import dataclass, field
import hashlib
import importlib
import importlib.metadata
import json
import os
from pathlib import Path
import re
import time
from typing import Any

import numpy as np

from zoframe._optional import require
from zoframe.errors import InvalidInputError, ZoframeError
from zoframe.protocols import Array, HasCvxpyModel

__all__ = [
    "DEFAULT_SOLVER_OPTIONS",
    "CvxpyModel",
    "ReferenceSolution",
    "ReferenceSolveError",
    "default_cache_dir",
    "reference_solution",
]

#: high-accuracy settings per cvxpy solver name (interior-point first choice: Clarabel)
DEFAULT_SOLVER_OPTIONS: Mapping[str, Mapping[str, Any]] = {
    "CLARABEL": {
        "tol_gap_abs": 1e-11,
        "tol_gap_rel": 1e-11,
        "tol_feas": 1e-11,
        "tol_ktratio": 1e-9,
        "max_iter": 500,
    },
    "OSQP": {"eps_abs": 1e-10, "eps_rel": 1e-10, "max_iter": 200000, "polish": True},
    "SCS": {"eps_abs": 1e-10, "eps_rel": 1e-10, "max_iters": 200000},
    "HIGHS": {},
}

_SOLVER_PACKAGES = {"CLARABEL": "clarabel", "OSQP": "osqp", "SCS": "scs", "HIGHS": "highspy", "ECOS": "ecos"}
_FORMAT = 1


class ReferenceSolveError(ZoframeError):
    """The reference solve failed (status not optimal, bad model, solver missing)."""


@dataclass(frozen=True)
class CvxpyModel:
    """What ``problem.cvxpy_model()`` returns (see the module docstring for the contract)."""

    x: Any
    objective: Any
    constraints: Sequence[Any] = ()
    y: Sequence[Any] = ()


@dataclass(frozen=True)
class ReferenceSolution:
    """A high-accuracy solution of a problem's cvxpy model.

    ``x``: the minimiser; ``fun``: the optimal objective value; ``duals``: the multipliers
    (``alpha`` of length ``m`` for a constrained problem, ``lam`` for a composite one, empty
    otherwise) with the conventions of the module docstring; ``y``: composite blocks;
    ``solver`` / ``solver_version`` / ``cvxpy_version``: who solved it; ``key``: the cache key;
    ``cached``: whether this answer came from the cache; ``seconds``: solve time.
    """

    x: Array
    fun: float
    duals: Array
    status: str
    solver: str
    solver_version: str
    cvxpy_version: str
    key: str
    y: tuple[Array, ...] = ()
    cached: bool = False
    seconds: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "x": self.x.tolist(),
            "fun": self.fun,
            "duals": self.duals.tolist(),
            "y": [v.tolist() for v in self.y],
            "status": self.status,
            "solver": self.solver,
            "solver_version": self.solver_version,
            "cvxpy_version": self.cvxpy_version,
            "key": self.key,
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReferenceSolution:
        return cls(
            x=np.asarray(data["x"], dtype=np.float64),
            fun=float(data["fun"]),
            duals=np.asarray(data["duals"], dtype=np.float64),
            y=tuple(np.asarray(v, dtype=np.float64) for v in data["y"]),
            status=str(data["status"]),
            solver=str(data["solver"]),
            solver_version=str(data["solver_version"]),
            cvxpy_version=str(data["cvxpy_version"]),
            key=str(data["key"]),
            cached=True,
            seconds=float(data.get("seconds", 0.0)),
        )


def default_cache_dir() -> Path:
    """``$ZOFRAME_CACHE/references``, else ``$XDG_CACHE_HOME/zoframe/references``, else ``~/.cache/...``."""
    env = os.environ.get("ZOFRAME_CACHE")
    if env:
        return Path(env) / "references"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "zoframe" / "references"


def _field(model: Any, name: str, default: Any = None) -> Any:
    if isinstance(model, Mapping):
        return model.get(name, default)
    return getattr(model, name, default)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _problem_params(problem: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"class": f"{type(problem).__module__}.{type(problem).__qualname__}"}
    if dataclasses.is_dataclass(problem) and not isinstance(problem, type):
        for f in dataclasses.fields(problem):
            if not f.init:
                continue
            val = getattr(problem, f.name)
            if isinstance(val, (bool, int, float, str)) or val is None:
                out[f.name] = val
    return out


def _cache_key(problem: Any, cp_problem: Any, solver: str, options: Mapping[str, Any]) -> str:
    h = hashlib.sha256()
    meta = {
        "params": _problem_params(problem),
        "structure": re.sub(r"(var|param)\d+", r"\1", str(cp_problem)),
        "solver": solver,
        "options": {k: repr(v) for k, v in sorted(options.items())},
        "cvxpy": _version("cvxpy"),
        "solver_version": _version(_SOLVER_PACKAGES.get(solver, solver.lower())),
        "format": _FORMAT,
    }
    h.update(json.dumps(meta, sort_keys=True, default=str).encode())
    for const in cp_problem.constants():  # every number of the model, not only its printed form
        val = const.value
        if hasattr(val, "toarray"):  # scipy sparse
            val = val.toarray()
        arr = np.ascontiguousarray(np.asarray(val, dtype=np.float64))
        h.update(str(arr.shape).encode())
        h.update(arr.tobytes())
    return h.hexdigest()[:32]


def _read_cache(path: Path) -> ReferenceSolution | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError):
        return None
    if data.get("format") != _FORMAT:
        return None
    return ReferenceSolution.from_json(data)


def _write_cache(path: Path, ref: ReferenceSolution) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(ref.to_json(), fh)
    os.replace(tmp, path)  # atomic: concurrent checks never read half a file


def _flat_duals(constraints: Sequence[Any]) -> Array:
    parts = []
    for con in constraints:
        val = con.dual_value
        if val is None:
            raise ReferenceSolveError(f"cvxpy returned no dual value for the constraint {con}")
        parts.append(np.atleast_1d(np.asarray(val, dtype=np.float64)).ravel())
    return np.concatenate(parts) if parts else np.zeros(0)


def _polish_blocks(problem: Any, ys: tuple[Array, ...], lam: Array) -> tuple[Array, ...]:
    """One prox step ``y_j <- prox_{psi_j}(y_j + B_j^T lam)`` per block.

    At an exact solution ``B_j^T lam`` lies in ``d psi_j(y_j)``, so the step is a fixed point; on an
    interior-point answer it turns the ``1e-7``-size entries that should be zero into exact zeros
    (the subdifferential of a nonsmooth ``psi`` is not continuous there).
    """
    pens = list(getattr(problem, "penalties", ()))
    Bs = list(getattr(problem, "B", ()))
    if len(pens) != len(ys) or len(Bs) != len(ys):
        return ys
    return tuple(
        np.asarray(psi.prox(y + np.asarray(b, dtype=np.float64).T @ lam, 1.0), dtype=np.float64)
        for psi, y, b in zip(pens, ys, Bs)
    )


def reference_solution(
    problem: Any,
    *,
    solver: str = "CLARABEL",
    solver_options: Mapping[str, Any] | None = None,
    cache: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
) -> ReferenceSolution:
    """Solve ``problem.cvxpy_model()`` to high accuracy; only status ``optimal`` is accepted.

    Raises :class:`ReferenceSolveError` when the problem has no cvxpy model, the model is malformed,
    or the solver does not report ``optimal`` (``optimal_inaccurate`` is refused too).
    """
    if not isinstance(problem, HasCvxpyModel):
        raise InvalidInputError(
            f"{type(problem).__name__} offers no cvxpy model (HasCvxpyModel.cvxpy_model()); a reference "
            "solution needs one. See zoframe_verify.reference for what cvxpy_model() must return."
        )
    cp: Any = require("cvxpy", feature="a verification reference solution")  # cvxpy never enters the core
    prob: Any = problem

    solver = solver.upper()
    if solver not in cp.installed_solvers():
        raise ReferenceSolveError(
            f"cvxpy solver {solver!r} is not installed; installed solvers: {', '.join(cp.installed_solvers())}"
        )
    model = prob.cvxpy_model()
    if isinstance(model, tuple) and len(model) == 2 and isinstance(model[0], cp.Problem):
        cp_prob, x_var = model  # the (cvxpy.Problem, x) form: objective and constraints of that problem
        model = CvxpyModel(x=x_var, objective=cp_prob.objective.expr, constraints=list(cp_prob.constraints))
    x = _field(model, "x")
    objective = _field(model, "objective")
    constraints = list(_field(model, "constraints", ()) or ())
    ys = list(_field(model, "y", ()) or ())
    if x is None or objective is None:
        raise ReferenceSolveError("cvxpy_model() must provide at least 'x' (a cvxpy Variable) and 'objective'")
    if tuple(x.shape) != (int(prob.dim),):
        raise ReferenceSolveError(f"cvxpy_model().x has shape {x.shape}, expected ({prob.dim},)")
    kind = getattr(problem, "kind", "")
    if kind == "constrained":
        if not isinstance(objective, cp.Expression):
            raise ReferenceSolveError("cvxpy_model().objective must be a cvxpy expression")
        sizes = sum(int(np.prod(c.shape)) if c.shape else 1 for c in constraints)
        if sizes != int(prob.m):
            raise ReferenceSolveError(
                f"cvxpy_model() states {sizes} constraint rows but the problem has m={prob.m}; the "
                "constraints must be f_j(x) <= 0 for every j, in index order"
            )
    cp_problem = cp.Problem(cp.Minimize(objective), constraints)
    if not cp_problem.is_dcp():
        raise ReferenceSolveError("cvxpy_model() is not DCP (convex): no reference solution for a nonconvex model")
    options = dict(DEFAULT_SOLVER_OPTIONS.get(solver, {}))
    options.update(solver_options or {})
    key = _cache_key(problem, cp_problem, solver, options)
    path = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = path / f"{key}.json"
    if cache:
        hit = _read_cache(path)
        if hit is not None and hit.key == key:
            return hit
    t0 = time.perf_counter()
    try:
        cp_problem.solve(solver=solver, **options)
    except cp.error.SolverError as exc:
        raise ReferenceSolveError(f"cvxpy solver {solver} failed: {exc}") from exc
    seconds = time.perf_counter() - t0
    if cp_problem.status != cp.OPTIMAL:
        raise ReferenceSolveError(
            f"the reference solve ended with status {cp_problem.status!r} (solver {solver}); only "
            "'optimal' is accepted. Try another solver (solver='OSQP' or 'SCS') or check the model."
        )
    duals = _flat_duals(constraints)
    y_vals = tuple(np.asarray(v.value, dtype=np.float64).reshape(-1).copy() for v in ys)
    if kind == "composite":
        duals = -duals  # ADMM convention L = f + psi - <lam, Ax + By - c>
        y_vals = _polish_blocks(problem, y_vals, duals)
    elif kind == "constrained":
        duals = np.maximum(duals, 0.0)  # remove solver round-off below zero
    ref = ReferenceSolution(
        x=np.asarray(x.value, dtype=np.float64).reshape(-1).copy(),
        fun=float(cp_problem.value),
        duals=duals,
        y=y_vals,
        status=str(cp_problem.status),
        solver=solver,
        solver_version=_version(_SOLVER_PACKAGES.get(solver, solver.lower())),
        cvxpy_version=_version("cvxpy"),
        key=key,
        cached=False,
        seconds=seconds,
    )
    if cache:
        _write_cache(path, ref)
    return ref
