"""torch's warnings and errors as a lesson prints them: what torch says, not where or how it said it.

A warning raised in C++ (TORCH_WARN) ends with the C++ place it came from, and that tail differs between builds:
"(function operator())" in torch 2.14.1's wheel, "(Triggered internally at .../LegacyTypeDispatch.h:75.)" in
2.15.0's. How it reaches a fresh process's stderr differs too: up to 2.14 torch writes a C++ warning raised inside an
operator called through torch.ops there itself ("[W1124 10:00:00.000 file.cpp:75] Warning: ..."); from 2.15 it is a
Python UserWarning, which Python prints ("/path/_ops.py:1350: UserWarning: ..."). A stored output keeps the words."""

import re

# "(Triggered internally at <file>:<line>.)" or "(function <name>)", the name possibly `operator()`.
_LOCATION = re.compile(r"\s*\((Triggered internally at \S+?\.|function [^\s()]+(\(\))?)\)")


def without_location(text: str) -> str:
    """`text` with every C++ location tail removed."""
    return _LOCATION.sub("", str(text))


def first_line(message) -> str:
    """A warning's or error's first line (str() of the warning or exception), without its C++ location."""
    return without_location(str(message).splitlines()[0] if str(message) else "")


def warning_in(stderr: str, needle: str) -> str:
    """The words of the warning in `stderr` (a fresh process's) whose line contains `needle`: without the prefix that
    says who printed it (torch's C++ handler or Python's warnings module) and without its C++ location."""
    line = next(line for line in stderr.splitlines() if needle in line)
    return without_location(re.sub(r"^.*?Warning: ", "", line))
