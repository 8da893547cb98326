"""The ``zoframe`` command line: list, info, solve, reproduce, data, and plugin commands."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
import difflib
import importlib
import inspect
import json
import math
import os
import sys
import textwrap
import types
import typing
from typing import Any

import numpy as np

from zoframe.errors import InvalidInputError, ZoframeError
from zoframe.registry import Registry, default_registry
from zoframe.specs import describe_params


def _cmd_list(args: argparse.Namespace, reg: Registry) -> int:
    sections: list[tuple[str, dict[str, Any]]] = [
        ("Solvers", dict(reg.solvers())),
        ("Estimators", dict(reg.estimators())),
        ("Problems", dict(reg.problems())),
    ]
    for title, table in sections:
        print(f"{title}:")
        if not table:
            print("  (none)")
        for name in sorted(table):
            spec = table[name].spec
            extra = ""
            if hasattr(spec, "problem_kinds"):
                extra = f" [{', '.join(sorted(spec.problem_kinds))}]"
                defaults = reg.defaults_of(spec)
                if defaults:
                    extra += f" (default for {', '.join(sorted(defaults))} problems)"
            elif hasattr(spec, "kind"):
                extra = f" [{spec.kind}]"
            print(f"  {name:<16} {spec.summary}{extra}")
            print(f"  {'':<16}   {spec.reference}")
    # the names `zoframe bench SUITE` and `zoframe reproduce NAME` take (summaries only: no module loads)
    for title, table, how in (
        ("Benchmark suites", dict(reg.suites()), "zoframe bench SUITE"),
        ("Reproductions", dict(reg.reproductions()), "zoframe reproduce NAME"),
    ):
        print(f"{title} ({how}):")
        if not table:
            print("  (none)")
        for name in sorted(table):
            spec = table[name].spec
            print(f"  {name:<16} {spec.summary}")
            print(f"  {'':<16}   {spec.reference}")
    if reg.failed:
        print("\nPlugins that failed to load:")
        for msg in reg.failed.values():
            print(f"  {msg}")
    return 0


def _cmd_info_user_problem(name: str, reg: Registry) -> int:
    """``zoframe info module:attr``: a problem of the user's own, its arguments and what it builds."""
    from zoframe.userproblem import problem_source

    source = problem_source(name, reg)
    target = source.factory if source.factory is not None else source.obj
    print(f"{name} (a problem of your own: {'a factory' if source.factory is not None else 'a problem object'})")
    if source.factory is not None:
        print(f"  arguments (--problem-arg KEY=VALUE): {_signature_listing(source.factory)}")
    try:
        problem = source.build()
    except Exception as exc:  # a factory with required arguments: say what it needs, build nothing
        print(f"  (not built without arguments: {type(exc).__name__}: {exc})")
    else:
        m = getattr(problem, "m", None)
        shape = f"dim {getattr(problem, 'dim', '?')}" + (f", m {m}" if m is not None else "")
        print(f"  problem kind: {problem.kind} ({shape}{', with the default arguments' if source.factory else ''})")
    doc = getattr(target, "__doc__", "") or ""
    if doc.strip() and source.factory is not None:
        print("\n" + textwrap.indent(textwrap.dedent(doc).strip(), "  "))
    return 0


