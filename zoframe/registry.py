"""The registry: a typed facade over pluggy, and the only module that touches ``pm.hook``.

Plugins are found through the ``zoframe.plugins`` entry-point group. Loading is isolated per
plugin: a plugin that raises on import, whose hook raises, or whose hook returns something that is
not a list of valid specs is reported with a :class:`PluginLoadWarning` naming its entry point and
distribution and saying what was wrong, and everything else loads; set ``ZOFRAME_STRICT_PLUGINS=1``
to make that an error instead. Each returned spec is checked when the registry collects it
(:func:`zoframe.specs.spec_problems`): its type, a name without spaces or ``:``, the problem kinds,
and the class (a solver class with ``init``/``step`` whose ``problem_kinds`` agrees with the spec's,
an estimator class with ``estimate``/``rows``) or callable it names. A spec that names its class by
a ``"module:attr"`` reference is checked when the class is first used: hook modules stay light and
``zoframe list`` imports no solver module (see :mod:`zoframe.specs`).

Environment switches:

``ZOFRAME_BLOCK_PLUGINS``
    comma-separated entry-point names (or distribution names) that are not loaded; a name that
    matches no installed plugin is reported with a warning listing the entry points that exist.
``ZOFRAME_DISABLE_PLUGIN_AUTOLOAD=1``
    load no entry points at all (register plugins explicitly with :meth:`Registry.register`).
``ZOFRAME_STRICT_PLUGINS=1``
    a plugin that fails to load or returns an invalid spec raises :class:`~zoframe.errors.PluginError`;
    ``"module:attr"`` references are then loaded and checked when the specs are collected (slower,
    for a plugin's CI) instead of on first use.

Two plugins that register the same component name do not disable anything: both stay reachable
under their qualified names ``plugin:name`` (``plugin`` is the entry-point name, e.g.
``basic:zo-sgd``), the tables (:meth:`Registry.solvers`, ...) list both under those keys, and only
the ambiguous bare name raises :class:`AmbiguousNameError` (a
:class:`~zoframe.errors.DuplicatePluginError`) naming both providers and the qualified names.
Unknown names raise :class:`~zoframe.errors.UnknownNameError` with "did you mean" suggestions and
the known names.

Default solvers. A solver spec may declare the problem kinds it is the default of
(``SolverSpec.default_for``); :meth:`Registry.default_solver` resolves a kind to one solver, used
when ``minimize``, ``zoframe.Run``, ``zoframe solve`` or the bench are given no solver. A
first-party claim wins over a third-party one: a plugin is first-party when its hook module is one
that an entry point of the ``zoframe`` distribution itself names (:func:`first_party_modules`, read
from the installed metadata). No claim, or two claims of the same standing, is an error naming the
solvers concerned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
import difflib
import functools
from importlib import metadata
import os
import threading
from typing import Any, Generic, TypeVar
import warnings
import weakref

import pluggy

from zoframe.errors import DuplicatePluginError, PluginError, UnknownNameError
from zoframe.hooks import ENTRY_POINT_GROUP, PROJECT_NAME, ZoframeHookSpecs
from zoframe.specs import (
    PROBLEM_KINDS,
    CommandSpec,
    EstimatorSpec,
    ProblemSpec,
    ReproductionSpec,
    SolverSpec,
    SuiteSpec,
    code_fields,
    spec_problems,
)

__all__ = [
    "AmbiguousNameError",
    "PluginLoadWarning",
    "Provided",
    "Registry",
    "default_registry",
    "first_party_modules",
]

S = TypeVar("S")

#: the distribution whose own plugins are first-party (their default solvers win over third-party ones)
FIRST_PARTY_DISTRIBUTION = "zoframe"
BLOCK_ENV = "ZOFRAME_BLOCK_PLUGINS"
AUTOLOAD_ENV = "ZOFRAME_DISABLE_PLUGIN_AUTOLOAD"
STRICT_ENV = "ZOFRAME_STRICT_PLUGINS"

#: hook name -> (spec type it must return, kind used in messages)
_HOOKS: dict[str, tuple[type[Any], str]] = {
    "zoframe_solvers": (SolverSpec, "solver"),
    "zoframe_estimators": (EstimatorSpec, "estimator"),
    "zoframe_problems": (ProblemSpec, "problem"),
    "zoframe_reproductions": (ReproductionSpec, "reproduction"),
    "zoframe_commands": (CommandSpec, "command"),
    "zoframe_suites": (SuiteSpec, "suite"),
}


class PluginLoadWarning(UserWarning):
    """A plugin (or one of its specs) could not be loaded; the others were."""


class AmbiguousNameError(DuplicatePluginError):
    """A bare component name that two plugins register; use one of the qualified names."""

    def __init__(self, kind: str, name: str, providers: Sequence[Provided[Any]]) -> None:
        self.kind = kind
        self.name = name
        self.qualified = [p.qualified_name for p in providers]
        listing = "; ".join(f"{p.qualified_name!r} from {p.provider}" for p in providers)
        super().__init__(
            f"the {kind} name {name!r} is ambiguous: {len(providers)} plugins register it ({listing}). "
            f"Use a qualified name ({' or '.join(repr(q) for q in self.qualified)}), or block one "
            f"plugin with {BLOCK_ENV}=<entry-point name>"
        )


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Provided(Generic[S]):
    """A spec together with the plugin that provided it.

    ``provider`` describes the plugin for people (``"basic (zoframe: zoframe_basic.plugin)"``);
    ``plugin`` is its entry-point (registration) name, the prefix of the qualified name.
    """

    spec: S
    provider: str
    plugin: str = ""
    #: the plugin's hook module is one the ``zoframe`` distribution names (:func:`first_party_modules`)
    first_party: bool = False

    @property
    def qualified_name(self) -> str:
        """``plugin:name``: reaches this component even when another plugin uses the same name."""
        return f"{self.plugin}:{getattr(self.spec, 'name', '?')}"


@dataclass
class _Table:
    """The specs of one hook: the public table plus the lookups behind it."""

    table: dict[str, Provided[Any]]  # bare names, and qualified names where a bare name is ambiguous
    qualified: dict[str, Provided[Any]]  # every component under plugin:name
    ambiguous: dict[str, list[Provided[Any]]]  # bare name -> its providers (two or more)


@functools.lru_cache(maxsize=1)
def first_party_modules() -> frozenset[str]:
    """The hook modules named by the ``zoframe.plugins`` entry points of the ``zoframe`` distribution itself.

    Read from the installed metadata (``pyproject.toml``'s entry points); empty when zoframe is not
    installed (run from a source tree on ``PYTHONPATH``), where no plugin counts as first-party.
    """
    try:
        dist = metadata.distribution(FIRST_PARTY_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return frozenset()
    return frozenset(ep.value.partition(":")[0].strip() for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP)


def _is_first_party(plugin: object) -> bool:
    name = getattr(plugin, "__name__", None)
    return isinstance(name, str) and name in first_party_modules()


def _describe(value: object) -> str:
    text = repr(value) if isinstance(value, (str, int, float, bool, type(None))) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


class Registry:
    """Loads plugins and answers questions about solvers, estimators and problems.

    ``Registry()`` loads the installed entry points (unless autoload is disabled);
    ``Registry(autoload=False)`` starts empty. Registries are independent: tests may build their own.
    """

    #: hooks whose ``"module:attr"`` references are loaded when their specs are collected: the CLI
    #: builds every command's and reproduction's sub-parser at start-up, so a broken reference there
    #: must be skipped with a warning (like a broken plugin) instead of breaking every command later
    eager_hooks: frozenset[str] = frozenset({"zoframe_commands", "zoframe_reproductions"})

    def __init__(self, *, autoload: bool | None = None, strict: bool | None = None) -> None:
        self._pm = pluggy.PluginManager(PROJECT_NAME)
        self._pm.add_hookspecs(ZoframeHookSpecs)
        self._strict = _truthy(os.environ.get(STRICT_ENV)) if strict is None else strict
        self._providers: dict[int, str] = {}
        self._cache: dict[str, _Table] = {}
        self._lock = threading.RLock()
        self.failed: dict[str, str] = {}
        self.blocked: set[str] = {
            b.strip() for b in os.environ.get(BLOCK_ENV, "").split(",") if b.strip()
        }
        _LIVE.add(self)
        if autoload is None:
            autoload = not _truthy(os.environ.get(AUTOLOAD_ENV))
        if autoload:
            self.load_entry_points()

    # ------------------------------------------------------------------ loading
    def _fail(self, key: str, msg: str, exc: BaseException | None = None) -> None:
        self.failed[key] = msg
        if self._strict:
            raise PluginError(msg + f" (strict mode: unset {STRICT_ENV} to skip broken plugins)") from exc
        warnings.warn(msg + "; the other plugins are loaded", PluginLoadWarning, stacklevel=4)

    def load_entry_points(self, entry_points: Iterable[metadata.EntryPoint] | None = None) -> None:
        """Load plugins from the ``zoframe.plugins`` group (or the given entry points)."""
        eps = list(metadata.entry_points(group=ENTRY_POINT_GROUP)) if entry_points is None else list(entry_points)
        names: set[str] = set()
        for ep in eps:
            names.add(ep.name)
            names.add(getattr(getattr(ep, "dist", None), "name", None) or "?")
        unmatched = sorted(b for b in self.blocked if b not in names)
        if unmatched:
            ep_names = sorted({ep.name for ep in eps})
            hints = [f"{u!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(u, ep_names, n=1))
                     else repr(u) for u in unmatched]
            warnings.warn(
                f"{BLOCK_ENV}: no installed zoframe plugin is called {', '.join(hints)}, so nothing is blocked for "
                f"{'it' if len(unmatched) == 1 else 'them'}; the entry-point names are: {', '.join(ep_names) or '(none)'}",
                PluginLoadWarning,
                stacklevel=3 if entry_points is None else 2,
            )
        for ep in sorted(eps, key=lambda e: e.name):
            dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
            if ep.name in self.blocked or dist in self.blocked:
                continue
            if self._pm.has_plugin(ep.name):
                continue
            provider = f"{ep.name} ({dist}: {ep.value})"
            try:
                plugin = ep.load()
            except Exception as exc:  # isolation: one broken plugin must not hide the others
                self._fail(ep.name, f"zoframe plugin {ep.name!r} failed to load: {type(exc).__name__}: {exc}", exc)
                continue
            try:
                self.register(plugin, name=ep.name, provider=provider)
            except (PluginError, ValueError) as exc:
                self._fail(ep.name, f"zoframe plugin {provider} cannot be registered: {exc}", exc)

    def register(self, plugin: object, *, name: str | None = None, provider: str | None = None) -> None:
        """Register a plugin object (a module or any object with hook implementations)."""
        pname = name or getattr(plugin, "__name__", None) or repr(plugin)
        if pname in self.blocked:
            return
        if ":" in pname:
            raise PluginError(f"plugin name {pname!r} must not contain ':' (it separates plugin:name)")
        try:
            self._pm.register(plugin, name=pname)
        except ValueError as exc:
            raise PluginError(f"plugin {pname!r} is already registered") from exc
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"plugin {pname!r} has an invalid hook implementation: {exc}") from exc
        self._providers[id(plugin)] = provider or pname
        with self._lock:
            self._cache.clear()

    def plugin_names(self) -> list[str]:
        return sorted(n for n, _ in self._pm.list_name_plugin())

    # ------------------------------------------------------------------ collecting specs
    def _specs_of(self, hook_name: str, impl: Any, provider: str) -> list[Any]:
        """Call one plugin's hook and keep the valid specs; report the others."""
        spec_type, kind = _HOOKS[hook_name]
        plugin = impl.plugin_name
        where = f"zoframe plugin {provider}: {hook_name}()"
        try:
            result = impl.function()
        except Exception as exc:
            self._fail(plugin, f"zoframe plugin {plugin!r} failed to load: {where} raised {type(exc).__name__}: {exc}", exc)
            return []
        if result is None:
            return []
        if isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable):
            self._fail(plugin, f"{where} returned {_describe(result)}, not a list of {spec_type.__name__}")
            return []
        out: list[Any] = []
        seen: set[str] = set()
        bad: list[str] = []
        try:
            items = list(result)
        except Exception as exc:  # a generator that raises half-way
            self._fail(plugin, f"{where} raised {type(exc).__name__} while its result was read: {exc}", exc)
            return []
        for i, spec in enumerate(items):
            if not isinstance(spec, spec_type):
                bad.append(f"item {i} is {_describe(spec)}, not a {spec_type.__name__}")
                continue
            try:
                problems = spec_problems(spec)
            except Exception as exc:  # a spec built around __init__ with fields nobody can inspect
                problems = [f"cannot be checked: {type(exc).__name__}: {exc}"]
            label = getattr(spec, "name", "?")
            if not problems and label in seen:
                problems = [f"the plugin registers the {kind} name {label!r} twice"]
            if not problems and (self._strict or hook_name in self.eager_hooks):  # check references now
                spec.__dict__["_provider"] = provider
                for fname in code_fields(spec):
                    try:
                        getattr(spec, fname)
                    except PluginError as exc:
                        problems.append(str(exc))
            if problems:
                bad.append(f"{kind} {label!r} is invalid and skipped: {'; '.join(problems)}")
                continue
            seen.add(label)
            spec.__dict__["_provider"] = provider  # named by lazy-loading errors
            out.append(spec)
        if bad:
            skipped = f"{len(bad)} of {len(items)} items skipped" if len(bad) > 1 else "skipped"
            self._fail(f"{plugin}:{hook_name}", f"{where} {'; '.join(bad)} ({skipped})")
        return out

    def _table(self, hook_name: str) -> _Table:
        with self._lock:
            if hook_name in self._cache:
                return self._cache[hook_name]
            by_name: dict[str, list[Provided[Any]]] = {}
            hook_caller = getattr(self._pm.hook, hook_name)
            impls = sorted(hook_caller.get_hookimpls(), key=lambda im: im.plugin_name)
            for impl in impls:
                provider = self._providers.get(id(impl.plugin), impl.plugin_name)
                for spec in self._specs_of(hook_name, impl, provider):
                    by_name.setdefault(spec.name, []).append(
                        Provided(spec, provider, impl.plugin_name, _is_first_party(impl.plugin))
                    )
            table: dict[str, Provided[Any]] = {}
            qualified: dict[str, Provided[Any]] = {}
            ambiguous: dict[str, list[Provided[Any]]] = {}
            for name, provs in by_name.items():
                for p in provs:
                    qualified[p.qualified_name] = p
                if len(provs) == 1:
                    table[name] = provs[0]
                else:
                    ambiguous[name] = provs
                    for p in provs:
                        table[p.qualified_name] = p
            out = _Table(table, qualified, ambiguous)
            self._cache[hook_name] = out
            return out

    def _collect(self, hook_name: str) -> dict[str, Provided[Any]]:
        return self._table(hook_name).table

    def solvers(self) -> dict[str, Provided[SolverSpec]]:
        """Every solver by name (``plugin:name`` for the names two plugins share)."""
        return self._collect("zoframe_solvers")

    def default_solver(self, kind: str) -> str:
        """The name of the default solver of problems of ``kind`` (for :meth:`solver` and ``minimize``).

        The solvers whose spec lists ``kind`` in ``default_for`` claim it; a first-party claim wins
        over third-party ones (see the module docstring). Returns the bare name, or ``plugin:name``
        where two plugins register that name. Raises :class:`~zoframe.errors.PluginError` when no
        solver claims the kind and :class:`~zoframe.errors.DuplicatePluginError` when two claims of
        the same standing remain; both say which solvers there are to choose from.
        """
        if kind not in PROBLEM_KINDS:
            raise UnknownNameError("problem kind", str(kind), list(PROBLEM_KINDS))
        tab = self._table("zoframe_solvers")
        claims = [tab.qualified[q] for q in sorted(tab.qualified) if kind in tab.qualified[q].spec.default_for]
        if not claims:
            able = sorted(n for n, p in tab.table.items() if kind in p.spec.problem_kinds)
            raise PluginError(
                f"no registered solver is the default of {kind!r} problems (none declares it in "
                f"SolverSpec.default_for): pass solver=NAME, one of {', '.join(able) or '(none registered)'}"
            )
        first = [p for p in claims if p.first_party]
        pick = first or claims
        if len(pick) > 1:
            listing = "; ".join(f"{p.qualified_name!r} from {p.provider}" for p in pick)
            standing = "first-party" if first else "third-party"
            raise DuplicatePluginError(
                f"{len(pick)} {standing} solvers declare themselves the default of {kind!r} problems ({listing}): "
                f"pass solver= with one of them, or block one plugin with {BLOCK_ENV}=<entry-point name>"
            )
        chosen = pick[0]
        name = str(chosen.spec.name)
        return name if tab.table.get(name) is chosen else chosen.qualified_name

    def defaults_of(self, spec: SolverSpec) -> frozenset[str]:
        """The problem kinds whose default solver (:meth:`default_solver`) is ``spec``'s solver."""
        out = set()
        for kind in spec.default_for:
            try:
                name = self.default_solver(kind)
            except PluginError:
                continue
            found = self._lookup("zoframe_solvers", name)
            if found is not None and found.spec is spec:
                out.add(kind)
        return frozenset(out)

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

    def ambiguous(self, hook_name: str = "zoframe_solvers") -> dict[str, list[Provided[Any]]]:
        """Bare names that two or more plugins register for one hook, with their providers."""
        return dict(self._table(hook_name).ambiguous)

    def _lookup(self, hook_name: str, name: str) -> Provided[Any] | None:
        """The provider of ``name`` (bare or ``plugin:name``); raises if the bare name is ambiguous."""
        if not isinstance(name, str):
            raise TypeError(f"{_HOOKS[hook_name][1]} name must be a string, got {type(name).__name__}")
        tab = self._table(hook_name)
        if name in tab.ambiguous:
            raise AmbiguousNameError(_HOOKS[hook_name][1], name, tab.ambiguous[name])
        return tab.table.get(name) or tab.qualified.get(name)

    def _get(self, hook_name: str, name: str) -> Any:
        found = self._lookup(hook_name, name)
        if found is None:
            raise UnknownNameError(_HOOKS[hook_name][1], name, list(self._table(hook_name).table))
        return found.spec

    def provided(self, kind: str, name: str) -> Provided[Any]:
        """The :class:`Provided` record of a solver/estimator/problem/... (bare or qualified name)."""
        hook = f"zoframe_{kind}s"
        if hook not in _HOOKS:
            raise ValueError(f"unknown component kind {kind!r}; kinds are {[k for _, k in _HOOKS.values()]}")
        found = self._lookup(hook, name)
        if found is None:
            raise UnknownNameError(kind, name, list(self._table(hook).table))
        return found

    def solver(self, name: str) -> SolverSpec:
        return self._get("zoframe_solvers", name)  # type: ignore[no-any-return]

    def estimator(self, name: str) -> EstimatorSpec:
        return self._get("zoframe_estimators", name)  # type: ignore[no-any-return]

    def problem(self, name: str) -> ProblemSpec:
        return self._get("zoframe_problems", name)  # type: ignore[no-any-return]

    def reproduction(self, name: str) -> ReproductionSpec:
        return self._get("zoframe_reproductions", name)  # type: ignore[no-any-return]

    def suite(self, name: str) -> SuiteSpec:
        return self._get("zoframe_suites", name)  # type: ignore[no-any-return]

    def command(self, name: str) -> CommandSpec:
        return self._get("zoframe_commands", name)  # type: ignore[no-any-return]

    def find(self, name: str) -> tuple[str, Any, str]:
        """Look a name up among solvers, estimators and problems: ``(kind, spec, provider)``."""
        for hook in ("zoframe_solvers", "zoframe_estimators", "zoframe_problems"):
            found = self._lookup(hook, name)
            if found is not None:
                return _HOOKS[hook][1], found.spec, found.provider
        every = [*self.solvers(), *self.estimators(), *self.problems()]
        raise UnknownNameError("component", name, every)

    def check_references(self) -> dict[str, str]:
        """Load every ``"module:attr"`` reference of every registered spec now; ``{what: problem}``.

        Listing never imports a plugin's modules, so a wrong reference would otherwise surface only
        when its component is used. A plugin's CI (or zoframe's own tests) calls this to find them
        all at once; an empty dict means every reference loads and names a valid class or callable.
        """
        problems: dict[str, str] = {}
        for hook, (_, kind) in _HOOKS.items():
            for provided in self._table(hook).qualified.values():
                for fname in code_fields(provided.spec):
                    try:
                        getattr(provided.spec, fname)
                    except PluginError as exc:
                        problems[f"{kind} {provided.qualified_name}: {fname}"] = str(exc)
        return problems

    def make_problem(self, name: str, /, **kwargs: Any) -> Any:
        """Build a registered problem by name."""
        return self.problem(name).factory(**kwargs)


_default: Registry | None = None
_lock = threading.Lock()
_LIVE: weakref.WeakSet[Registry] = weakref.WeakSet()


def collected_registries() -> list[Registry]:
    """The live registries that have listed their solvers (the modules a checkpoint may name)."""
    return [reg for reg in list(_LIVE) if "zoframe_solvers" in reg._cache]


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
