"""``verify(problem, result_or_x) -> Report`` and the ``zoframe verify`` command.

The report gathers, for the problem's kind, the stationarity measures of :mod:`zoframe_verify.checks`
and, when a reference exists (a cvxpy model solved by :func:`~zoframe_verify.reference.reference_solution`,
else the problem's ``known_solution()``), the objective gap and the distance to the reference
point. With a cvxpy reference of a constrained problem it also gives the KKT residuals computed with
the reference duals.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
import json
import math
import os
from pathlib import Path
import sys
from typing import Any

import numpy as np

from zoframe.certificate import DEFAULT_TOL, Certificate, certify
from zoframe.errors import InvalidInputError, ZoframeError
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array, HasCvxpyModel, HasKnownSolution
from zoframe.result import Result
from zoframe_verify.checks import (
    ADMMReport,
    FiniteSumReport,
    KKTReport,
    MinimaxReport,
    admm_report,
    finite_sum_report,
    kkt_report,
    minimax_report,
)
from zoframe_verify.reference import ReferenceSolution, ReferenceSolveError, reference_solution

__all__ = [
    "Check",
    "Report",
    "Tolerances",
    "add_verify_arguments",
    "load_saved_result",
    "run_verify_command",
    "verify",
]


@dataclass(frozen=True)
class Tolerances:
    """The tolerances of the PASS/FAIL verdict of a :class:`Report`.

    ``stationarity``: bound on the kind's stationarity measure (constrained: ``kkt`` = the largest
    of the KKT residuals ``eps1..eps3``; minimax: ``grad_g_norm``; composite: ``sqrt(dist2)``;
    finite sum: ``grad_norm``, the gradient (mapping) norm). ``feasibility``: bound on
    ``max_violation`` (constrained) or ``sqrt(feasibility)`` = ``||A x + B y - c||`` (composite), the
    default of ``zoframe.minimize``'s ``feasibility_tol``. ``gap``: bound on ``|objective_gap|``
    relative to ``max(1, |f_ref|)`` when a reference exists. ``certificate``: the tolerance of the
    stationarity certificate (:func:`zoframe.certificate.certify`, the test behind ``Result.success``;
    its feasibility tolerance is ``feasibility``); verifying a run takes the run's own.
    """

    stationarity: float = 1e-3
    feasibility: float = 1e-3
    gap: float = 1e-3
    certificate: float = DEFAULT_TOL

    def __post_init__(self) -> None:
        for name in ("stationarity", "feasibility", "gap", "certificate"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InvalidInputError(f"the {name} tolerance must be a positive number, got {v!r}")

    def describe(self) -> str:
        return (
            f"stationarity {self.stationarity:g}, feasibility {self.feasibility:g}, "
            f"objective gap {self.gap:g} (relative to max(1, |f_ref|)), certificate {self.certificate:g}"
        )


@dataclass(frozen=True)
class Check:
    """One line of the verdict: ``value <= tol`` for the measure ``name``."""

    name: str
    value: float
    tol: float

    @property
    def passed(self) -> bool:
        return math.isfinite(self.value) and self.value <= self.tol

    def describe(self) -> str:
        op = "<=" if self.passed else ">"
        return f"{self.name} {self.value:.3e} {op} {self.tol:.3e}"


def _certificate_check(cert: Certificate) -> Check:
    """The certificate as a check: its residual against its tolerance; a certificate refused for
    another reason (infeasible, negative curvature, a failed evaluation) counts as an infinite value."""
    if cert.passed or cert.residual > cert.tol:
        return Check("certificate", cert.residual, cert.tol)
    reason = "infeasible" if "infeasible" in cert.message else "not a minimum" if "not a minimum" in cert.message else "failed"
    return Check(f"certificate ({reason})", math.inf, cert.tol)


def _checks(kind: str, measures: Mapping[str, float], ref_fun: float | None, tol: Tolerances) -> tuple[Check, ...]:
    out: list[Check] = []
    if kind == "constrained":
        out += [
            Check("kkt", measures["kkt"], tol.stationarity),
            Check("max_violation", measures["max_violation"], tol.feasibility),
        ]
    elif kind == "minimax":
        out.append(Check("grad_g_norm", measures["grad_g_norm"], tol.stationarity))
    elif kind == "composite":
        out += [
            Check("sqrt(dist2)", math.sqrt(max(measures["dist2"], 0.0)), tol.stationarity),
            Check("sqrt(feasibility)", math.sqrt(max(measures["feasibility"], 0.0)), tol.feasibility),
        ]
    else:
        out.append(Check("grad_norm", measures["grad_norm"], tol.stationarity))
    if "objective_gap" in measures:
        scale = max(1.0, abs(ref_fun)) if ref_fun is not None and math.isfinite(ref_fun) else 1.0
        out.append(Check("|objective_gap|", abs(measures["objective_gap"]), tol.gap * scale))
    return tuple(out)


@dataclass(frozen=True)
class Report:
    """A verification report for one candidate point.

    ``measures``: flat name -> value (the ones of :attr:`details` plus ``objective_gap``,
    ``dist_to_reference`` and, for a constrained problem with reference duals, ``ref_eps1``,
    ``ref_eps2``, ``ref_eps3``); ``details``: the kind's report object; ``reference``: the reference
    solution used (``None`` when there is none) and ``reference_source`` saying where it came from.
    """

    kind: str
    problem: str
    measures: Mapping[str, float]
    details: KKTReport | MinimaxReport | ADMMReport | FiniteSumReport
    gradient_source: str
    reference: ReferenceSolution | None
    reference_source: str
    reference_details: KKTReport | None = None
    notes: tuple[str, ...] = ()
    solver: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    tolerances: Tolerances = field(default_factory=Tolerances)
    checks: tuple[Check, ...] = ()
    certificate: Certificate | None = None

    @property
    def passed(self) -> bool:
        """The verdict: every check of :attr:`checks` holds (finite and within its tolerance)."""
        return bool(self.checks) and all(c.passed for c in self.checks)

    def verdict(self) -> str:
        """``PASS (...)`` or ``FAIL (...)`` with every check, failed ones first."""
        failed = [c for c in self.checks if not c.passed]
        word = "PASS" if self.passed else "FAIL"
        return f"{word} ({'; '.join(c.describe() for c in [*failed, *(c for c in self.checks if c.passed)])})"

    def to_dict(self) -> dict[str, Any]:
        ref = None
        if self.reference is not None:
            ref = {
                "fun": self.reference.fun,
                "solver": self.reference.solver,
                "solver_version": self.reference.solver_version,
                "cvxpy_version": self.reference.cvxpy_version,
                "status": self.reference.status,
                "cached": self.reference.cached,
                "key": self.reference.key,
            }
        return {
            "kind": self.kind,
            "problem": self.problem,
            "solver": self.solver,
            "measures": {k: _finite(v) for k, v in self.measures.items()},
            "gradient_source": self.gradient_source,
            "reference_source": self.reference_source,
            "reference": ref,
            "notes": list(self.notes),
            "tolerances": {
                "stationarity": self.tolerances.stationarity,
                "feasibility": self.tolerances.feasibility,
                "gap": self.tolerances.gap,
                "certificate": self.tolerances.certificate,
            },
            "checks": [
                {"name": c.name, "value": _finite(c.value), "tol": c.tol, "passed": c.passed} for c in self.checks
            ],
            "certificate": None if self.certificate is None else self.certificate.to_dict(),
            "verdict": "PASS" if self.passed else "FAIL",
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        head = f"verification report: {self.problem} ({self.kind})"
        if self.solver:
            head += f", solver {self.solver}"
        lines = [head]
        for k, v in self.measures.items():
            lines.append(f"  {k:<20} {v:.6e}")
        lines.append(f"  gradients: {self.gradient_source}")
        if isinstance(self.details, KKTReport):
            lines.append(
                f"  multipliers: {self.details.multipliers_source} ({self.details.n_active} nearly active, "
                f"active_tol={self.details.active_tol:g})"
            )
        if isinstance(self.details, ADMMReport):
            lines.append(f"  lam: {self.details.lam_source}")
        if isinstance(self.details, MinimaxReport):
            inner = self.details.inner
            lines.append(
                f"  inner solve: {inner.iterations} iterations, mapping norm {inner.mapping_norm:.2e}, "
                f"{'converged' if inner.converged else 'NOT converged'}"
            )
        if self.certificate is not None:
            c = self.certificate
            lines.append(f"  certificate: {c.message} ({c.evaluations} evaluations)")
        lines.append(f"  reference: {self.reference_source}")
        for note in self.notes:
            lines.append(f"  note: {note}")
        lines.append(f"  tolerances: {self.tolerances.describe()}")
        lines.append(f"verdict: {self.verdict()}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return (
            f"Report(problem={self.problem!r}, kind={self.kind!r}, solver={self.solver!r}, "
            f"verdict={'PASS' if self.passed else 'FAIL'}, measures={len(self.measures)}, "
            f"reference={self.reference_source!r})"
        )


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _reference(
    problem: Any, reference: bool | ReferenceSolution, cache_dir: str | os.PathLike[str] | None, notes: list[str]
) -> tuple[ReferenceSolution | None, dict[str, Any] | None, str]:
    if isinstance(reference, ReferenceSolution):
        return reference, None, f"given ({reference.solver} {reference.solver_version})"
    if not reference:
        return None, None, "not requested"
    if isinstance(problem, HasCvxpyModel):
        try:
            ref = reference_solution(problem, cache_dir=cache_dir)
        except ReferenceSolveError as exc:
            notes.append(f"reference solve failed: {exc}")
        else:
            how = "cache" if ref.cached else f"solved in {ref.seconds:.2f} s"
            return ref, None, f"cvxpy {ref.cvxpy_version} with {ref.solver} {ref.solver_version} ({how})"
    if isinstance(problem, HasKnownSolution):
        try:
            known = dict(problem.known_solution())
        except ZoframeError as exc:
            notes.append(f"no known solution: {exc}")
        else:
            return None, known, "known_solution() of the problem"
    return None, None, "none (the problem offers neither a cvxpy model nor a known solution)"


def _outputs(result_or_x: Any) -> tuple[dict[str, Array], str | None]:
    if isinstance(result_or_x, Result):
        outs = {k: np.asarray(v, dtype=np.float64) for k, v in result_or_x.outputs.items()}
        outs.setdefault("x", np.asarray(result_or_x.x, dtype=np.float64))
        return outs, result_or_x.solver
    if isinstance(result_or_x, Mapping):
        if "x" not in result_or_x:
            raise InvalidInputError("a mapping of outputs must contain 'x'")
        return {k: np.asarray(v, dtype=np.float64) for k, v in result_or_x.items()}, None
    return {"x": np.asarray(result_or_x, dtype=np.float64)}, None


def verify(
    problem: Any,
    result_or_x: Any,
    *,
    reference: bool | ReferenceSolution = True,
    cache_dir: str | os.PathLike[str] | None = None,
    active_tol: float = 1e-6,
    eta: float = 1.0,
    tolerances: Tolerances | None = None,
    problem_args: Mapping[str, Any] | None = None,
) -> Report:
    """The verification report of a run (a :class:`~zoframe.result.Result`), a mapping of outputs
    (``{"x": ..., "y": ...}``) or a bare point ``x``.

    ``reference=True`` uses the problem's cvxpy model (solved once, then cached in ``cache_dir``) or
    its known solution; pass a :class:`ReferenceSolution` to reuse one, or ``False`` for none.
    The report's verdict (:attr:`Report.passed`, :meth:`Report.verdict`) checks the measures
    against ``tolerances`` (default :class:`Tolerances`), and the point's stationarity certificate
    (:attr:`Report.certificate`, the test behind ``Result.success``): verifying a
    :class:`~zoframe.result.Result` certifies its point with the run's own certificate and feasibility
    tolerances, so the report and the run's ``success`` agree.

    ``problem``: a problem object, a factory returning one (called with ``problem_args``), a
    registered name or a ``"module:attr"`` / ``"file.py:attr"`` reference (:mod:`zoframe.userproblem`).
    """
    from zoframe.userproblem import is_problem, problem_source

    if problem_args is not None or not is_problem(problem):
        problem = problem_source(problem).build(**dict(problem_args or {}))
    tol = Tolerances() if tolerances is None else tolerances
    if isinstance(result_or_x, Result) and tolerances is None:
        own = result_or_x.certificate
        tol = Tolerances(
            feasibility=tol.feasibility if result_or_x.feasibility_tol is None else float(result_or_x.feasibility_tol),
            certificate=tol.certificate if own is None else float(own["tol"]),
        )
    kind = str(getattr(problem, "kind", ""))
    outs, solver = _outputs(result_or_x)
    x = outs["x"]
    notes: list[str] = []
    ref, known, ref_source = _reference(problem, reference, cache_dir, notes)
    ref_details: KKTReport | None = None
    details: KKTReport | MinimaxReport | ADMMReport | FiniteSumReport
    if kind == "constrained":
        details = kkt_report(problem, x, active_tol=active_tol)
        if ref is not None:
            ref_details = kkt_report(problem, x, multipliers=ref.duals, multipliers_source="reference duals")
        elif known is not None and "multipliers" in known:
            mult = np.asarray(known["multipliers"], dtype=np.float64).reshape(-1)
            ref_details = kkt_report(
                problem, x, multipliers=mult, multiplier_indices=np.arange(mult.shape[0], dtype=np.intp),
                multipliers_source="known multipliers",
            )  # fmt: skip
    elif kind == "minimax":
        details = minimax_report(problem, x, outs.get("y"), eta=eta)
        if "y" not in outs:
            notes.append("the run reported no y: y0 of the problem was used for the y measures")
    elif kind == "composite":
        k = len(problem.B)
        ys = [outs[f"y{j}"] for j in range(k)] if all(f"y{j}" in outs for j in range(k)) else None
        if ys is None and k == 1 and "y" in outs:
            ys = [outs["y"]]
        lam = outs.get("lam", outs.get("lambda"))
        details = admm_report(problem, x, ys, lam)
    elif kind == "finite_sum":
        details = finite_sum_report(problem, x, eta=eta)
    else:
        raise InvalidInputError(f"cannot verify a problem of kind {kind!r}")
    cert = certify(CountingOracle(problem), x, outputs=outs, tol=tol.certificate, feasibility_tol=tol.feasibility)
    measures = dict(details.measures())
    ref_fun: float | None = None
    if ref is not None:
        ref_fun = ref.fun
        measures["objective_gap"] = measures["fun"] - ref.fun
        measures["dist_to_reference"] = float(np.linalg.norm(x - ref.x))
    elif known is not None:
        if "fun" in known:
            ref_fun = float(known["fun"])
            fun_key = "g" if kind == "minimax" else "fun"
            measures["objective_gap"] = measures[fun_key] - float(known["fun"])
        if "x" in known:
            measures["dist_to_reference"] = float(np.linalg.norm(x - np.asarray(known["x"], dtype=np.float64)))
    if ref_details is not None:
        measures["ref_eps1"] = ref_details.eps1
        measures["ref_eps2"] = ref_details.eps2
        measures["ref_eps3"] = ref_details.eps3
    return Report(
        kind=kind,
        problem=str(getattr(problem, "name", type(problem).__name__)),
        measures=measures,
        details=details,
        gradient_source=details.gradient_source,
        reference=ref,
        reference_source=ref_source,
        reference_details=ref_details,
        notes=tuple(notes),
        solver=solver,
        tolerances=tol,
        checks=(*_checks(kind, measures, ref_fun, tol), _certificate_check(cert)),
        certificate=cert,
    )


# --------------------------------------------------------------------------- saved results and the CLI
def parse_key_values(items: Any) -> dict[str, Any]:
    """``["k=v", ...]`` to a dict; values are parsed as JSON when they are JSON, else kept as text."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, val = str(item).partition("=")
        if not sep:
            raise InvalidInputError(f"expected KEY=VALUE, got {item!r}")
        try:
            out[key.replace("-", "_")] = json.loads(val)
        except json.JSONDecodeError:
            out[key.replace("-", "_")] = val
    return out


