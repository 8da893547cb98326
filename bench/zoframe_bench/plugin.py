"""Hook implementations of the ``bench`` plugin: the first-party problem suites and ``zoframe bench``."""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import CommandSpec, SuiteSpec


@hookimpl
def zoframe_suites() -> Sequence[SuiteSpec]:
    from zoframe_bench.suites import suite_specs

    return suite_specs()


@hookimpl
def zoframe_commands() -> Sequence[CommandSpec]:
    from zoframe_bench.cli import add_bench_arguments, run_bench_command

    return [
        CommandSpec(
            name="bench",
            help="benchmark solvers on a suite: SQLite store (resumable), data / performance profiles, summary",
            add_arguments=add_bench_arguments,
            run=run_bench_command,
        )
    ]
