"""Small helpers shared by the lessons. What a lesson calls:

- build: compile csrc layers and load them (build.load("cpu")); behind it toolchain (compiler flags, precompiled
  header), guard (refuse a second TORCH_LIBRARY before it aborts the process) and paths (where things live).
- trace: predict the dispatcher's path for a call, and record the one it took; plot: draw both, and dispatch tables.
- source: show csrc files in a notebook; samples: every operator's table (dtypes, sample inputs, reference, bad
  inputs) and the one small model; isolated: run a snippet in a fresh Python (for what would crash the kernel);
  messages: torch's warnings without their build-dependent tail.
- python_ops (lesson 06), shipping (lesson 08) and device (lesson 09): each lesson's own steps.
- execute and progress: re-running the notebooks (make execute) and live build lines.
"""