def _cmd_info(args: argparse.Namespace, reg: Registry) -> int:
    from zoframe.errors import UnknownNameError
    from zoframe.userproblem import looks_like_reference

    try:
        kind, spec, provider = reg.find(args.name)
    except UnknownNameError:
        if not looks_like_reference(args.name):
            raise
        return _cmd_info_user_problem(args.name, reg)
    print(f"{spec.name} ({kind}, from plugin {provider})")
    print(f"  {spec.summary}")
    if kind == "solver":
        print(f"  problem kinds: {', '.join(sorted(spec.problem_kinds))}")
        defaults = reg.defaults_of(spec)
        if defaults:
            print(f"  default for: {', '.join(sorted(defaults))} problems (minimize / zoframe solve without a solver)")
        print(f"  zeroth order: {'yes' if spec.zeroth_order else 'no (first-order reference)'}")
    if kind == "problem":
        print(f"  problem kind: {spec.kind}")
        print(f"  arguments (--problem-arg KEY=VALUE): {_signature_listing(spec.factory)}")
        if spec.parameters:
            print("  parameters:")
            for k, v in spec.parameters.items():
                print(f"    {k:<18} {v}")
    else:
        params = describe_params(spec.cls)
        if params:
            print("  parameters:")
            print(f"    {'name':<18} {'symbol':<10} {'default':<14} description")
            for p in params:
                print(f"    {p.name:<18} {p.symbol or '-':<10} {p.default!s:<14} {p.doc}")
    doc = (spec.cls.__doc__ if kind != "problem" else getattr(spec.factory, "__doc__", "")) or ""
    if doc.strip():
        print("\n" + textwrap.indent(textwrap.dedent(doc).strip(), "  "))
    print(f"\n  citation: {spec.reference}")
    return 0


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _print_feasible_snapshot(problem: Any, outputs: Mapping[str, Any]) -> None:
    """A solver that keeps a feasible copy of its iterate (``outputs["x_feasible"]``): its measures too."""
    if "x_feasible" not in outputs:
        return
    from zoframe.oracle import CountingOracle

    step = outputs.get("feasible_step")
    viol = outputs.get("feasible_max_violation")
    head = "feasible snapshot x_feasible"
    if step is not None and viol is not None:
        head += f" (step {int(step)}, max violation {float(viol):.3g} over {int(outputs.get('feasible_checked', 0))} constraints)"
    measures = getattr(problem, "measures", None)
    if callable(measures):
        vals = measures({"x": np.asarray(outputs["x_feasible"])}, CountingOracle(problem).monitor)
        head += ": " + ", ".join(f"{k}={float(v):.6g}" for k, v in vals.items())
    print(head)


def _cmd_solve(args: argparse.Namespace, reg: Registry) -> int:
    from zoframe.driver import minimize

    pkw = problem_arguments(reg, args.problem, args.problem_arg)
    problem = build_problem(reg, args.problem, pkw)
    params = dict(_certificate_kv(_pairs(args.param)))
    extra: dict[str, Any] = {}
    if getattr(args, "certify_tol", None) is not None:
        params["certify_tol"] = args.certify_tol
    if getattr(args, "no_certificate", False):
        params["certificate"] = False
    est_items = _pairs(getattr(args, "estimator_param", None))
    if est_items:
        if args.estimator is None:
            raise InvalidInputError(
                "--estimator-param configures the estimator named by --estimator NAME; give --estimator "
                "(the solver's default estimator takes the solver's own parameters: -p q=... -p mu=...)"
            )
        ecls = reg.estimator(args.estimator).cls
        extra["estimator_params"] = typed_arguments(ecls, est_items, f"estimator {args.estimator!r}", "--estimator-param")
        if "estimator_params" not in inspect.signature(minimize).parameters:
            raise InvalidInputError(
                "--estimator-param needs zoframe.minimize(..., estimator_params=...), which this installation "
                "does not provide; update zoframe, or pass the parameters to the solver with -p where it has them"
            )
    verify_report = _verifier() if args.verify else None  # a missing plugin is said before the run
    if args.output:
        _check_output(args.output)  # before the run, not after its budget is spent
    try:
        res = minimize(
            problem,
            args.solver,
            estimator=args.estimator,
            rng=args.seed,
            max_iter=args.max_iter,
            max_calls=args.max_calls,
            max_time=args.max_time,
            progress=not args.no_progress,
            **extra,
            **params,
        )
    except ZoframeError as exc:
        partial = getattr(exc, "result", None)  # a run that failed part-way keeps what it computed
        if partial is None and "estimator_params" in str(exc):  # say it in the command line's words
            raise InvalidInputError(f"{exc} (on the command line: --estimator-param KEY=VALUE, or -e KEY=VALUE)") from None
        if partial is None or verify_report is None:
            raise
        print(partial)
        print(f"zoframe: error: {exc}", file=sys.stderr)
        try:
            print(verify_report(problem, partial))
        except ZoframeError as vexc:
            print(f"(no verification report of the failed run's point: {vexc})")
        return 2
    print(res)
    _print_feasible_snapshot(problem, res.outputs)
    known = getattr(problem, "known_solution", None)
    if callable(known):
        try:
            sol = known()
            print(f"distance to the known solution: {float(np.linalg.norm(res.x - sol['x'])):.4g}; "
                  f"objective gap: {res.fun - float(sol['fun']):.4g}")
        except (ZoframeError, KeyError, ValueError) as exc:
            print(f"(no known solution to compare with: {exc})")
    if args.output:
        from zoframe.userproblem import portable_reference

        ref, where = portable_reference(args.problem, reg)  # found again from any working directory
        meta: dict[str, Any] = {"problem": ref, "problem_args": pkw}
        if where is not None:
            meta["problem_dir"] = where
        try:
            res.save(args.output, metadata=meta)
        except OSError as exc:
            raise InvalidInputError(
                f"cannot write the result to {args.output}.json/.npz ({exc.strerror or exc}); the run's result is "
                "printed above: give an --output in a directory you can write"
            ) from None
        print(f"wrote {args.output}.json and {args.output}.npz")
    if verify_report is not None:
        print(verify_report(problem, res))
    # exit 0 for a certified run and for a budget stop at an acceptable point; 1 otherwise
    return 0 if res.success or (res.status.budget and res.feasible is not False) else 1


