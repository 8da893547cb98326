"""Hook implementations of zoframe_datasets: the ``zoframe data`` command (imported when it is used)."""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import CommandSpec


@hookimpl
def zoframe_commands() -> Sequence[CommandSpec]:
    return [
        CommandSpec(
            name="data",
            help="list, locate and download the LIBSVM datasets (list, info, path, fetch)",
            add_arguments="zoframe_datasets.cli:add_arguments",
            run="zoframe_datasets.cli:run",
        )
    ]
