"""Lazy public names for plugin packages: a name is imported from its submodule on first access.

A plugin's hook module imports its package, so a package ``__init__`` that imported its
submodules would make ``zoframe list`` pay for every solver and problem module (and what they
import: scipy.optimize, scipy.sparse, cvxpy). With::

    __getattr__, __dir__ = lazy_exports(__name__, {"DSZOG": "solvers", ...})

the package imports nothing until a public name is used, then keeps it as a package attribute.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
import importlib
import sys
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, sources: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``; ``sources`` maps a name to its submodule."""

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{source}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(sources))

    return __getattr__, __dir__
