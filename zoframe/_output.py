"""What zoframe writes besides results: notices through :mod:`logging`, progress bars on terminals only.

Notices (a study resuming, runs done, files written, hints) go to the logger ``"zoframe"`` (and its
children such as ``"zoframe.verify"``). The package installs a :class:`logging.NullHandler` on it,
so a program that imports zoframe sees nothing until it configures logging itself::

    import logging
    logging.basicConfig(level=logging.INFO)          # every library's notices
    logging.getLogger("zoframe").setLevel(logging.DEBUG)

Real warnings (an estimator whose differences underflow, a plugin that failed to load, ...) stay
:mod:`warnings`, so the usual filters apply to them. The ``zoframe`` command shows notices on stderr
at level INFO; ``-v/--verbose`` lowers that to DEBUG, ``-q/--quiet`` raises it to WARNING (``-qq``:
ERROR).

Progress bars (tqdm, on stderr) are shown only when stderr is a terminal (or a Jupyter notebook,
where ``tqdm.auto`` draws a widget), so log files and pipes get no ``\\r`` frames. Every function that draws one takes a switch (``progress=False``,
``progress_bar=False``, ``--no-progress``), and the environment variable ``ZOFRAME_PROGRESS``
decides for all of them: ``0`` / ``off`` / ``never`` hides every bar, ``always`` shows them even
when stderr is not a terminal; unset (or ``auto``) means "on a terminal only".
"""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
import logging
import os
import sys
from typing import Any, TextIO

__all__ = ["LOGGER_NAME", "PROGRESS_ENV", "cli_logging", "logger", "progress_wanted"]

LOGGER_NAME = "zoframe"
#: environment variable: ``0`` / ``off`` / ``never`` hides every progress bar, ``always`` forces them
PROGRESS_ENV = "ZOFRAME_PROGRESS"

_OFF = {"0", "off", "false", "no", "never"}
_ALWAYS = {"always", "force"}


def logger(name: str = "") -> logging.Logger:
    """The logger ``"zoframe"`` or its child ``"zoframe.<name>"``."""
    return logging.getLogger(f"{LOGGER_NAME}.{name}" if name else LOGGER_NAME)


def progress_wanted(requested: bool = True, stream: Any = None) -> bool:
    """Whether to draw a progress bar: ``requested``, not switched off by ``$ZOFRAME_PROGRESS``, and
    ``stream`` (default ``sys.stderr``) a terminal (or ``ZOFRAME_PROGRESS=always``)."""
    if not requested:
        return False
    env = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if env in _OFF:
        return False
    if env in _ALWAYS:
        return True
    target = sys.stderr if stream is None else stream
    if type(target).__module__.startswith("ipykernel"):  # a Jupyter notebook: tqdm.auto draws a widget there
        return True
    isatty = getattr(target, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (ValueError, OSError):  # a closed stream
        return False


class _CliFormatter(logging.Formatter):
    """``message`` for INFO and below, ``zoframe: warning: message`` above."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.levelno >= logging.WARNING:
            return f"zoframe: {record.levelname.lower()}: {text}"
        return text


class _CliHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler the command line installs (replaced, not stacked, when ``main`` runs again)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.setFormatter(_CliFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr  # follow a redirected stderr (tests, contextlib.redirect_stderr)
        super().emit(record)


@contextlib.contextmanager
def cli_logging(verbosity: int = 0) -> Iterator[int]:
    """Show zoframe's notices on stderr at INFO, shifted by ``verbosity`` (+1: DEBUG, -1: WARNING,
    -2: ERROR), for the duration of a command; yields the level. The logger's previous level and
    handlers come back afterwards (``zoframe.cli.main`` called from Python leaves nothing behind)."""
    level = {1: logging.DEBUG, 0: logging.INFO, -1: logging.WARNING}.get(max(-2, min(1, verbosity)), logging.ERROR)
    log = logging.getLogger(LOGGER_NAME)
    before = log.level
    handler = _CliHandler(sys.stderr)
    log.addHandler(handler)
    log.setLevel(level)
    try:
        yield level
    finally:
        log.removeHandler(handler)
        log.setLevel(before)