def load_saved_result(path: str | os.PathLike[str]) -> tuple[dict[str, Array], dict[str, Any]]:
    """Outputs (``x`` and ``outputs.*``) and the JSON summary of a run saved by ``Result.save``."""
    base = str(path).removesuffix(".json").removesuffix(".npz")
    jpath, npath = Path(base + ".json"), Path(base + ".npz")
    if not jpath.is_file() and not npath.is_file():
        raise InvalidInputError(
            f"no saved run at {base}: expected {jpath} and {npath} (written by Result.save / zoframe solve -o)"
        )
    summary: dict[str, Any] = {}
    if jpath.is_file():
        with open(jpath, encoding="utf-8") as fh:
            summary = json.load(fh)
    outs: dict[str, Array] = {}
    if npath.is_file():
        with np.load(npath, allow_pickle=False) as data:
            for key in data.files:
                if key.startswith("outputs."):
                    outs[key.removeprefix("outputs.")] = np.asarray(data[key], dtype=np.float64)
            if "x" in data.files:
                outs.setdefault("x", np.asarray(data["x"], dtype=np.float64))
    if "x" not in outs:
        if "x" not in summary:
            raise InvalidInputError(f"the saved run {base} holds no x")
        outs["x"] = np.asarray(summary["x"], dtype=np.float64)
    return outs, summary


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("result", nargs="?", help="a run saved with `zoframe solve ... -o RESULT` (RESULT.json/.npz)")
    parser.add_argument(
        "--problem", default=None,
        help="problem of the run (unless stored in RESULT.json): a registered name, or module:attr / "
        "path/to/file.py:attr naming a factory or a problem object of your own",
    )
    parser.add_argument("--problem-arg", action="append", metavar="KEY=VALUE", help="problem parameter")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference solution")
    parser.add_argument("--cache-dir", default=None, help="cache of reference solutions (default: user cache dir)")
    parser.add_argument("--active-tol", type=float, default=1e-6, help="nearly-active threshold for the KKT fit")
    d = Tolerances()
    parser.add_argument(
        "--tol-stationarity",
        type=float,
        default=d.stationarity,
        help=f"verdict: bound on the stationarity measure (kkt, grad_g_norm, sqrt(dist2), grad_norm; "
        f"default {d.stationarity:g})",
    )
    parser.add_argument(
        "--tol-feasibility",
        type=float,
        default=d.feasibility,
        help=f"verdict: bound on max_violation / ||A x + B y - c|| (default {d.feasibility:g})",
    )
    parser.add_argument(
        "--tol-gap",
        type=float,
        default=d.gap,
        help=f"verdict: bound on |objective_gap| / max(1, |f_ref|) (default {d.gap:g})",
    )
    parser.add_argument(
        "--tol-certificate",
        type=float,
        default=None,
        help=f"verdict: tolerance of the stationarity certificate behind Result.success (default: the run's "
        f"own, else {d.certificate:g}; see docs/success.md)",
    )


