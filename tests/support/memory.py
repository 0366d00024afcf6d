"""Peak resident memory of a call on Linux (VmHWM, reset first): CPU stand-in for a GPU's peak-memory counter."""

from collections.abc import Callable
from pathlib import Path


def peak_rss_growth_mib(fn: Callable[[], object]) -> float:
    """How far the process's resident memory peaks above where it stood while `fn` runs."""
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident size
    before = _high_water_mib()
    fn()
    return _high_water_mib() - before


def _high_water_mib() -> float:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
