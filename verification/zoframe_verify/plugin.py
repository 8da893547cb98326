"""Hook implementations of zoframe_verify: test problems with known answers and two commands.

Classes and commands are named by ``"module:attr"`` references, imported when first used.
"""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import CommandSpec, ProblemSpec

_P = "zoframe_verify.problems:"
_CLI = "zoframe_verify.cli:"


@hookimpl
def zoframe_problems() -> Sequence[ProblemSpec]:
    return [
        ProblemSpec(
            name="kkt-qp",
            factory=_P + "KKTQP",
            summary="convex QP with linear inequality constraints, cvxpy reference (closed form with box constraints)",
            reference="(verification problem)",
            kind="constrained",
            parameters={"dim": "dimension (10)", "m": "constraints (50)", "n": "components (20)", "seed": "0",
                        "constraints_kind": "'random' or 'box' (closed-form answer)"},
        ),
        ProblemSpec(
            name="saddle-quadratic",
            factory=_P + "SaddleQuadratic",
            summary="nonconvex-strongly-concave quadratic minimax with grad g and solution in closed form",
            reference="(verification problem)",
            kind="minimax",
            parameters={"dim": "d_x (5)", "dim_y": "d_y (5)", "n": "samples (10)", "rho": "strong concavity (1)",
                        "seed": "0"},
        ),
        ProblemSpec(
            name="power-sum",
            factory=_P + "PowerSum",
            summary="(1/p) sum |x_i - c_i|^p, p > 2: gradient methods converge at the known exponent -2(p-1)/(p-2)",
            reference="(verification problem)",
            kind="finite_sum",
            parameters={"dim": "dimension (5)", "p": "power > 2 (4)"},
        ),
        ProblemSpec(
            name="lasso-composite",
            factory=_P + "LassoComposite",
            summary="lasso as x - y = 0 with tau ||y||_1, white-box gradients and a cvxpy reference",
            reference="(verification problem)",
            kind="composite",
            parameters={"dim": "dimension (20)", "n": "samples (100)", "tau": "l1 weight (0.1)", "seed": "0"},
        ),
    ]


@hookimpl
def zoframe_commands() -> Sequence[CommandSpec]:
    return [
        CommandSpec(
            name="rate",
            help="convergence-rate study: seeds x budget sweep, log-log slope fit, comparison with the proven rate",
            add_arguments=_CLI + "add_rate_arguments",
            run=_CLI + "run_rate_command",
        ),
        CommandSpec(
            name="verify",
            help="verification report (KKT / stationarity / reference gap) of a saved run",
            add_arguments=_CLI + "add_verify_arguments",
            run=_CLI + "run_verify_command",
        ),
    ]
