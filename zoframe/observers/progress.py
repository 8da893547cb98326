"""The progress-bar observer: a tqdm bar on stderr (shown after half a second, on a terminal only)."""

from __future__ import annotations

from typing import Any

from zoframe.run import RunLoop, Stop


class ProgressBar:
    """Iterations against ``max_iter`` (or a running count), the solver's name as the label."""

    def __init__(self, total: int | None, desc: str) -> None:
        from tqdm.auto import tqdm

        from zoframe._output import progress_wanted

        # on a terminal only (and not with ZOFRAME_PROGRESS=0): no \r frames in log files
        self.bar: Any = tqdm(total=total, unit="it", desc=desc, delay=0.5, leave=False, dynamic_ncols=True,
                             disable=not progress_wanted())
        self.last = 0

    def start(self, loop: RunLoop) -> Stop | None:
        return None

    def iteration(self, loop: RunLoop) -> Stop | None:
        self.bar.update(loop.nit - self.last)
        self.last = loop.nit
        return None

    def end(self, loop: RunLoop) -> None:
        self.bar.close()
