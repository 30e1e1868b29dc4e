"""Throughput of the workbook's CPU kernels against PyTorch's own, measured in the same run.

    python -m bench.kernels            (or: make bench)

- sum: GB/s of input read, for workbook::sum and torch.sum, beside a memory copy of the same bytes
  (the ceiling: a copy reads and writes each byte once, counted as 2 x bytes / time).
- matmul: GFLOP/s (2 n^3 / time) for workbook::matmul and torch.matmul (a tuned BLAS).
Each figure is the median of several timed samples after warm-up calls; both sides use the same
threads (torch.get_num_threads()).

Goals (issue 3), at the largest sizes: float32 sum >= 0.9x torch.sum and >= 70% of the copy
ceiling; int32 sum >= 10x torch.sum; float32 matmul >= 0.3x torch.matmul at 1024 x 1024.
"""

from __future__ import annotations

import statistics
import time

import torch

from helpers import build

SUM_SIZES = [1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 24]
MATMUL_SIZES = [64, 256, 512, 1024]


def seconds(fn, *args, min_sample_time: float = 0.05, samples: int = 7) -> float:
    """Median seconds per call: warm up, then time `samples` batches of at least min_sample_time."""
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


def sum_rows(dtypes=(torch.float32, torch.int32), sizes=SUM_SIZES) -> list[dict]:
    rows = []
    for dtype in dtypes:
        for n in sizes:
            x = torch.randint(-100, 100, (n,), dtype=dtype) if not dtype.is_floating_point else torch.randn(n, dtype=dtype)
            copy_target = torch.empty_like(x)
            ours, theirs = seconds(torch.ops.workbook.sum, x), seconds(torch.sum, x)
            copy = seconds(copy_target.copy_, x)
            rows.append({"op": "sum", "dtype": str(dtype).removeprefix("torch."), "size": n,
                         "workbook GB/s": x.nbytes / ours / 1e9, "torch GB/s": x.nbytes / theirs / 1e9,
                         "copy GB/s": 2 * x.nbytes / copy / 1e9, "ratio": theirs / ours,
                         "of copy": (x.nbytes / ours) / (2 * x.nbytes / copy)})
    return rows


def matmul_rows(dtypes=(torch.float32, torch.float64), sizes=MATMUL_SIZES) -> list[dict]:
    rows = []
    for dtype in dtypes:
        for n in sizes:
            a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
            ours, theirs = seconds(torch.ops.workbook.matmul, a, b), seconds(torch.matmul, a, b)
            rows.append({"op": "matmul", "dtype": str(dtype).removeprefix("torch."), "size": n,
                         "workbook GFLOP/s": 2 * n**3 / ours / 1e9, "torch GFLOP/s": 2 * n**3 / theirs / 1e9,
                         "ratio": theirs / ours})
    return rows


def print_table(rows: list[dict]) -> None:
    columns = list(rows[0])
    print("  ".join(f"{c:>16}" for c in columns))
    for row in rows:
        print("  ".join(f"{v:>16.2f}" if isinstance(v, float) else f"{v!s:>16}" for v in row.values()))


def main():
    build.load("schemas")
    build.load("cpu")
    print(f"threads: {torch.get_num_threads()}   (ratio = torch time / workbook time: above 1, the workbook is faster)\n")
    print_table(sum_rows())
    print()
    print_table(matmul_rows())


if __name__ == "__main__":
    main()
