"""Resource limits: saturation `Limits`, the process's memory, the RAM, the whole run's clock.

Imports nothing of ours, so every layer may use it. Memory is the resident set size (RSS) of
the calling process, read from `/proc/self/statm` (the peak from `getrusage` where /proc is
missing). Times are `time.monotonic()` seconds, which on Linux are comparable across
processes, so a worker process can be handed its parent's deadline.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from dataclasses import dataclass

DEFAULT_TIME_LIMIT = 300.0
"""Default `--time-limit`: seconds for the whole run."""
MEMORY_FRACTION = 0.5
"""Default `--max-memory`: this fraction of the machine's physical RAM."""
HARD_MEMORY_FACTOR = 2.0
"""The worker's address space is capped at this many times `--max-memory` (plus headroom)."""
HARD_MEMORY_HEADROOM_MB = 2048.0
"""Address space that is reserved but never touched (libraries, thread stacks, arenas)."""


def rss_mb() -> float:
    """The current resident set size of this process, in MiB."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return peak_rss_mb()


def peak_rss_mb() -> float:
    """The peak resident set size of this process, in MiB.

    Read from VmHWM in /proc/self/status where there is one: getrusage's maxrss survives
    exec on Linux, so a process started by a big one would report its parent's peak.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB else


def total_memory_mb() -> float:
    """Physical RAM of the machine, in MiB (8 GiB where it cannot be read)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, AttributeError):
        return 8192.0


def default_max_memory_mb() -> float:
    """`--max-memory` when none is given: MEMORY_FRACTION of physical RAM."""
    return round(total_memory_mb() * MEMORY_FRACTION)


def hard_memory_mb(max_memory_mb: float) -> float:
    """The address-space cap of a worker whose soft limit is `max_memory_mb`.

    The soft limit is checked between saturation iterations; one iteration can still overrun
    it, and this cap turns a runaway into an allocation failure of the worker (which the
    parent reports and survives) instead of the machine swapping or the OOM killer choosing.
    It is HARD_MEMORY_FACTOR x the soft limit + headroom, but at most 90% of RAM (and never
    below the soft limit + half the headroom).
    """
    cap = max_memory_mb * HARD_MEMORY_FACTOR + HARD_MEMORY_HEADROOM_MB
    return max(max_memory_mb + HARD_MEMORY_HEADROOM_MB / 2, min(cap, 0.9 * total_memory_mb()))


def cap_address_space(mb: float) -> None:
    """Cap this process's address space (RLIMIT_AS) at `mb` MiB; never raises the cap."""
    limit = int(mb * 2**20)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft != resource.RLIM_INFINITY and soft < limit:
        return
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


@dataclass(frozen=True)
class Limits:
    """Saturation stops at the first limit reached; each is checked between iterations and
    each iteration is bounded so that the e-node limit is overshot by at most 10%.
    """

    iterations: int = 20
    nodes: int = 200_000
    seconds: float | None = 20.0
    """Saturation's own wall-clock budget (None: only the deadline given to `saturate`)."""
    memory_mb: float | None = None
    """Resident memory of the saturating process; None = `default_max_memory_mb()`."""
    match_limit: int = 1000
    """Back-off scheduler: matches a rule may fire in one iteration before it is banned."""
    ban_length: int = 5
    """Back-off scheduler: iterations a rule is first banned for."""


@dataclass(frozen=True)
class Deadline:
    """A wall-clock budget: `seconds` from `start` (monotonic); None = unlimited."""

    start: float
    seconds: float | None

    @classmethod
    def starting_now(cls, seconds: float | None) -> Deadline:
        return cls(time.monotonic(), seconds)

    @property
    def at(self) -> float:
        """The monotonic time the budget ends (inf when unlimited)."""
        return float("inf") if self.seconds is None else self.start + self.seconds

    def remaining(self) -> float:
        """Seconds left (may be negative; inf when unlimited)."""
        return self.at - time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start