def _certificate_kv(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, Any]]:
    """``-p`` items as values; ``certificate`` read as a boolean and ``certify_tol`` as a number (a text
    such as ``no`` would otherwise reach minimize as a string)."""
    out: list[tuple[str, Any]] = []
    for key, text in pairs:
        if key in ("certificate", "certify_tol"):
            try:
                out.append((key, _convert(text, bool if key == "certificate" else float)))
            except ValueError as exc:
                raise InvalidInputError(
                    f"-p {key}={text!r}: {exc} (or use --no-certificate / --certify-tol TOL)"
                ) from None
        else:
            out.append((key, _parse_value(text)))
    return out


def _check_output(output: str) -> None:
    """Refuse an ``--output`` whose directory cannot be created or written (nothing is created here)."""
    base = os.path.abspath(output)
    ancestor = os.path.dirname(base)
    while not os.path.exists(ancestor):
        parent = os.path.dirname(ancestor)
        if parent == ancestor:
            break
        ancestor = parent
    if not os.path.isdir(ancestor) or not os.access(ancestor, os.W_OK | os.X_OK):
        what = "is not a directory" if not os.path.isdir(ancestor) else "is not writable"
        raise InvalidInputError(
            f"--output {output}: {ancestor} {what}, so {output}.json/.npz cannot be written; give a path in a "
            "directory you can write"
        )


#: the module whose ``verify(problem, result) -> Report`` builds the report of ``solve --verify``
_VERIFY_MODULE = "zoframe_verify.verify"


def _verifier() -> Callable[[Any, Any], str]:
    """The verification report of a returned point (``zoframe_verify.verify``), imported on use."""
    try:
        verify = importlib.import_module(_VERIFY_MODULE).verify
    except (ImportError, AttributeError) as exc:
        raise InvalidInputError(
            f"--verify needs the verification package zoframe_verify, which cannot be imported ({exc}); "
            "install zoframe with its first-party packages (pip install -e .) or drop --verify"
        ) from None

    def report(problem: Any, result: Any) -> str:
        return str(verify(problem, result).to_text())

    return report


def _build_problem(
    name: str, factory: Callable[..., Any], kwargs: Mapping[str, Any], signature_of: Callable[..., Any] | None = None
) -> Any:
    """``factory(**kwargs)``; a plain ``TypeError`` / ``ValueError`` from it becomes a one-line error.

    The factory is called directly (not through ``Registry.make_problem(name, **kwargs)``, whose own
    ``name`` parameter would collide with a problem argument called ``name``).
    """
    try:
        return factory(**kwargs)
    except ZoframeError:
        raise
    except (TypeError, ValueError) as exc:
        given = ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) or "no arguments"
        raise InvalidInputError(
            f"problem {name!r} could not be built with {given}: {type(exc).__name__}: {exc}. "
            f"Its arguments: {_signature_listing(signature_of or factory)}"
        ) from None


def _pairs(items: Sequence[str] | None) -> list[tuple[str, str]]:
    """``KEY=VALUE`` items as ``(key, text)`` pairs (``-`` in keys read as ``_``)."""
    out = []
    for item in items or ():
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise InvalidInputError(f"expected KEY=VALUE, got {item!r}")
        out.append((key.strip().replace("-", "_"), val))
    return out


