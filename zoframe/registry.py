"""The registry: a typed facade over pluggy, and the only module that touches ``pm.hook``.

Plugins are found through the ``zoframe.plugins`` entry-point group. Loading is isolated per
plugin: a plugin that raises on import (or whose hook raises) is reported with a warning naming it,
and the others load; set ``ZOFRAME_STRICT_PLUGINS=1`` to make that an error instead.

Environment switches:

``ZOFRAME_BLOCK_PLUGINS``
    comma-separated entry-point names (or distribution names) that are not loaded.
``ZOFRAME_DISABLE_PLUGIN_AUTOLOAD=1``
    load no entry points at all (register plugins explicitly with :meth:`Registry.register`).
``ZOFRAME_STRICT_PLUGINS=1``
    a plugin that fails to load raises :class:`~zoframe.errors.PluginError`.

Two plugins that register the same component name raise
:class:`~zoframe.errors.DuplicatePluginError` naming both providers. Unknown names raise
:class:`~zoframe.errors.UnknownNameError` with "did you mean" suggestions and the known names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
import os
import threading
from typing import Any, Generic, TypeVar
import warnings

import pluggy

from zoframe.errors import DuplicatePluginError, PluginError, UnknownNameError
from zoframe.hooks import ENTRY_POINT_GROUP, PROJECT_NAME, ZoframeHookSpecs
from zoframe.specs import CommandSpec, EstimatorSpec, ProblemSpec, ReproductionSpec, SolverSpec, SuiteSpec

__all__ = ["PluginLoadWarning", "Provided", "Registry", "default_registry"]

S = TypeVar("S")

BLOCK_ENV = "ZOFRAME_BLOCK_PLUGINS"
AUTOLOAD_ENV = "ZOFRAME_DISABLE_PLUGIN_AUTOLOAD"
STRICT_ENV = "ZOFRAME_STRICT_PLUGINS"


class PluginLoadWarning(UserWarning):
    """A plugin could not be loaded; the others were."""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Provided(Generic[S]):
    """A spec together with the plugin (entry-point name and distribution) that provided it."""

    spec: S
    provider: str


class Registry:
    """Loads plugins and answers questions about solvers, estimators and problems.

    ``Registry()`` loads the installed entry points (unless autoload is disabled);
    ``Registry(autoload=False)`` starts empty. Registries are independent: tests may build their own.
    """

    def __init__(self, *, autoload: bool | None = None, strict: bool | None = None) -> None:
        self._pm = pluggy.PluginManager(PROJECT_NAME)
        self._pm.add_hookspecs(ZoframeHookSpecs)
        self._strict = _truthy(os.environ.get(STRICT_ENV)) if strict is None else strict
        self._providers: dict[int, str] = {}
        self._cache: dict[str, dict[str, Provided[Any]]] = {}
        self.failed: dict[str, str] = {}
        self.blocked: set[str] = {
            b.strip() for b in os.environ.get(BLOCK_ENV, "").split(",") if b.strip()
        }
        if autoload is None:
            autoload = not _truthy(os.environ.get(AUTOLOAD_ENV))
        if autoload:
            self.load_entry_points()

    # ------------------------------------------------------------------ loading
    def _fail(self, name: str, exc: BaseException) -> None:
        msg = f"zoframe plugin {name!r} failed to load: {type(exc).__name__}: {exc}"
        self.failed[name] = msg
        if self._strict:
            raise PluginError(msg + f" (strict mode: unset {STRICT_ENV} to skip broken plugins)") from exc
        warnings.warn(msg + "; the other plugins are loaded", PluginLoadWarning, stacklevel=3)

    def load_entry_points(self, entry_points: Iterable[metadata.EntryPoint] | None = None) -> None:
        """Load plugins from the ``zoframe.plugins`` group (or the given entry points)."""
        eps = list(metadata.entry_points(group=ENTRY_POINT_GROUP)) if entry_points is None else list(entry_points)
        for ep in sorted(eps, key=lambda e: e.name):
            dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
            if ep.name in self.blocked or dist in self.blocked:
                continue
            if self._pm.has_plugin(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # isolation: one broken plugin must not hide the others
                self._fail(ep.name, exc)
                continue
            self.register(plugin, name=ep.name, provider=f"{ep.name} ({dist}: {ep.value})")

    def register(self, plugin: object, *, name: str | None = None, provider: str | None = None) -> None:
        """Register a plugin object (a module or any object with hook implementations)."""
        pname = name or getattr(plugin, "__name__", None) or repr(plugin)
        if pname in self.blocked:
            return
        try:
            self._pm.register(plugin, name=pname)
        except ValueError as exc:
            raise PluginError(f"plugin {pname!r} is already registered") from exc
        self._providers[id(plugin)] = provider or pname
        self._cache.clear()

    def plugin_names(self) -> list[str]:
        return sorted(n for n, _ in self._pm.list_name_plugin())

    # ------------------------------------------------------------------ collecting specs
    def _collect(self, hook_name: str) -> dict[str, Provided[Any]]:
        if hook_name in self._cache:
            return self._cache[hook_name]
        found: dict[str, Provided[Any]] = {}
        hook_caller = getattr(self._pm.hook, hook_name)
        for impl in hook_caller.get_hookimpls():
            provider = self._providers.get(id(impl.plugin), impl.plugin_name)
            try:
                specs = impl.function()
            except Exception as exc:
                self._fail(impl.plugin_name, exc)
                continue
            for spec in specs or ():
                if spec.name in found:
                    raise DuplicatePluginError(
                        f"two plugins register the name {spec.name!r} ({hook_name}): "
                        f"{found[spec.name].provider} and {provider}; uninstall one or block it "
                        f"with {BLOCK_ENV}=<entry-point name>"
                    )
                found[spec.name] = Provided(spec, provider)
        self._cache[hook_name] = found
        return found

    def solvers(self) -> dict[str, Provided[SolverSpec]]:
        return self._collect("zoframe_solvers")

    def estimators(self) -> dict[str, Provided[EstimatorSpec]]:
        return self._collect("zoframe_estimators")

    def problems(self) -> dict[str, Provided[ProblemSpec]]:
        return self._collect("zoframe_problems")

    def reproductions(self) -> dict[str, Provided[ReproductionSpec]]:
        return self._collect("zoframe_reproductions")

    def commands(self) -> dict[str, Provided[CommandSpec]]:
        return self._collect("zoframe_commands")

    def suites(self) -> dict[str, Provided[SuiteSpec]]:
        return self._collect("zoframe_suites")

    @staticmethod
    def _get(table: dict[str, Provided[S]], kind: str, name: str) -> S:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name must be a string, got {type(name).__name__}")
        try:
            return table[name].spec
        except KeyError:
            raise UnknownNameError(kind, name, list(table)) from None

    def solver(self, name: str) -> SolverSpec:
        return self._get(self.solvers(), "solver", name)

    def estimator(self, name: str) -> EstimatorSpec:
        return self._get(self.estimators(), "estimator", name)

    def problem(self, name: str) -> ProblemSpec:
        return self._get(self.problems(), "problem", name)

    def reproduction(self, name: str) -> ReproductionSpec:
        return self._get(self.reproductions(), "reproduction", name)

    def suite(self, name: str) -> SuiteSpec:
        return self._get(self.suites(), "suite", name)

    def find(self, name: str) -> tuple[str, Any, str]:
        """Look a name up among solvers, estimators and problems: ``(kind, spec, provider)``."""
        for kind, table in (("solver", self.solvers()), ("estimator", self.estimators()), ("problem", self.problems())):
            if name in table:
                return kind, table[name].spec, table[name].provider
        every = [*self.solvers(), *self.estimators(), *self.problems()]
        raise UnknownNameError("component", name, every)

    def make_problem(self, name: str, **kwargs: Any) -> Any:
        """Build a registered problem by name."""
        return self.problem(name).factory(**kwargs)


_default: Registry | None = None
_lock = threading.Lock()


def default_registry(*, reload: bool = False) -> Registry:
    """The process-wide registry used when no ``registry=`` is passed (created on first use)."""
    global _default
    with _lock:
        if _default is None or reload:
            _default = Registry()
        return _default


def names(table: dict[str, Provided[Any]]) -> Sequence[str]:
    return sorted(table)


HookFunction = Callable[[], Sequence[Any]]
