"""The hook specifications of zoframe's plugin system (pluggy project name ``zoframe``).

A plugin is any importable module (or object) with functions named like the hooks below,
decorated with :data:`hookimpl`, and announced through the ``zoframe.plugins`` entry-point group::

    # pyproject.toml of a third-party package
    [project.entry-points."zoframe.plugins"]
    mytools = "mytools.zoframe_plugin"

    # mytools/zoframe_plugin.py (light: it imports no numerical module)
    from zoframe import hookimpl
    from zoframe.specs import SolverSpec

    @hookimpl
    def zoframe_solvers():
        return [SolverSpec(name="my-solver", cls="mytools.solvers:MySolver", summary="...",
                           reference="Doe et al. 2024", problem_kinds=frozenset({"finite_sum"}))]

Every hook takes no argument and returns a sequence of frozen records from :mod:`zoframe.specs`.
A plugin implements only the hooks it needs. Classes and callables may be given as objects or as
``"module:attr"`` strings, imported when the component is first used (so ``zoframe list`` never
imports a plugin's numerical modules). The registry checks every returned record
(:mod:`zoframe.registry`); a bad one is skipped with a warning naming the plugin.
"""

from __future__ import annotations

from collections.abc import Sequence

import pluggy

from zoframe.specs import CommandSpec, EstimatorSpec, ProblemSpec, ReproductionSpec, SolverSpec, SuiteSpec

PROJECT_NAME = "zoframe"
ENTRY_POINT_GROUP = "zoframe.plugins"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


class ZoframeHookSpecs:
    """Hook specifications; see the module docstring for a complete example plugin."""

    @hookspec
    def zoframe_solvers(self) -> Sequence[SolverSpec]:  # type: ignore[empty-body]
        """Return the solvers this plugin provides."""

    @hookspec
    def zoframe_estimators(self) -> Sequence[EstimatorSpec]:  # type: ignore[empty-body]
        """Return the gradient estimators this plugin provides."""

    @hookspec
    def zoframe_problems(self) -> Sequence[ProblemSpec]:  # type: ignore[empty-body]
        """Return the problem factories this plugin provides."""

    @hookspec
    def zoframe_reproductions(self) -> Sequence[ReproductionSpec]:  # type: ignore[empty-body]
        """Return the experiments ``zoframe reproduce`` can run."""

    @hookspec
    def zoframe_commands(self) -> Sequence[CommandSpec]:  # type: ignore[empty-body]
        """Return extra top-level CLI commands."""

    @hookspec
    def zoframe_suites(self) -> Sequence[SuiteSpec]:  # type: ignore[empty-body]
        """Return the benchmark suites (named collections of problem instances) this plugin provides."""
