"""The one timer every benchmark and lesson uses, and the statistics that say what a difference is worth."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


# The test command (conftest.py) sets WORKBOOK_QUICK_TIMING=1: nbval compares none of a timing cell's numbers (they
# vary; NBVAL_IGNORE_OUTPUT), so there a measurement only has to run, not to be precise. The figures a lesson stores
# come from `make execute`, without it.
QUICK = os.environ.get("WORKBOOK_QUICK_TIMING") == "1"


def seconds(fn, *args, min_sample_time: float = 0.05, samples: int = 7) -> float:
    """Median seconds per call of fn(*args): warm up, find how many calls fill min_sample_time, then time
    `samples` batches of that many calls (under QUICK, at most 3 batches of at most 2 ms)."""
    if QUICK:
        min_sample_time, samples = min(min_sample_time, 0.002), min(samples, 3)
    for _ in range(3):
        fn(*args)
    start, calls = time.perf_counter(), 0
    while calls == 0 or time.perf_counter() - start < min_sample_time:  # one call at least: the process may be
        # descheduled for longer than min_sample_time (a loaded machine), before the first call
        fn(*args)
        calls += 1
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def micros(fn, *args, min_sample_time: float = 0.01, samples: int = 3) -> float:
    """seconds(), in microseconds, on shorter samples: for calls that take microseconds."""
    return seconds(fn, *args, min_sample_time=min_sample_time, samples=samples) * 1e6


ROUND_SECONDS = 0.005  # one sample per round: thousands of µs-long calls, short enough for many rounds
ROUNDS = 3 if QUICK else 9  # rounds of a measurement: under QUICK, enough to show that the cells run


def interleaved(timers: dict[str, Callable[[], float]], rounds: int = ROUNDS) -> dict[str, list[float]]:
    """Each timer once per round, in turn, for `rounds` rounds: one sample per timer and round. A slow moment of the
    machine then lands on every timer of that round alike, and a difference taken round by round (Cost.between)
    cancels it. Every other round runs them in reverse order: what going first or second does to a sample (a cache
    the first warms for the second) then lands on each side in about half the rounds, not in every difference."""
    samples = {name: [] for name in timers}
    names = list(timers)
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else reversed(names):
            samples[name].append(timers[name]())
    return samples


def micros_timer(fn, *args, seconds: float = ROUND_SECONDS) -> Callable[[], float]:
    """A timer for interleaved(): one sample of fn(*args) in µs, calls repeated for `seconds`."""
    return lambda: micros(fn, *args, min_sample_time=seconds, samples=1)


@dataclass(frozen=True)
class Spread:
    """Median and interquartile range of repeated measurements."""

    median: float
    q1: float
    q3: float

    @classmethod
    def of(cls, values: list[float]) -> "Spread":
        q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
        return cls(median, q1, q3)

    @classmethod
    def each(cls, samples: dict[str, list[float]]) -> dict[str, "Spread"]:
        """The spread of every entry of interleaved()'s samples."""
        return {name: cls.of(values) for name, values in samples.items()}

    def __format__(self, spec: str) -> str:
        return f"{self.median:{spec}} ({self.q1:{spec}}-{self.q3:{spec}})"


@dataclass(frozen=True)
class Cost(Spread):
    """A difference measured round by round (with, minus without, in the same round). It counts as a cost only
    when its whole interquartile range lies above zero; otherwise it is within the noise of this machine now."""

    @property
    def significant(self) -> bool:
        return self.q1 > 0

    def describe(self, unit: str, digits: int = 2, signed: bool = False) -> str:
        """'+0.41 (0.36-0.47) µs', or 'within noise here': never a negative cost. With signed=True, a difference whose
        whole range lies below zero is a saving: 'saves 0.41 (0.36-0.47) µs'."""
        if self.significant:
            return f"+{self:.{digits}f} {unit}"
        if signed and self.q3 < 0:
            return f"saves {Spread(-self.median, -self.q3, -self.q1):.{digits}f} {unit}"
        return "within noise here"

    @classmethod
    def between(cls, with_: list[float], without: list[float]) -> "Cost":
        return cls.of([a - b for a, b in zip(with_, without)])