def run_verify_command(args: argparse.Namespace) -> int:
    """``zoframe verify RESULT --problem NAME`` and the ``zoframe solve ... --verify`` path.

    Prints the report and its verdict. ``zoframe verify`` exits with 0 on PASS, 1 on FAIL and 2 on
    bad input; the ``solve --verify`` path returns 0 (the solve itself ran).
    """
    from zoframe.registry import default_registry

    problem = getattr(args, "problem_obj", None)
    result_obj = getattr(args, "result_obj", None)
    target: Any
    summary: dict[str, Any] = {}
    if result_obj is not None:
        target = result_obj
    else:
        path = getattr(args, "result", None)
        if not path:
            print("zoframe verify: give RESULT (a run saved with zoframe solve -o RESULT)", file=sys.stderr)
            return 2
        target, summary = load_saved_result(path)
        if problem is None:
            name = getattr(args, "problem", None) or summary.get("problem")
            if not name:
                print(
                    "zoframe verify: the saved run does not name its problem; pass --problem NAME "
                    "(and --problem-arg K=V for its parameters)",
                    file=sys.stderr,
                )
                return 2
            from zoframe.cli import build_problem, problem_arguments

            reg = default_registry()
            pkw = dict(summary.get("problem_args", {}) or {})
            # the directory the run found a module reference in (zoframe solve -o records it)
            where = summary.get("problem_dir") if not getattr(args, "problem", None) else None
            where = where if isinstance(where, str) else None
            pkw.update(problem_arguments(reg, str(name), getattr(args, "problem_arg", None), directory=where))
            problem = build_problem(reg, str(name), pkw, directory=where)
        solver = summary.get("solver")
        if solver:
            target = dict(target)
            print(
                f"run of {solver}: status {summary.get('status')}, nit {summary.get('nit')}, nfev {summary.get('nfev')}"
            )
    d = Tolerances()
    own = None
    if result_obj is not None:
        own = result_obj.certificate
    elif isinstance(summary.get("certificate"), Mapping):
        own = summary["certificate"]
    cert_tol = getattr(args, "tol_certificate", None)
    if cert_tol is None:  # the run's own certificate tolerance, so the report and the run agree
        cert_tol = d.certificate if own is None else float(own["tol"])
    tol = Tolerances(
        stationarity=float(getattr(args, "tol_stationarity", d.stationarity)),
        feasibility=float(getattr(args, "tol_feasibility", d.feasibility)),
        gap=float(getattr(args, "tol_gap", d.gap)),
        certificate=float(cert_tol),
    )
    report = verify(
        problem,
        target,
        reference=not getattr(args, "no_reference", False),
        cache_dir=getattr(args, "cache_dir", None),
        active_tol=float(getattr(args, "active_tol", 1e-6)),
        tolerances=tol,
    )
    print(report.to_json() if getattr(args, "json", False) else report.to_text())
    if result_obj is not None:
        return 0
    return 0 if report.passed else 1
