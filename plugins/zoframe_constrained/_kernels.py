"""The switch for the optional compiled kernel of :mod:`zoframe_constrained.simplex`.

``zoframe[fast]`` installs numba; the compiled versions of the hot loops of the DSZOG / ADSZOG step
(:mod:`zoframe_constrained._kernels_numba`) are then used automatically. The environment variable
``ZOFRAME_KERNEL`` chooses, read once when :mod:`zoframe_constrained.simplex` is imported:

``auto`` (default)
    the compiled kernel when numba is importable, the numpy code otherwise;
``numpy``
    always the numpy code (the reference);
``numba``
    the compiled kernel, and an error when numba is not installed.

numba itself is imported on the first call of a compiled function, not at import: a run that never
reaches those functions pays nothing. The compiled code is cached on disk (``cache=True``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType
from typing import Any

__all__ = ["ENV", "KernelError", "kernel", "mode"]

#: the environment variable that picks the implementation
ENV = "ZOFRAME_KERNEL"
_MODES = ("auto", "numpy", "numba")


class KernelError(ImportError):
    """``ZOFRAME_KERNEL`` asks for something this installation cannot give."""


def mode() -> str:
    """The implementation ``ZOFRAME_KERNEL`` selects now: ``"numba"`` or ``"numpy"`` (raises :class:`KernelError`)."""
    raw = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if raw not in _MODES:
        raise KernelError(
            f"{ENV}={os.environ.get(ENV)!r} is not one of {', '.join(_MODES)}: set it to 'numpy' for the numpy "
            "code, 'numba' to require the compiled kernel, or unset it (auto: the kernel when numba is installed)"
        )
    if raw == "numpy":
        return "numpy"
    if importlib.util.find_spec("numba") is None:
        if raw == "numba":
            raise KernelError(
                f"{ENV}=numba requires numba, which is not installed: install the extra with "
                "`pip install 'zoframe[fast]'` (or `pip install numba`), or unset the variable to use the numpy code"
            )
        return "numpy"
    return "numba"


class _Lazy:
    """The compiled module, imported (with numba) on the first attribute lookup."""

    def __getattr__(self, name: str) -> Any:
        mod: ModuleType = importlib.import_module("zoframe_constrained._kernels_numba")
        for attr in mod.__all__:
            setattr(self, attr, getattr(mod, attr))  # later lookups are plain instance attributes
        return getattr(mod, name)


def kernel() -> Any:
    """An object with the compiled functions (imported on first use), or ``None`` for the numpy code."""
    return _Lazy() if mode() == "numba" else None
