"""Hook implementations of zoframe_datasets: the ``zoframe data`` command."""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import CommandSpec
from zoframe_datasets import cli


@hookimpl
def zoframe_commands() -> Sequence[CommandSpec]:
    return [
        CommandSpec(
            name="data",
            help="list, locate and download the LIBSVM datasets (list, info, path, fetch)",
            add_arguments=cli.add_arguments,
            run=cli.run,
        )
    ]
