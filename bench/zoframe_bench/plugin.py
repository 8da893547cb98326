"""Hook implementations of the ``bench`` plugin: the first-party problem suites."""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import SuiteSpec


@hookimpl
def zoframe_suites() -> Sequence[SuiteSpec]:
    from zoframe_bench.suites import suite_specs

    return suite_specs()
