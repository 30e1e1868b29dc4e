"""The one timer every benchmark and lesson uses, and the statistics that say what a difference is worth."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass


def seconds(fn, *args, min_sample_time: float = 0.05, samples: int = 7) -> float:
    """Median seconds per call of fn(*args): warm up, find how many calls fill min_sample_time, then time
    `samples` batches of that many calls."""
    for _ in range(3):
        fn(*args)
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < min_sample_time:
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

    def __format__(self, spec: str) -> str:
        return f"{self.median:{spec}} ({self.q1:{spec}}-{self.q3:{spec}})"


@dataclass(frozen=True)
class Cost(Spread):
    """A difference measured round by round (with, minus without, in the same round). It counts as a cost only
    when its whole interquartile range lies above zero; otherwise it is within the noise of this machine now."""

    @property
    def significant(self) -> bool:
        return self.q1 > 0

    def describe(self, unit: str, digits: int = 2) -> str:
        """'+0.41 µs (0.36-0.47)', or 'within noise here': never a negative cost."""
        return f"+{self:.{digits}f} {unit}" if self.significant else "within noise here"

    @classmethod
    def between(cls, with_: list[float], without: list[float]) -> "Cost":
        return cls.of([a - b for a, b in zip(with_, without)])