def _kv(items: Sequence[str] | None) -> list[tuple[str, Any]]:
    return [(k, _parse_value(v)) for k, v in _pairs(items)]


# ---------------------------------------------------------------- typed KEY=VALUE arguments


def _parameters(target: Callable[..., Any]) -> tuple[dict[str, inspect.Parameter], dict[str, Any], bool]:
    """The keyword-passable parameters of ``target`` (a function or a class), their resolved
    annotations, and whether it takes ``**kwargs``."""
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return {}, {}, True
    try:
        hints = typing.get_type_hints(target.__init__ if inspect.isclass(target) else target)
    except Exception:  # unresolvable annotations: fall back to the raw ones
        hints = {}
    params = {
        n: p for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    types_ = {n: hints.get(n, p.annotation) for n, p in params.items()}
    var_kw = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    return params, types_, var_kw


def _type_name(tp: Any) -> str:
    if tp is inspect.Parameter.empty or tp is Any:
        return "any"
    if isinstance(tp, str):
        return tp
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join("None" if a is type(None) else _type_name(a) for a in typing.get_args(tp))
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin is not None:
        return getattr(origin, "__name__", str(origin))
    return getattr(tp, "__name__", str(tp))


def _signature_listing(target: Callable[..., Any]) -> str:
    params, types_, var_kw = _parameters(target)
    parts = []
    for n, p in params.items():
        text = f"{n}: {_type_name(types_[n])}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        parts.append(text)
    if var_kw:
        parts.append("**other keywords")
    return ", ".join(parts) if parts else "(none)"


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_NONE = {"none", "null"}


def _convert(text: str, tp: Any) -> Any:
    """``text`` as a value of type ``tp``; ``ValueError`` saying what was expected otherwise."""
    if tp is inspect.Parameter.empty or tp is Any or isinstance(tp, str):
        return _parse_value(text)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        members = typing.get_args(tp)
        if type(None) in members and text.strip().lower() in _NONE:
            return None
        reasons = []
        for member in members:
            if member is type(None):
                continue
            try:
                return _convert(text, member)
            except ValueError as exc:
                reasons.append(str(exc).removeprefix("expected "))
        none = " or none" if type(None) in members else ""
        raise ValueError("expected " + " or ".join(reasons) + none)
    if origin is typing.Literal:
        for choice in typing.get_args(tp):
            if str(choice) == text:
                return choice
        raise ValueError(f"expected one of {_type_name(tp)}")
    if tp is bool:
        low = text.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ValueError("expected true or false")
    if tp is int:
        try:
            return int(text)
        except ValueError:
            pass
        try:
            v = float(text)
        except ValueError:
            raise ValueError("expected an integer") from None
        if not v.is_integer():
            raise ValueError("expected an integer")
        return int(v)
    if tp is float:
        try:
            v = float(text)
        except ValueError:
            raise ValueError("expected a number") from None
        if math.isnan(v):
            raise ValueError("expected a number, not nan")
        return v
    if tp is str:
        return text
    if origin in (list, tuple) or tp in (list, tuple):
        try:
            val = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError("expected a JSON list such as [1, 2]") from None
        if not isinstance(val, list):
            raise ValueError("expected a JSON list such as [1, 2]")
        return tuple(val) if (origin or tp) is tuple else val
    return _parse_value(text)  # another type (an array, a set object, ...): JSON or text, checked by the target


def problem_arguments(
    reg: Registry, name: str, items: Sequence[str] | None, option: str = "--problem-arg", *, directory: str | None = None
) -> dict[str, Any]:
    """``KEY=VALUE`` command-line items as typed keyword arguments of the problem ``name``.

    ``name`` is a registered problem or a ``module:attr`` / ``path/to/file.py:attr`` reference to a
    factory (whose arguments these are) or to a ready problem object (which takes none).

    Converted by the problem factory's annotations (:func:`typed_arguments`); an unknown problem, an
    unknown argument or a value of the wrong type is an :class:`~zoframe.errors.InvalidInputError`
    listing what the problem accepts. Used by ``zoframe solve``, ``zoframe verify`` and ``zoframe rate``.
    ``directory``: where a saved run found a module reference (:func:`zoframe.userproblem.portable_reference`).
    """
    from zoframe.userproblem import problem_source

    source = problem_source(name, reg, directory=directory)
    pairs = _pairs(items)
    if source.factory is None:
        if pairs:
            raise InvalidInputError(
                f"{option} is given for the problem {name!r}, which is a ready problem object and takes no "
                "arguments; point the reference at a factory (a function returning the problem) to pass arguments"
            )
        return {}
    return typed_arguments(source.factory, pairs, f"problem {name!r}", option)


def build_problem(reg: Registry, name: str, kwargs: Mapping[str, Any], *, directory: str | None = None) -> Any:
    """The problem named on the command line (a registered name or ``module:attr`` / ``file.py:attr``),
    built with ``kwargs``; a plain ``TypeError`` / ``ValueError`` from its factory becomes a one-line error.
    ``directory``: as in :func:`problem_arguments`."""
    from zoframe.userproblem import problem_source

    source = problem_source(name, reg, directory=directory)
    if source.factory is None:
        return source.build(**kwargs)
    return _build_problem(name, source.build, kwargs, source.factory)


def typed_arguments(
    target: Callable[..., Any], items: Sequence[tuple[str, str]], what: str, option: str
) -> dict[str, Any]:
    """Command-line ``(key, text)`` pairs as keyword arguments of ``target``, converted by its annotations.

    An unknown key (unless ``target`` takes ``**kwargs``), a key given twice or a text that is not a
    value of the annotated type (``int``, ``float``, ``bool``, ``str``, ``X | None``, ``Literal``,
    lists) raises :class:`~zoframe.errors.InvalidInputError` with one line listing the accepted
    arguments and their types. Parameters without a usable annotation get JSON or the text.
    """
    params, types_, var_kw = _parameters(target)
    out: dict[str, Any] = {}
    for key, text in items:
        if key in out:
            raise InvalidInputError(f"{option} {key} is given twice for {what}")
        if key not in params:
            if var_kw:
                out[key] = _parse_value(text)
                continue
            close = difflib.get_close_matches(key, list(params), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidInputError(
                f"{what} has no argument {key!r}{hint}; it accepts {_signature_listing(target)}"
            )
        try:
            out[key] = _convert(text, types_[key])
        except ValueError as exc:
            raise InvalidInputError(
                f"{option} {key}={text!r} for {what}: {exc} ({key}: {_type_name(types_[key])}); "
                f"it accepts {_signature_listing(target)}"
            ) from None
    return out


def _cmd_demo(args: argparse.Namespace, reg: Registry) -> int:
    ns = argparse.Namespace(
        problem="least-squares", problem_arg=["dim=20", "n=200"], solver="zo-sgd", estimator=None,
        estimator_param=None, seed=0, max_iter=2000, max_calls=None, max_time=None, no_progress=False,
        param=["eta=0.05", "q=20", "batch=20"], output=None, verify=False,
    )
    return _cmd_solve(ns, reg)


def _add_verbosity(p: argparse.ArgumentParser, default: Any = argparse.SUPPRESS) -> None:
    """``-v/--verbose`` and ``-q/--quiet`` (repeatable), where the command has not taken them itself."""
    taken = p._option_string_actions
    if "--verbose" not in taken and "-v" not in taken:
        p.add_argument("-v", "--verbose", dest="log_verbose", action="count", default=default,
                       help="show debug notices on stderr (notices go through logging.getLogger('zoframe'))")
    if "--quiet" not in taken and "-q" not in taken:
        p.add_argument("-q", "--quiet", dest="log_quiet", action="count", default=default,
                       help="show warnings only (-qq: errors only)")


def build_parser(reg: Registry) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zoframe", description="zeroth-order optimisation framework",
        epilog="Notices (runs done, files written, hints) are shown on stderr at level INFO; -v shows debug "
        "notices, -q warnings only. Progress bars appear only when stderr is a terminal; ZOFRAME_PROGRESS=0 "
        "hides them everywhere.",
    )
    _add_verbosity(parser, default=0)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list solvers, estimators, problems, benchmark suites and reproductions")
    p_info = sub.add_parser("info", help="parameters, problem kinds and citation of a component")
    p_info.add_argument("name", help="a solver, estimator or problem name, or module:attr / file.py:attr of your own")
    p_solve = sub.add_parser("solve", help="solve a registered problem (or module:attr) with a registered solver")
    p_solve.add_argument(
        "problem",
        help="a registered problem (zoframe list), or a problem of your own as module:attr or path/to/file.py:attr "
        "(a factory, given --problem-arg, or a problem object)",
    )
    p_solve.add_argument(
        "--solver", default=None,
        help="registered solver (zoframe list); default: the default solver of the problem's kind (zo-sgd for "
        "finite sums, adszog for constrained, zo-gdmsa for minimax, zo-svrg-admm for composite problems)",
    )
    p_solve.add_argument("--estimator", default=None, help="registered estimator replacing the solver's default")
    p_solve.add_argument(
        "--estimator-param", "-e", action="append", metavar="KEY=VALUE",
        help="parameter of the --estimator (e.g. -e q=3 -e mu=1e-4); checked against its fields",
    )
    p_solve.add_argument(
        "--problem-arg", action="append", metavar="KEY=VALUE",
        help="problem parameter, converted by the problem factory's annotations (see `zoframe info PROBLEM`)",
    )
    p_solve.add_argument("--param", "-p", action="append", metavar="KEY=VALUE", help="solver parameter")
    p_solve.add_argument(
        "--certify-tol", type=float, default=None, metavar="TOL",
        help="tolerance of the certificate behind success, in (0, 1) (default 1e-3; see docs/success.md)",
    )
    p_solve.add_argument(
        "--no-certificate", action="store_true",
        help="switch the certificate off (a converged run is then never a success)",
    )
    p_solve.add_argument("--seed", type=int, default=0)
    p_solve.add_argument("--max-iter", type=int, default=None)
    p_solve.add_argument("--max-calls", type=int, default=None)
    p_solve.add_argument("--max-time", type=float, default=None)
    p_solve.add_argument("--no-progress", action="store_true")
    p_solve.add_argument("--output", "-o", default=None, help="save the result as OUTPUT.json/.npz")
    p_solve.add_argument(
        "--verify", action="store_true",
        help="print the verification report (KKT / stationarity) of the returned point (zoframe_verify)",
    )
    sub.add_parser("demo", help="a small demo solve (least squares with ZO-SGD)")
    p_rep = sub.add_parser("reproduce", help="reproduce a paper experiment")
    rep_sub = p_rep.add_subparsers(dest="experiment", required=True)
    for name, prov in sorted(reg.reproductions().items()):
        rp = rep_sub.add_parser(name, help=prov.spec.summary, description=f"{prov.spec.summary} ({prov.spec.reference})")
        prov.spec.add_arguments(rp)
        rp.set_defaults(_run=prov.spec.run)
    for name, cprov in sorted(reg.commands().items()):
        cp = sub.add_parser(name, help=cprov.spec.help)
        cprov.spec.add_arguments(cp)
        cp.set_defaults(_run=cprov.spec.run)
    for child in _subparsers(parser):  # -v / -q after the command too (zoframe solve ... -v, reproduce dszog -q)
        _add_verbosity(child)
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every subcommand's parser, at every depth (``zoframe data fetch``, ``zoframe reproduce dszog``)."""
    out: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                out += [child, *_subparsers(child)]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # e.g. `zoframe list | head`: the reader left, nothing to report
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _main(argv: Sequence[str] | None = None) -> int:
    reg = default_registry()
    parser = build_parser(reg)
    args = parser.parse_args(argv)
    from zoframe._output import cli_logging

    with cli_logging(int(getattr(args, "log_verbose", 0) or 0) - int(getattr(args, "log_quiet", 0) or 0)):
        return _dispatch(parser, args, reg)


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace, reg: Registry) -> int:
    handlers = {"list": _cmd_list, "info": _cmd_info, "solve": _cmd_solve, "demo": _cmd_demo}
    try:
        if args.command in handlers:
            return handlers[args.command](args, reg)
        run = getattr(args, "_run", None)
        if run is None:
            parser.error(f"nothing to run for {args.command}")
        return int(run(args))
    except ZoframeError as exc:
        print(f"zoframe: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
