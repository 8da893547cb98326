"""Ask/tell: drive any registered solver when the function is evaluated somewhere zoframe cannot call.

::

    run = zoframe.Run(problem_or_shape, "zo-sgd", rng=0, max_calls=10_000, eta=0.05)
    while (req := run.ask()) is not None:
        run.tell(req, my_cluster_evaluate(req.points, req.indices))   # (k, b) values
    res = run.result()

How it works: the solver still only calls its :class:`~zoframe.oracle.CountingOracle`. The run
loop (the same :class:`~zoframe.run.RunLoop` as :func:`~zoframe.minimize`, with the same observers)
runs in a worker thread on a stand-in problem whose functions post a :class:`Request` and wait for
its values. :meth:`Run.ask` returns the posted request, :meth:`Run.tell` checks the values (shape
and type with :func:`~zoframe.oracle.as_values`, finiteness as the oracle's ``nonfinite`` policy)
and hands them over; the oracle then counts them, exactly as if it had called the function. So a
run told the values of a function ``f`` gives a Result bit-identical to ``minimize`` on ``f`` with
the same seed (wall-clock fields aside).

A request is one call of a user function as ``minimize`` would make it: at most ``block_rows``
rows (default 256; raise it to receive whole batches, lower it to get smaller requests; the same
``block_rows`` in ``minimize`` gives the same numbers). Its ``purpose`` says what the solver
wants the values for (``"estimate"``, ``"snapshot"``, ...; ``"monitor"`` for the trace's measures,
``"certify"`` for the certificate of a run whose solver claims convergence, asked after its last step).

The problem may be a full problem object (its functions are never called: its structure, its
measures and ``monitor_free`` are used; the measures' evaluations are requests too), or a
:class:`ProblemShape` that declares only the structure: then the run records the measures every
problem of its kind has (``fun``; the violation of a constrained problem), asked for like the
solver's own values (purpose ``"monitor"``). ``ProblemShape(..., monitor=False)`` asks for none:
the trace holds ``iteration``, ``calls`` and ``seconds``, ``Result.fun`` is NaN, ``x_best`` is the
last recorded point and ``success`` is False (nothing certifies the point).

Checkpoints (:meth:`Run.save`, ``Run(..., resume=path)``) store the settings, the seed and every
value told so far (8 bytes per evaluation); resuming in another process replays the solver's
arithmetic on those values (no evaluation is asked twice) and asks the pending request again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
import hashlib
import io
import json
import os
from pathlib import Path
import threading
from typing import Any

import numpy as np

from zoframe.driver import BuiltRun, IterationInfo, RngLike, RunFailedError, build_run
from zoframe.errors import CheckpointError, InvalidInputError, NonFiniteValueError, ShapeError
from zoframe.observers.checkpointing import solver_params
from zoframe.oracle import (
    DEFAULT_BLOCK_ROWS,
    CountingOracle,
    MonitorOracle,
    NonFiniteOption,
    NonFinitePolicy,
    as_values,
)
from zoframe.problems import constrained_measures
from zoframe.protocols import Array, ConvexSet, HasMeasures, IntArray, Penalty
from zoframe.registry import Registry
from zoframe.result import Result
from zoframe.specs import PROBLEM_KINDS

__all__ = ["ProblemShape", "Request", "Run"]

FORMAT = "zoframe-asktell/1"
#: the version of :data:`FORMAT` (a checkpoint of a larger version was written by a newer zoframe)
FORMAT_VERSION = 1
_UNMONITORED = ("ProblemShape(monitor=False): no values were asked for the measures, so the final objective and "
                "feasibility are unknown and success cannot be certified; keep the default monitor=True to have them")


def _ro(a: Any, dtype: Any = np.float64) -> Any:
    out = np.array(a, dtype=dtype, copy=True)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class ProblemShape:
    """A problem declared by its structure only, for ask/tell: no callables.

    ``kind`` is ``"finite_sum"``, ``"constrained"`` (with ``m`` constraints and ``m_eq`` equality
    constraints, asked as requests of kind ``"equality"``), ``"minimax"`` (with
    ``dim_y``, ``y0`` and optionally ``y_set``) or ``"composite"`` (with ``A``, ``B``, ``c``,
    ``penalties`` and ``y0``). ``n`` is the number of components (data samples) of the objective.

    With ``monitor=True`` (the default) the run records the measures every problem of the kind has,
    computed from values it asks for like any other (purpose ``"monitor"``, charged to ``max_calls``
    as for a problem object): ``fun`` (all ``n`` components at the recorded point; for a minimax
    problem ``F(x, y)``, for a composite one ``f(x) + sum_j psi_j(y_j)`` and the coupling
    ``residual``) and, for a constrained problem, the violation measures of a full pass over all ``m``
    constraints (feasible below ``violation_tol``). So ``Result.fun``, ``feasible`` and ``success``
    mean what they mean for a problem object. ``monitor=False`` asks for nothing beyond the
    solver's own requests: ``fun`` is then NaN, feasibility unknown, and ``success`` is False
    because nothing certifies the final point.
    """

    kind: str
    dim: int
    x0: Array
    n: int = 1
    m: int = 0
    dim_y: int = 0
    y0: Any = None
    y_set: ConvexSet | None = None
    feasible_set: ConvexSet | None = None
    convex_constraints: bool = True
    black_box_constraints: bool = True
    A: Array | None = None
    B: Sequence[Array] = ()
    c: Array | None = None
    penalties: Sequence[Penalty] = ()
    violation_tol: float = 1e-3
    monitor: bool = True
    m_eq: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.monitor, bool):
            raise InvalidInputError(f"ProblemShape monitor must be True or False, got {self.monitor!r}")
        if not (isinstance(self.violation_tol, (int, float)) and self.violation_tol >= 0):
            raise InvalidInputError(f"ProblemShape violation_tol must be a number >= 0, got {self.violation_tol!r}")
        if self.kind not in PROBLEM_KINDS:
            raise InvalidInputError(f"ProblemShape kind must be one of {PROBLEM_KINDS}, got {self.kind!r}")
        for name in ("dim", "n", "m", "m_eq", "dim_y"):
            v = getattr(self, name)
            zero = name in ("m", "m_eq", "dim_y")
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < (0 if zero else 1):
                raise InvalidInputError(f"ProblemShape {name} must be a {'non-negative' if zero else 'positive'} integer, got {v!r}")
        if self.m_eq and self.kind != "constrained":
            raise InvalidInputError(f"ProblemShape m_eq (equality constraints) needs kind='constrained', got {self.kind!r}")
        x0 = np.asarray(self.x0, dtype=np.float64)
        if x0.shape != (self.dim,):
            raise ShapeError(f"ProblemShape x0 must have shape ({self.dim},), got {np.shape(self.x0)}")
        if not np.isfinite(x0).all():
            raise InvalidInputError("ProblemShape x0 contains NaN or infinity: give a finite starting point")
        object.__setattr__(self, "x0", _ro(x0))
        if self.kind == "constrained" and self.m < 1 and self.m_eq < 1:
            raise InvalidInputError(
                "a constrained ProblemShape needs m >= 1 inequality constraints or m_eq >= 1 equality constraints"
            )
        if self.kind == "minimax":
            if self.dim_y < 1 or self.y0 is None or np.shape(self.y0) != (self.dim_y,):
                raise InvalidInputError(
                    f"a minimax ProblemShape needs dim_y >= 1 and y0 of shape (dim_y,), got dim_y={self.dim_y}, "
                    f"y0 of shape {np.shape(self.y0) if self.y0 is not None else None}"
                )
            object.__setattr__(self, "y0", _ro(self.y0))
            if not np.isfinite(self.y0).all():
                raise InvalidInputError("ProblemShape y0 contains NaN or infinity: give a finite starting point")
        if self.kind == "composite" and (self.A is None or self.c is None or not self.B or self.y0 is None):
            raise InvalidInputError("a composite ProblemShape needs A, B, c, penalties and y0 (one block per B_j)")


    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        """The measures every problem of the kind has (see the class doc), through ``monitor``."""
        x = outputs["x"]
        if self.kind == "constrained":
            return constrained_measures(x, monitor, float(self.violation_tol))
        if self.kind == "minimax":
            return {"fun": float(monitor.minimax(x, outputs["y"]).mean())}
        out = {"fun": float(monitor.objective(x).mean())}
        if self.kind == "composite":
            ys = [outputs[f"y{j}"] for j in range(len(self.B)) if f"y{j}" in outputs]
            if len(ys) == len(self.B) and self.A is not None and self.c is not None:
                out["fun"] += sum(float(p.value(y)) for p, y in zip(self.penalties, ys, strict=True))
                r = self.A @ x + sum(b @ y for b, y in zip(self.B, ys, strict=True)) - self.c
                out["residual"] = float(np.linalg.norm(r))
        return out


@dataclass(frozen=True, eq=False)
class Request:
    """A batch of values the solver needs: ``values[r, s] = f_{indices[s]}(points[r])``.

    ``kind``: ``"objective"`` (a finite-sum component; also the smooth part of a composite
    problem), ``"constraint"`` (``f_j``), ``"equality"`` (``h_l``, a problem with equality
    constraints) or ``"minimax"`` (``F_i(points[r], points_y[r])``).
    ``purpose``: what the solver wants them for (``"monitor"``: the trace's measures). Tell a
    ``(k, b)`` array of real numbers (``shape``); for ``b == 1`` a ``(k,)`` array also works.
    """

    id: int
    kind: str
    points: Array
    indices: IntArray
    points_y: Array | None = None
    purpose: str = "estimate"

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.points.shape[0]), int(self.indices.shape[0])


def _digest(kind: str, arrays: Sequence[Array], idx: IntArray) -> str:
    h = hashlib.sha256(kind.encode())
    for a in (*arrays, np.asarray(idx, dtype=np.int64)):
        h.update(str(a.shape).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


class _Closed(BaseException):
    """Ends the worker thread of a closed run (not an error of the run)."""


class _Channel:
    """The meeting point of the worker (the solver asking) and the user (telling)."""

    def __init__(self, nonfinite: NonFinitePolicy) -> None:
        self.cond = threading.Condition()
        self.nonfinite = nonfinite
        self.pending: Request | None = None
        self.answer: Array | None = None
        self.done = False
        self.closed = False
        self.count = 0
        self.log: list[tuple[str, Array]] = []  # (digest, values) of every request answered
        self.replay: list[tuple[str, Array]] = []  # answers read from a checkpoint
        self.source = "the checkpoint"  # the file they were read from
        self.oracle: CountingOracle | None = None
        self._purposes: Counter[str] = Counter()

    def _purpose(self) -> str:
        now = self.oracle.calls_by_purpose if self.oracle is not None else Counter()
        changed = [p for p, c in now.items() if c != self._purposes.get(p, 0)]
        self._purposes = Counter(now)
        return changed[0] if changed else "estimate"

    def request(self, kind: str, arrays: tuple[Array, ...], idx: IntArray) -> Array:
        """Worker side: the values for one call of a user function (replayed, or asked and told)."""
        i = self.count
        self.count += 1
        digest = _digest(kind, arrays, idx)
        purpose = self._purpose()
        if i < len(self.replay):
            stored, values = self.replay[i]
            if stored != digest:
                raise CheckpointError(
                    f"resuming {self.source} replayed the run differently at request #{i}: the solver asked other "
                    "points than when the checkpoint was written (another problem, x0 or version of the solver, "
                    "or a damaged file?)"
                )
            if values.shape != (arrays[0].shape[0], idx.shape[0]):
                raise CheckpointError(
                    f"{self.source}: the values of request #{i} have shape {values.shape}, not the "
                    f"{(arrays[0].shape[0], idx.shape[0])} asked: the file is damaged"
                )
            self.log.append((digest, values))
            return values.copy()
        req = Request(i, kind, arrays[0], idx, arrays[1] if len(arrays) > 1 else None, purpose)
        with self.cond:
            self.pending, self.answer = req, None
            self.cond.notify_all()
            while self.answer is None and not self.closed:
                self.cond.wait()
            if self.closed:
                raise _Closed()
            values = self.answer
            self.answer = None
            self.log.append((digest, values))
        return values.copy()

    def wait_idle(self) -> None:
        """User side: until the worker waits for a tell or has finished."""
        with self.cond:
            while self.pending is None and not self.done:
                self.cond.wait()

    def tell(self, req: Request, values: Any) -> None:
        with self.cond:
            if isinstance(req, Request) and self.pending is not None and req.id == self.pending.id \
                    and req is not self.pending:
                raise InvalidInputError(
                    f"tell() got a request #{req.id} that this run did not ask (another Run's, or a copy): tell "
                    "each run the values of the request its own ask() returned"
                )
            same = req is self.pending
            if self.pending is None or not same:
                asked = "nothing is asked" if self.pending is None else f"request #{self.pending.id} is asked"
                got = f"request #{req.id}" if isinstance(req, Request) else repr(req)
                raise InvalidInputError(
                    f"tell() got {got}, but {asked}: tell the values of the request ask() returned, once"
                )
            k, b = self.pending.shape
            what = f"the values told for request #{req.id} ({self.pending.kind})"
            vals = as_values(values, k, b, what)
            if self.nonfinite == "raise" and not np.isfinite(vals).all():
                r, s = (int(v) for v in np.argwhere(~np.isfinite(vals))[0])
                raise NonFiniteValueError(
                    f"{what}: {vals[r, s]} at row {r} (index {int(self.pending.indices[s])}); tell finite values, "
                    "or create the run with nonfinite='inf' to treat such values as +inf"
                )
            vals.setflags(write=False)
            self.answer, self.pending = vals, None  # ask() now waits for the next request
            self.cond.notify_all()


class _Asked:
    """The stand-in problem: the source's structure; its functions are requests."""

    def __init__(self, source: Any, channel: _Channel) -> None:
        for name in ("kind", "dim", "n", "m", "m_eq", "x0", "convex_constraints", "black_box_constraints",
                     "feasible_set", "dim_y", "y_set", "y0", "A", "B", "c", "penalties", "monitor_free"):
            if hasattr(source, name):
                setattr(self, name, getattr(source, name))
        self._source = source
        self._channel = channel

    def components(self, X: Array, idx: IntArray) -> Array:
        return self._channel.request("objective", (X,), idx)

    def constraints(self, X: Array, idx: IntArray) -> Array:
        return self._channel.request("constraint", (X,), idx)

    def equalities(self, X: Array, idx: IntArray) -> Array:
        return self._channel.request("equality", (X,), idx)

    def values(self, X: Array, Y: Array, idx: IntArray) -> Array:
        return self._channel.request("minimax", (X, Y), idx)


def _measures(self: _Asked, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
    return dict(self._source.measures(outputs, monitor))


def _linear_constraints(self: _Asked) -> Any:
    return self._source.linear_constraints()


def _cvxpy_constraints(self: _Asked, x: Any) -> Any:
    return self._source.cvxpy_constraints(x)


def _stand_in(problem: Any, channel: _Channel) -> _Asked:
    """A stand-in with the problem's structure and, where it has them, its measures and its white-box
    constraint structure (``linear_constraints``, ``cvxpy_constraints``: structure, not evaluations).
    Its functions are requests; white-box gradients are not offered (they would be evaluations)."""
    extras: dict[str, Any] = {}
    if isinstance(problem, HasMeasures) and not (isinstance(problem, ProblemShape) and not problem.monitor):
        extras["measures"] = _measures
    for name, fn in (("linear_constraints", _linear_constraints), ("cvxpy_constraints", _cvxpy_constraints)):
        if callable(getattr(problem, name, None)):
            extras[name] = fn
    cls = type("AskedProblem", (_Asked,), extras) if extras else _Asked
    out: _Asked = cls(problem, channel)
    return out


#: minimize() arguments a Run refuses, and what to do instead
_NOT_ASKTELL = {
    "checkpoint": "save the run with Run.save(path) and continue it with Run(..., resume=path)",
    "checkpoint_every": "save the run with Run.save(path) when you like (e.g. every few tells)",
    "executor": "the values come from your tell(): evaluate the requests wherever you like",
    "chunks": "the values come from your tell(): split the requests' points as you like",
    "progress": "the run advances with your tells; report progress from your loop",
}


class Run:
    """A run driven from outside: :meth:`ask` for a batch of points, :meth:`tell` their values.

    Arguments as :func:`zoframe.minimize` (solver parameters as keywords; ``solver=None``: the default
    solver of the problem's kind, as in :func:`zoframe.minimize`), without the executor,
    the progress bar, periodic checkpoints and ``max_time`` (the run's time is mostly spent waiting
    for tells). ``resume``: a path written by :meth:`save`; the settings must match it.
    """

    def __init__(
        self,
        problem: Any,
        solver: Any = None,
        *,
        rng: RngLike = None,
        max_iter: int | None = None,
        max_calls: int | None = None,
        record_every: int | None = None,
        callback: Callable[[IterationInfo], bool | None] | None = None,
        x0: Array | None = None,
        block_rows: int = DEFAULT_BLOCK_ROWS,
        nonfinite: NonFiniteOption = "auto",
        blas_threads: int | None = 1,
        feasibility_tol: float = 1e-3,
        estimator: Any = None,
        estimator_params: Mapping[str, Any] | None = None,
        registry: Registry | None = None,
        options: Mapping[str, Any] | None = None,
        resume: str | os.PathLike[str] | None = None,
        **solver_kwargs: Any,
    ) -> None:
        if "max_time" in solver_kwargs:
            raise InvalidInputError("max_time is not available with ask/tell (the run mostly waits for tell()); "
                                    "use max_iter or max_calls")
        for name, instead in _NOT_ASKTELL.items():
            if name in solver_kwargs:
                raise InvalidInputError(f"{name}= is not available with ask/tell: {instead}")
        self._channel = _Channel("raise" if nonfinite == "raise" else "inf")  # "auto": set once the solver is known
        self._problem = _stand_in(problem, self._channel)
        self._unmonitored = isinstance(problem, ProblemShape) and not problem.monitor
        stored: dict[str, Any] | None = None
        replay: list[tuple[str, Array]] = []
        if resume is not None:
            stored, replay = _load(resume)
            if rng is None:
                rng = stored["seed"]
        self._built: BuiltRun = build_run(
            self._problem, solver, rng=rng, max_iter=max_iter, max_calls=max_calls, record_every=record_every,
            callback=callback, x0=x0, block_rows=block_rows, nonfinite=nonfinite, blas_threads=blas_threads,
            feasibility_tol=feasibility_tol, estimator=estimator, estimator_params=estimator_params,
            registry=registry, options=options, watched=True, **solver_kwargs,
        )
        loop = self._built.loop
        self._channel.oracle = loop.oracle
        self._channel.nonfinite = loop.oracle.nonfinite  # the policy "auto" resolved to for this solver
        self._settings: dict[str, Any] = {
            "solver": loop.solver_name,
            "solver_params": solver_params(loop.solver),
            "seed": loop.seed,
            "max_iter": max_iter,
            "max_calls": max_calls,
            "record_every": record_every,
            "block_rows": int(block_rows),
            "nonfinite": nonfinite,
            "feasibility_tol": float(feasibility_tol),
            "problem": {"kind": loop.oracle.kind, "dim": loop.oracle.dim, "n": loop.oracle.n, "m": loop.oracle.m,
                        "dim_y": loop.oracle.dim_y},
            "x0": _digest("x0", (np.asarray(loop.x0, dtype=np.float64),), np.zeros(0, dtype=np.intp)),
        }
        if stored is not None:
            diff = [f"{k}: {stored.get(k)!r} in the checkpoint, {v!r} now" for k, v in self._settings.items()
                    if _jsonable(stored.get(k)) != _jsonable(v)]
            if diff:
                raise InvalidInputError(f"cannot resume {resume}: the run differs ({'; '.join(diff)})")
            if loop.oracle.nonfinite == "raise" and not all(np.isfinite(v).all() for _, v in replay):
                raise CheckpointError(
                    f"ask/tell checkpoint {resume} holds non-finite values, which a run with nonfinite='raise' "
                    "never accepts: the file is damaged"
                )
            self._channel.replay = replay
            self._channel.source = f"ask/tell checkpoint {resume}"
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # ------------------------------------------------------------------ the protocol
    def ask(self) -> Request | None:
        """The next batch the solver needs, or ``None`` when the run has ended.

        Asking again before telling returns the same request.
        """
        self._start()
        self._channel.wait_idle()
        return self._channel.pending

    def tell(self, request: Request, values: Any) -> None:
        """The values of ``request`` (``(k, b)`` real numbers); checked before the solver sees them."""
        self._channel.tell(request, values)

    @property
    def done(self) -> bool:
        """Whether the run has ended (``ask()`` returns ``None``)."""
        if self._thread is not None:
            self._channel.wait_idle()
        return self._channel.done

    def result(self) -> Result:
        """The Result now: the final one when the run has ended, else a ``RUNNING`` snapshot.

        A snapshot evaluates nothing: ``x`` is the iterate after the last completed iteration,
        ``fun`` and ``measures`` those of the last trace record.
        """
        if self._thread is not None:
            self._channel.wait_idle()
        if self._error is not None:
            raise self._error
        res = self._built.result() if self._channel.done else self._built.loop.result(self._built.best, self._built.trace.columns)
        if self._unmonitored and not res.success:
            res = replace(res, message=f"{res.message} ({_UNMONITORED})")
        return res

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write a checkpoint (one ``.npz`` file, atomically): the settings and every told value."""
        if self._settings["seed"] is None:
            raise InvalidInputError("a run started from a numpy Generator cannot be checkpointed: pass an integer seed")
        if self._thread is not None:
            self._channel.wait_idle()
        with self._channel.cond:
            log = list(self._channel.log)
        target = Path(str(path)).with_suffix(".npz") if not str(path).endswith(".npz") else Path(path)
        doc = {"format": FORMAT, "format_version": FORMAT_VERSION, **self._settings, "digests": [d for d, _ in log]}
        arrays = {f"values.{i}": v for i, (_, v) in enumerate(log)}
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp.npz")
        with open(tmp, "wb") as fh:
            np.savez(fh, meta=np.array(json.dumps(doc)), **arrays)  # type: ignore[arg-type]
        os.replace(tmp, target)
        return target

    def close(self) -> None:
        """Abandon the run: the worker thread ends (a no-op once the run has ended)."""
        with self._channel.cond:
            self._channel.closed = True
            self._channel.cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the worker
    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="zoframe-ask-tell", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        try:
            self._built.run()
        except _Closed:
            pass
        except BaseException as exc:  # handed to the user's thread by result()
            if not isinstance(exc, RunFailedError):
                self._error = exc
        finally:
            with self._channel.cond:
                self._channel.done = True
                self._channel.pending = None
                self._channel.cond.notify_all()


def _jsonable(v: Any) -> Any:
    return json.loads(json.dumps(v))


def _load(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[tuple[str, Array]]]:
    """Read an ask/tell checkpoint; any damage is a :class:`CheckpointError` naming the file."""
    target = Path(str(path))
    if not target.exists() and target.with_suffix(".npz").exists():
        target = target.with_suffix(".npz")
    if not target.is_file():
        raise CheckpointError(f"no ask/tell checkpoint at {path!s}")
    try:
        with np.load(io.BytesIO(target.read_bytes()), allow_pickle=False) as data:  # no handle left open on damage
            files = set(data.files)
            if "meta" not in files:
                raise CheckpointError(f"{target} is not an ask/tell checkpoint (no meta)")
            doc = json.loads(str(data["meta"]))
            if not isinstance(doc, dict):
                raise CheckpointError(f"ask/tell checkpoint {target}: its meta is not a JSON object")
            _check_format(doc, target)
            digests = doc.pop("digests", None)
            if not isinstance(digests, list) or not all(isinstance(d, str) for d in digests):
                raise CheckpointError(f"ask/tell checkpoint {target}: its list of request digests is missing or damaged")
            missing = [f"values.{i}" for i in range(len(digests)) if f"values.{i}" not in files]
            if missing:
                raise CheckpointError(f"ask/tell checkpoint {target} is incomplete: {', '.join(missing[:3])} missing")
            replay = [(d, _ro(data[f"values.{i}"])) for i, d in enumerate(digests)]
    except CheckpointError:
        raise
    except Exception as exc:  # a truncated or altered file: say which, never a raw zip/JSON/numpy error
        raise CheckpointError(
            f"ask/tell checkpoint {target} is damaged ({type(exc).__name__}: {exc}); restore it from a copy "
            "or start the run afresh"
        ) from None
    for i, (_, v) in enumerate(replay):
        if v.ndim != 2:
            raise CheckpointError(f"ask/tell checkpoint {target}: values.{i} is not a (k, b) array; the file is damaged")
    seed = doc.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise CheckpointError(f"ask/tell checkpoint {target}: its seed {seed!r} is not a non-negative integer")
    doc.pop("format")
    doc.pop("format_version", None)
    return doc, replay


def _check_format(doc: Mapping[str, Any], target: Path) -> None:
    fmt = doc.get("format")
    version = doc.get("format_version", 1)
    if isinstance(fmt, str) and fmt.startswith("zoframe-asktell/"):
        tail = fmt.rpartition("/")[2]
        if tail.isdigit() and int(tail) > FORMAT_VERSION:
            raise CheckpointError(
                f"ask/tell checkpoint {target} has format {fmt}, written by a newer zoframe (this one reads up to "
                f"{FORMAT}): upgrade zoframe to resume it"
            )
    if fmt != FORMAT:
        raise CheckpointError(f"{target} has format {fmt!r}, expected {FORMAT!r}: not an ask/tell checkpoint")
    if not isinstance(version, int) or isinstance(version, bool) or version > FORMAT_VERSION:
        raise CheckpointError(
            f"ask/tell checkpoint {target} has format version {version!r}, this zoframe reads up to {FORMAT_VERSION}: "
            "upgrade zoframe to resume it"
        )
