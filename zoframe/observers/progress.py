"""The progress-bar observer: a tqdm bar on stderr (shown after half a second)."""

from __future__ import annotations

from typing import Any

from zoframe.run import RunLoop, Stop


class ProgressBar:
    """Iterations against ``max_iter`` (or a running count), the solver's name as the label."""

    def __init__(self, total: int | None, desc: str) -> None:
        from tqdm.auto import tqdm

        self.bar: Any = tqdm(total=total, unit="it", desc=desc, delay=0.5, leave=False, dynamic_ncols=True)
        self.last = 0

    def start(self, loop: RunLoop) -> Stop | None:
        return None

    def iteration(self, loop: RunLoop) -> Stop | None:
        self.bar.update(loop.nit - self.last)
        self.last = loop.nit
        return None

    def end(self, loop: RunLoop) -> None:
        self.bar.close()
