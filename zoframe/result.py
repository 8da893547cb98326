"""Results of a run: :class:`Status`, :class:`Trace` and the frozen :class:`Result`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
import enum
import io
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zoframe.errors import InvalidInputError
from zoframe.protocols import Array

if TYPE_CHECKING:
    from matplotlib.axes import Axes


class Status(enum.IntEnum):
    """Why a run ended.

    ``CONVERGED``: the solver claims convergence (its own stopping test passed); the claim becomes
    ``Result.success`` only when the final point also passes the certificate
    (:mod:`zoframe.certificate`). ``MAX_ITER``, ``BUDGET``,
    ``MAX_TIME``: a budget ran out; not a failure of the run, but not a certificate either.
    ``CALLBACK``: the user's callback stopped the run. ``FAILED``: an error ended the run.
    ``DIVERGED``: the iterate or the solver's merit value blew up (non-finite or beyond a bound).
    ``RUNNING``: the run has not ended (a Result taken from an ask/tell run in progress).
    ``NOISE_LIMITED``: the solver stopped because the noise of the function values allows no further
    progress; the message gives the residual reached, the noise estimated and the best tolerance the
    values support.
    Only ``CONVERGED`` and ``NOISE_LIMITED`` are claims that the certificate may turn into
    ``Result.success``; see :func:`decide_success` and ``docs/success.md``.
    """

    CONVERGED = 0
    MAX_ITER = 1
    BUDGET = 2
    MAX_TIME = 3
    CALLBACK = 4
    FAILED = 5
    DIVERGED = 6
    RUNNING = 7
    NOISE_LIMITED = 8

    @property
    def success(self) -> bool:
        """Whether this status is a claim the certificate may turn into a success (``CONVERGED``, ``NOISE_LIMITED``)."""
        return self in (Status.CONVERGED, Status.NOISE_LIMITED)

    @property
    def budget(self) -> bool:
        """Whether the run stopped because a budget (iterations, calls, seconds) ran out."""
        return self in (Status.MAX_ITER, Status.BUDGET, Status.MAX_TIME)


def decide_success(status: Status, x: Array, fun: float, feasible: bool | None) -> tuple[bool, str]:
    """The one definition of ``Result.success`` for every solver family.

    A run may succeed when the solver claims convergence (``status`` is ``CONVERGED``, or
    ``NOISE_LIMITED``: as far as the noise of the values allows), the final point and objective are finite, and, for constrained problems (``feasible`` is not ``None``),
    the final point is feasible within the stated tolerance. Returns ``(success, why)`` where
    ``why`` is empty when these hold and otherwise says what is missing. The run loop then asks the
    certificate (:func:`zoframe.certificate.certify`) too: ``Result.success`` needs both.
    """
    if not bool(np.all(np.isfinite(x))):
        return False, "the final point is not finite"
    if not math.isfinite(fun) and not math.isnan(fun):
        return False, f"the final objective is not finite ({fun})"
    if math.isnan(fun) and status.success:
        return False, "the final objective is NaN"
    if feasible is False:
        return False, "the final point is not feasible"
    if not status.success:
        if status.budget:
            return False, "a budget ran out: no convergence certificate (the run did not fail)"
        return False, f"the run ended with status {status.name}"
    return True, ""


@dataclass(frozen=True)
class Trace:
    """Columns recorded along a run: ``iteration``, ``calls``, ``seconds`` and the measures.

    ``seconds`` is the solver's own time (monitoring time excluded). Access a column with
    ``trace["fun"]``; ``trace.to_csv()`` gives CSV text.
    """

    columns: Mapping[str, Array]

    def __getitem__(self, name: str) -> Array:
        try:
            return self.columns[name]
        except KeyError:
            raise KeyError(f"no trace column {name!r}; columns are {list(self.columns)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns)

    def __len__(self) -> int:
        return 0 if not self.columns else len(next(iter(self.columns.values())))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.columns)

    def to_csv(self) -> str:
        buf = io.StringIO()
        names = list(self.columns)
        buf.write(",".join(names) + "\n")
        for r in range(len(self)):
            buf.write(",".join(repr(float(self.columns[c][r])) for c in names) + "\n")
        return buf.getvalue()


@dataclass(frozen=True)
class Result:
    """The outcome of :func:`zoframe.minimize` (scipy's field names plus zeroth-order fields).

    Attributes
    ----------
    x, fun, nit, nfev, status, success, message:
        as in :class:`scipy.optimize.OptimizeResult`, with two differences. ``nfev`` counts
        *component evaluations*, not calls of your function: one data component (or one constraint)
        at one point is one evaluation, so a call ``f(X, idx)`` with ``X`` of ``k`` rows and ``b``
        indices counts ``k * b`` (the budgets ``max_calls`` are in the same unit; see
        ``user_calls`` for the calls). ``fun`` of a *minimax* run is ``F(x, y)`` at the run's own
        final ``y``, not the primal value ``g(x) = max_y F(x, y)``: it can lie below ``g(x)``; the
        registered minimax problems report ``g(x)`` as the measure ``primal`` (``measures["primal"]``
        and the trace column of the same name).
    nfev_by_kind, nfev_by_purpose:
        the same count split by oracle kind and by the solver's purpose tags; the purpose
        ``"monitor"`` holds the driver's own (unbudgeted) evaluations for the trace, ``"certify"``
        those of the certificate (also outside the budget).
    x_best, fun_best:
        the best recorded point (lowest ``fun``, feasible points first when the problem reports
        ``max_violation``); after a divergence, the last finite best point.
    feasible, max_violation, feasibility_tol:
        for constrained problems: whether the final point satisfies every constraint within
        ``feasibility_tol`` (``max_violation`` over all ``m`` constraints, as measured by the
        problem's measures); ``None`` for other kinds or when it could not be measured.
    notes:
        notices about the run, e.g. defaults the solver adapted to the problem.
    certificate:
        the stationarity certificate of the final point (:meth:`zoframe.certificate.Certificate.to_dict`:
        ``passed``, ``residual``, ``tol``, ...) when the solver claimed convergence, else ``None``;
        ``success`` is true only when it passed (see ``docs/success.md``).
    user_calls:
        calls of the problem's functions (one call evaluates a whole block of points and
        components), budgeted and monitoring together; ``None`` in results saved by older versions.
    outputs:
        everything the solver reports about its final iterate (``x`` and e.g. ``y`` or ``p``).
    measures:
        the problem's measures at the final point.
    seed:
        the seed that reproduces the run (``None`` if a Generator was passed in).
    trace:
        the recorded :class:`Trace`.
    """

    x: Array
    fun: float
    nit: int
    nfev: int
    status: Status
    success: bool
    message: str
    nfev_by_kind: Mapping[str, int]
    nfev_by_purpose: Mapping[str, int]
    x_best: Array
    fun_best: float
    solver: str
    seed: int | None
    trace: Trace
    outputs: Mapping[str, Array] = field(default_factory=dict)
    measures: Mapping[str, float] = field(default_factory=dict)
    elapsed: float = 0.0
    feasible: bool | None = None
    max_violation: float | None = None
    feasibility_tol: float | None = None
    notes: tuple[str, ...] = ()
    user_calls: int | None = None
    certificate: Mapping[str, Any] | None = None

    def __repr__(self) -> str:
        ms = ", ".join(f"{k}={v:.6g}" for k, v in self.measures.items() if k != "fun")
        return (
            f"Result(solver={self.solver!r}, status={self.status.name}, success={self.success}, "
            f"fun={self.fun:.6g}, nit={self.nit}, nfev={self.nfev}{', ' + ms if ms else ''}"
            f"{'' if self.feasible is None else f', feasible={self.feasible}'}, message={self.message!r})"
        )

    def summary(self) -> dict[str, Any]:
        """JSON-friendly summary (no trace)."""
        return {
            "solver": self.solver,
            "status": self.status.name,
            "success": self.success,
            "message": self.message,
            "fun": self.fun,
            "nit": self.nit,
            "nfev": self.nfev,
            "nfev_by_kind": dict(self.nfev_by_kind),
            "nfev_by_purpose": dict(self.nfev_by_purpose),
            "fun_best": self.fun_best,
            "seed": self.seed,
            "elapsed": self.elapsed,
            "feasible": self.feasible,
            "max_violation": self.max_violation,
            "feasibility_tol": self.feasibility_tol,
            "notes": list(self.notes),
            "user_calls": self.user_calls,
            "certificate": None if self.certificate is None else dict(self.certificate),
            "measures": {k: float(v) for k, v in self.measures.items()},
            "x": [float(v) for v in self.x],
        }

    def to_json(self) -> str:
        return json.dumps(self.summary(), indent=2)

    def save(self, path: str, *, metadata: Mapping[str, Any] | None = None) -> None:
        """Write ``PATH.json`` (summary) and ``PATH.npz`` (x, x_best, outputs, trace columns).

        ``metadata`` (JSON-serialisable, e.g. ``{"problem": "least-squares", "problem_args": {...}}``)
        is stored in the JSON beside the summary, so that ``zoframe verify PATH`` can rebuild the problem.
        """
        base = str(path).removesuffix(".json").removesuffix(".npz")
        arrays: dict[str, Array] = {"x": self.x, "x_best": self.x_best}
        arrays.update({f"outputs.{k}": np.asarray(v) for k, v in self.outputs.items()})
        arrays.update({f"trace.{k}": v for k, v in self.trace.columns.items()})
        doc = {**dict(metadata or {}), **self.summary(), FORMAT_KEY: RESULT_FORMAT}
        from zoframe.checkpoint import write_pair

        write_pair(base, arrays, doc)  # atomic as one unit: a crash leaves the old pair or the new one

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Result:
        """Read a run written by :meth:`save` (see :meth:`_read`), checked.

        A file of a newer format (``result_format``) says so; a damaged file, or one whose content
        is not a run :meth:`save` could have written (e.g. ``success=True`` with a budget status, an
        ``x`` that is not a vector), raises :class:`~zoframe.errors.InvalidInputError` naming it.
        """
        base = str(path).removesuffix(".json").removesuffix(".npz")
        check_result_format(load_metadata(base), base)
        try:
            result = cls._read(base)
        except InvalidInputError:
            raise
        except Exception as exc:  # a truncated or altered .npz: never a raw zip/numpy error
            raise InvalidInputError(
                f"the saved run at {base} (.json/.npz) is damaged ({type(exc).__name__}: {exc}); save the run again"
            ) from None
        check_loaded(result, base)
        return result

    @classmethod
    def _read(cls, path: str | os.PathLike[str]) -> Result:
        """Read a run written by :meth:`save` (``PATH.json`` and ``PATH.npz``; either suffix or none).

        The inverse of :meth:`save`: arrays (``x``, ``x_best``, outputs, trace columns) come back
        bit-identical from the ``.npz``, numbers exactly from the JSON (floats are written with
        ``repr``). The metadata given to :meth:`save` is not part of the Result; read it with
        :func:`load_metadata`.
        """
        base = str(path).removesuffix(".json").removesuffix(".npz")
        doc = load_metadata(base)
        npath = Path(base + ".npz")
        if not npath.is_file():
            raise InvalidInputError(f"no saved run at {base}: {npath} is missing (Result.save writes .json and .npz)")
        from zoframe.checkpoint import pair_is_consistent

        if not pair_is_consistent(base):
            raise InvalidInputError(
                f"the saved run at {base} is a mixed pair: its .json does not describe its .npz (a save was "
                "interrupted). zoframe.checkpoint.settle_pair(PATH) completes an interrupted save; otherwise "
                "save the run again"
            )
        with np.load(io.BytesIO(npath.read_bytes()), allow_pickle=False) as data:  # no handle left open on damage
            arrays = {k: np.array(data[k]) for k in data.files}
        try:
            status = Status[str(doc["status"])]
            outputs = {k.removeprefix("outputs."): v for k, v in arrays.items() if k.startswith("outputs.")}
            trace = Trace({k.removeprefix("trace."): v for k, v in arrays.items() if k.startswith("trace.")})
            user_calls = doc.get("user_calls")
            return cls(
                x=arrays["x"],
                fun=float(doc["fun"]),
                nit=int(doc["nit"]),
                nfev=int(doc["nfev"]),
                status=status,
                success=bool(doc["success"]),
                message=str(doc["message"]),
                nfev_by_kind={str(k): int(v) for k, v in doc["nfev_by_kind"].items()},
                nfev_by_purpose={str(k): int(v) for k, v in doc["nfev_by_purpose"].items()},
                x_best=arrays["x_best"],
                fun_best=float(doc["fun_best"]),
                solver=str(doc["solver"]),
                seed=None if doc.get("seed") is None else int(doc["seed"]),
                trace=trace,
                outputs=outputs,
                measures={str(k): float(v) for k, v in doc.get("measures", {}).items()},
                elapsed=float(doc.get("elapsed", 0.0)),
                feasible=None if doc.get("feasible") is None else bool(doc["feasible"]),
                max_violation=None if doc.get("max_violation") is None else float(doc["max_violation"]),
                feasibility_tol=None if doc.get("feasibility_tol") is None else float(doc["feasibility_tol"]),
                notes=tuple(str(n) for n in doc.get("notes", ())),
                user_calls=None if user_calls is None else int(user_calls),
                certificate=None if doc.get("certificate") is None else dict(doc["certificate"]),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise InvalidInputError(
                f"{base}.json/.npz is not a run saved by Result.save ({type(exc).__name__}: {exc}); "
                "save runs with result.save(path) or `zoframe solve ... -o PATH`"
            ) from exc

    def plot(
        self,
        y: str = "fun",
        x: str = "calls",
        *,
        ax: Axes | None = None,
        label: str | None = None,
        logy: bool | None = None,
    ) -> Axes:
        """Plot the trace column ``y`` against ``x`` (``"calls"``, ``"iteration"`` or ``"seconds"``).

        Needs matplotlib (the ``plot`` extra). See :func:`zoframe.plot.trace`, which takes several
        results.
        """
        from zoframe.plot import trace

        return trace(self, y=y, x=x, ax=ax, labels=None if label is None else [label], logy=logy)


def load_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON of a run saved by :meth:`Result.save`: its summary and the metadata given to ``save``.

    E.g. ``load_metadata(path)["problem"]`` for a run saved by ``zoframe solve -o PATH``.
    """
    base = str(path).removesuffix(".json").removesuffix(".npz")
    jpath = Path(base + ".json")
    if not jpath.is_file():
        raise InvalidInputError(
            f"no saved run at {base}: {jpath} is missing (written by Result.save / zoframe solve -o PATH)"
        )
    with open(jpath, encoding="utf-8") as fh:
        try:
            doc = json.load(fh)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"{jpath} is not valid JSON ({exc}); was it written by Result.save?") from exc
    if not isinstance(doc, dict):
        raise InvalidInputError(f"{jpath} holds a {type(doc).__name__}, not the summary of a saved run")
    return doc


