"""The switch for the optional compiled kernel of :mod:`zoframe_constrained.simplex`.

``zoframe[fast]`` installs numba; the compiled code of the DSZOG / ADSZOG step (the work on p in the
floor + support form and the arithmetic of G_L, :mod:`zoframe_constrained._kernels_numba`) is then used
automatically, with the same results bit for bit. The environment variable ``ZOFRAME_KERNEL`` chooses,
read once when :mod:`zoframe_constrained.simplex` is imported:

``auto`` (default)
    the compiled kernel when numba is installed, the numpy code otherwise; the kernel is loaded only
    once a process has made :data:`zoframe_constrained.simplex.AUTO_AFTER_CALLS` calls that could use
    it (loading numba and the cached code costs about 0.4 s of CPU, which a run of a few thousand steps
    does not pay back; the two paths give the same results bit for bit, so the switch changes no result);
``numpy``
    always the numpy code (the reference);
``numba``
    the compiled kernel, and an error when numba is not installed.

numba itself is imported on the first call of a compiled function, not at import: a run that never
reaches those functions pays nothing. Should that import fail (numba installed but unusable, e.g. built
for another numpy), ``auto`` warns once and continues with the numpy code (the results are the same),
``numba`` raises :class:`KernelError`. The compiled code is cached on disk (``cache=True``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType
from typing import Any

from zoframe.errors import ZoframeError

__all__ = ["ENV", "KernelError", "KernelUnavailable", "kernel", "mode"]

#: the environment variable that picks the implementation
ENV = "ZOFRAME_KERNEL"
_MODES = ("auto", "numpy", "numba")


class KernelError(ZoframeError, ImportError):
    """``ZOFRAME_KERNEL`` asks for something this installation cannot give."""


class KernelUnavailable(ImportError):
    """numba could not be imported although it is installed (``ZOFRAME_KERNEL`` auto): use the numpy code."""


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
    if not _installed():
        if raw == "numba":
            raise KernelError(
                f"{ENV}=numba requires numba, which is not installed: install the extra with "
                "`pip install 'zoframe[fast]'` (or `pip install numba`), or unset the variable to use the numpy code"
            )
        return "numpy"
    return "numba"


def _installed() -> bool:
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):  # a finder that refuses it, a module without a spec
        return False


class _Lazy:
    """The compiled module, imported (with numba) on the first attribute lookup.

    ``required``: a failing import raises :class:`KernelError`; else :class:`KernelUnavailable`, on which the
    caller falls back to the numpy code.
    """

    def __init__(self, required: bool = False) -> None:
        self._required = required
        #: made by ``ZOFRAME_KERNEL=auto`` (not asked for explicitly): its user may wait before loading it
        self.auto = not required

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            mod: ModuleType = importlib.import_module("zoframe_constrained._kernels_numba")
        except Exception as exc:  # numba's import fails in many ways (ImportError, numpy version checks)
            what = f"numba is installed but could not be imported ({type(exc).__name__}: {exc})"
            if self._required:
                raise KernelError(f"{ENV}=numba: {what}; repair the installation or unset {ENV}") from exc
            raise KernelUnavailable(f"{what}: the numpy code is used (set {ENV}=numpy to silence this)") from exc
        for attr in mod.__all__:
            setattr(self, attr, getattr(mod, attr))  # later lookups are plain instance attributes
        return getattr(mod, name)


def kernel() -> Any:
    """An object with the compiled functions (imported on first use), or ``None`` for the numpy code."""
    if mode() != "numba":
        return None
    raw = os.environ.get(ENV, "auto").strip().lower()
    return _Lazy(required=raw == "numba")
