"""Optional dependencies, imported on first use with an error that names the extra to install.

The core install is numpy, scipy, pluggy, tqdm and threadpoolctl. Everything else is an extra of
the ``zoframe`` distribution, imported only by the feature that needs it::

    from zoframe._optional import require

    cp = require("cvxpy", extra="cvxpy", feature="the ZOPSGD baseline's projections")

=============  ===============  ==================================================================
module         extra            used for
=============  ===============  ==================================================================
cvxpy          ``cvxpy``        the baselines' projections and LPs, verification references
sklearn        ``data``         LIBSVM parsing, scikit-learn's bundled data sets and models
pooch          ``data``         ``zoframe data fetch``: downloads, retries, checksums
platformdirs   ``data``         the platform's user cache directory (else the XDG rule)
matplotlib     ``plot``         figures of the reproductions and rate studies
distributed    ``distributed``  a dask cluster as the executor of a run or a study
cma            ``peers``        the ``cma-es`` peer (pycma)
nevergrad      ``peers``        the ``ngopt`` and ``ng-cobyla`` peers
cocoex         ``coco``         the ``bbob`` suite of ``zoframe bench``
pybobyqa       ``pybobyqa``     the ``pybobyqa`` peer (Py-BOBYQA)
dfols          ``dfols``        the ``dfols`` peer (DFO-LS)
=============  ===============  ==================================================================

``pip install "zoframe[all]"`` installs the extras of the reproductions, the examples and the docs:
exactly :data:`ALL_EXTRAS` (``cvxpy``, ``data``, ``plot``; ``-e ".[all]"`` in a clone). The others
(``peers``, ``pybobyqa``, ``dfols``, ``distributed``, ``coco``, ``fast`` = numba for the compiled kernel
of ``dszog`` / ``adszog``, and ``bench`` = ``peers`` + ``pybobyqa`` + ``dfols`` + ``plot`` + PDFO) are
installed by name (``dev`` adds ``distributed``, ``peers``, ``pybobyqa``, ``dfols`` and ``fast``). The
message of :func:`require` names the extra that installs the missing module and says whether ``all``
holds it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from zoframe.errors import ZoframeError

__all__ = ["ALL_EXTRAS", "EXTRAS", "MissingDependencyError", "require"]

#: the distribution that provides a module, where its name differs from the module's
_DISTRIBUTIONS = {
    "sklearn": "scikit-learn", "distributed": "dask[distributed]", "dask": "dask[distributed]", "cocoex": "coco-experiment",
    "pybobyqa": "Py-BOBYQA", "dfols": "DFO-LS",
}

#: module -> the extra of zoframe that installs it
EXTRAS = {
    "cvxpy": "cvxpy", "sklearn": "data", "pooch": "data", "platformdirs": "data", "matplotlib": "plot",
    "distributed": "distributed", "dask": "distributed", "cma": "peers", "nevergrad": "peers", "cocoex": "coco",
    "pybobyqa": "pybobyqa", "dfols": "dfols",
}

#: the extras that ``zoframe[all]`` installs (pyproject.toml's ``all``; a test keeps the two equal)
ALL_EXTRAS = ("cvxpy", "data", "plot")


class MissingDependencyError(ZoframeError, ImportError):
    """A feature needs an optional dependency that is not installed; the message names the extra."""


def require(module: str, *, extra: str | None = None, feature: str) -> ModuleType:
    """Import ``module`` (e.g. ``"cvxpy"`` or ``"matplotlib.pyplot"``) or say which extra provides it.

    ``feature`` is what the user asked for, in words ("plotting a trace"); ``extra`` defaults to the
    extra listed for the top-level module in :data:`EXTRAS`. Raises :class:`MissingDependencyError`
    (an ``ImportError``) whose message names the feature, the missing module and the ``pip install``
    command.
    """
    top = module.partition(".")[0]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is not None and exc.name.partition(".")[0] != top:
            raise  # the module is installed but one of its own dependencies is broken: show that error
        extra = extra or EXTRAS.get(top, "all")
        dist = _DISTRIBUTIONS.get(top, top)
        held = (
            "'zoframe[all]' includes it" if extra in ALL_EXTRAS or extra == "all"
            else f"'zoframe[all]' does not: it holds {', '.join(ALL_EXTRAS)}"
        )
        raise MissingDependencyError(
            f"{feature} needs {dist}, which is not installed. Install the extra that provides it: "
            f"pip install 'zoframe[{extra}]' (in a clone: pip install -e '.[{extra}]'; {held})"
        ) from exc
