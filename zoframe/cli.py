"""The ``zoframe`` command line: list, info, solve, reproduce, data, and plugin commands."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
import json
import os
import sys
import textwrap
from typing import Any

import numpy as np

from zoframe.errors import ZoframeError
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
            elif hasattr(spec, "kind"):
                extra = f" [{spec.kind}]"
            print(f"  {name:<16} {spec.summary}{extra}")
            print(f"  {'':<16}   {spec.reference}")
    if reg.failed:
        print("\nPlugins that failed to load:")
        for msg in reg.failed.values():
            print(f"  {msg}")
    return 0


def _cmd_info(args: argparse.Namespace, reg: Registry) -> int:
    kind, spec, provider = reg.find(args.name)
    print(f"{spec.name} ({kind}, from plugin {provider})")
    print(f"  {spec.summary}")
    if kind == "solver":
        print(f"  problem kinds: {', '.join(sorted(spec.problem_kinds))}")
        print(f"  zeroth order: {'yes' if spec.zeroth_order else 'no (first-order reference)'}")
    if kind == "problem":
        print(f"  problem kind: {spec.kind}")
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

    pkw = dict(_kv(args.problem_arg))
    problem = reg.make_problem(args.problem, **pkw)
    params = dict(_kv(args.param))
    res = minimize(
        problem,
        args.solver,
        estimator=args.estimator,
        rng=args.seed,
        max_iter=args.max_iter,
        max_calls=args.max_calls,
        max_time=args.max_time,
        progress=not args.no_progress,
        **params,
    )
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
        res.save(args.output, metadata={"problem": args.problem, "problem_args": pkw})
        print(f"wrote {args.output}.json and {args.output}.npz")
    if args.verify:
        cmd = reg.commands().get("verify")
        if cmd is None:
            print("no verification plugin is installed; --verify needs zoframe_verify", file=sys.stderr)
            return 2
        ns = argparse.Namespace(problem_obj=problem, result_obj=res, result=None, json=False)
        return cmd.spec.run(ns)
    # exit 0 for a certified run and for a budget stop at an acceptable point; 1 otherwise
    return 0 if res.success or (res.status.budget and res.feasible is not False) else 1


def _kv(items: Sequence[str] | None) -> list[tuple[str, Any]]:
    out = []
    for item in items or ():
        key, sep, val = item.partition("=")
        if not sep:
            raise ZoframeError(f"expected KEY=VALUE, got {item!r}")
        out.append((key.replace("-", "_"), _parse_value(val)))
    return out


def _cmd_demo(args: argparse.Namespace, reg: Registry) -> int:
    ns = argparse.Namespace(
        problem="least-squares", problem_arg=["dim=20", "n=200"], solver="zo-sgd", estimator=None,
        seed=0, max_iter=2000, max_calls=None, max_time=None, no_progress=False,
        param=["eta=0.05", "q=20", "batch=20"], output=None, verify=False,
    )
    return _cmd_solve(ns, reg)


def build_parser(reg: Registry) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zoframe", description="zeroth-order optimisation framework")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list solvers, estimators and problems")
    p_info = sub.add_parser("info", help="parameters, problem kinds and citation of a component")
    p_info.add_argument("name")
    p_solve = sub.add_parser("solve", help="solve a registered problem with a registered solver")
    p_solve.add_argument("problem")
    p_solve.add_argument("--solver", default="zo-sgd")
    p_solve.add_argument("--estimator", default=None)
    p_solve.add_argument("--problem-arg", action="append", metavar="KEY=VALUE", help="problem parameter")
    p_solve.add_argument("--param", "-p", action="append", metavar="KEY=VALUE", help="solver parameter")
    p_solve.add_argument("--seed", type=int, default=0)
    p_solve.add_argument("--max-iter", type=int, default=None)
    p_solve.add_argument("--max-calls", type=int, default=None)
    p_solve.add_argument("--max-time", type=float, default=None)
    p_solve.add_argument("--no-progress", action="store_true")
    p_solve.add_argument("--output", "-o", default=None, help="save the result as OUTPUT.json/.npz")
    p_solve.add_argument("--verify", action="store_true", help="print the verification report")
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
    return parser


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
