"""The one timer of the benchmarks: every method compared in the same rounds.

:func:`compare` runs each function ``warmup`` times (not recorded: the first call pays for
allocations, caches and lazy initialisation), then ``repeat`` rounds in which every function
runs once in turn, so that a busy moment of a shared machine hits all of them alike. Each
function gets a :class:`Timing`: the minimum (the least disturbed run, the number the targets
use), the median and the spread (the largest minus the smallest time) of its ``repeat`` calls,
in milliseconds. On a GPU the device is synchronised around each call.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """Wall times of one function's recorded calls, in milliseconds."""

    min_ms: float
    median_ms: float
    spread_ms: float
    repeat: int

    def columns(self, prefix: str = "") -> dict:
        """``{prefix + "ms": min, prefix + "median_ms": ..., prefix + "spread_ms": ...}``,
        the columns of a results row (``ms`` alone is the minimum)."""
        return {f"{prefix}ms": self.min_ms, f"{prefix}median_ms": self.median_ms,
                f"{prefix}spread_ms": self.spread_ms}


def _sync(device) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def compare(fns: dict, *, repeat: int = 7, warmup: int = 1, device="cpu",
            clock=time.perf_counter) -> dict:
    """A :class:`Timing` for each function of ``fns`` (name -> function of no arguments).

    Args:
        fns: the functions to compare, timed in this order in every round.
        repeat: recorded calls of each function (rounds).
        warmup: calls of each function before the rounds, not recorded.
        device: ``"cuda"`` (or ``"cuda:N"``) synchronises the GPU around each call.
        clock: the clock, in seconds (``time.perf_counter``).

    Returns:
        ``{name: Timing}`` in the order of ``fns``.
    """
    if repeat < 1 or warmup < 0:
        raise ValueError(f"compare: repeat must be >= 1 and warmup >= 0, got repeat={repeat}, "
                         f"warmup={warmup}")
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            _sync(device)
            start = clock()
            fn()
            _sync(device)
            times[name].append((clock() - start) * 1e3)
    return {name: Timing(min(t), statistics.median(t), max(t) - min(t), len(t))
            for name, t in times.items()}


def timeit(fn, **kwargs) -> Timing:
    """The :class:`Timing` of one function (:func:`compare` of one)."""
    return compare({"fn": fn}, **kwargs)["fn"]