#: the key of the format version in a saved run's JSON, and the version this zoframe writes
FORMAT_KEY = "result_format"
RESULT_FORMAT = 1


def check_result_format(doc: Mapping[str, Any], base: str) -> None:
    """Refuse a saved run of a format this version cannot read (runs saved before versions had none)."""
    fmt = doc.get(FORMAT_KEY)
    if fmt is None:
        return
    if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt < 1:
        raise InvalidInputError(f"the saved run at {base} has format {fmt!r}, not a format of Result.save")
    if fmt > RESULT_FORMAT:
        raise InvalidInputError(
            f"the saved run at {base} has format {fmt}, written by a newer zoframe (this one reads formats up to "
            f"{RESULT_FORMAT}): upgrade zoframe to load it"
        )


def check_loaded(r: Result, base: str) -> None:
    """Refuse a loaded run that :meth:`Result.save` could not have written (altered after the save)."""
    why = _inconsistency(r)
    if why:
        raise InvalidInputError(
            f"the saved run at {base} is not consistent: {why}. It was altered after Result.save; save the run again"
        )


def _inconsistency(r: Result) -> str:
    x = np.asarray(r.x)
    if x.ndim != 1 or x.size == 0 or not np.issubdtype(x.dtype, np.floating):
        return f"x has shape {x.shape} and dtype {x.dtype}, not a vector of floats"
    if np.shape(r.x_best) != x.shape:
        return f"x_best has shape {np.shape(r.x_best)}, x {x.shape}"
    if "x" in r.outputs and np.shape(r.outputs["x"]) != x.shape:
        return f"outputs['x'] has shape {np.shape(r.outputs['x'])}, x {x.shape}"
    counts = {"nit": r.nit, "nfev": r.nfev, **{f"nfev_by_kind[{k}]": v for k, v in r.nfev_by_kind.items()}}
    if r.user_calls is not None:
        counts["user_calls"] = r.user_calls
    bad = [k for k, v in counts.items() if v < 0]
    if bad:
        return f"{bad[0]} is negative"
    if r.feasibility_tol is not None and not (math.isfinite(r.feasibility_tol) and r.feasibility_tol >= 0):
        return f"feasibility_tol is {r.feasibility_tol}"
    if r.feasible is not None and r.max_violation is not None and r.feasibility_tol is not None \
            and r.feasible != (r.max_violation <= r.feasibility_tol):
        return f"feasible={r.feasible} with max_violation={r.max_violation} and feasibility_tol={r.feasibility_tol}"
    if r.success:
        ok, why = decide_success(r.status, np.asarray(x, dtype=np.float64), r.fun, r.feasible)
        if r.status is not Status.CONVERGED or not ok:
            return f"success=True with status {r.status.name}{f' ({why})' if why else ''}"
        if r.certificate is not None and not r.certificate.get("passed", False):
            return "success=True with a certificate that did not pass"
    lengths = {np.asarray(v).shape for v in r.trace.columns.values()}
    if any(len(s) != 1 for s in lengths) or len(lengths) > 1:
        return f"the trace columns have shapes {sorted(lengths)}, not one length"
    return ""
