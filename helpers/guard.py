"""The guard against a load that would abort the process: a second TORCH_LIBRARY for a namespace, or a second
definition of an operator. Torch throws inside the library's static initializer, where nothing can catch it, so the
process dies (and a Jupyter kernel with it: lesson 01). This reads the sources first and refuses with a Python error.

    guard.check_namespaces_free("my layer", [Path("my_ops.cpp")])   # raises NamespaceAlreadyRegistered, or returns
"""

from __future__ import annotations

import re
from pathlib import Path

import torch


class NamespaceAlreadyRegistered(RuntimeError):
    """Loading this library would register an operator namespace, or an operator, a second time."""


def defined_namespaces(sources: list[Path]) -> set[str]:
    """Namespaces these files open with TORCH_LIBRARY or STABLE_TORCH_LIBRARY (not _IMPL, not _FRAGMENT)."""
    pattern = re.compile(r"^\s*(?:STABLE_)?TORCH_LIBRARY\(\s*(\w+)\s*,", re.MULTILINE)
    return {ns for path in sources for ns in pattern.findall(path.read_text())}


def defined_ops(sources: list[Path]) -> set[str]:
    """'ns::op' for every m.def in these files (each file opens at most one namespace)."""
    opens = re.compile(r"^\s*TORCH_LIBRARY(?:_FRAGMENT)?\(\s*(\w+)\s*,", re.MULTILINE)
    defs = re.compile(r"\bm\.def\(\s*\"(\w+)")
    ops = set()
    for path in sources:
        text = path.read_text()
        ops |= {f"{ns}::{name}" for ns in opens.findall(text) for name in defs.findall(text)}
    return ops


def check_namespaces_free(name: str, sources: list[Path]) -> None:
    """Refuse, with a Python error, a load of these sources that would abort the process."""
    namespaces, ops = defined_namespaces(sources), defined_ops(sources)
    if not namespaces and not ops:  # kernels only (TORCH_LIBRARY_IMPL): not worth listing the process's operators
        return
    existing_ops = set(torch._C._dispatch_get_all_op_names())  # about 7 ms: every operator torch has
    namespaces &= {op.split("::")[0] for op in existing_ops}
    ops &= existing_ops
    if not namespaces and not ops:
        return
    what = f"namespace {', '.join(sorted(namespaces))}" if namespaces else f"operator {', '.join(sorted(ops))}"
    raise NamespaceAlreadyRegistered(
        f"{name} defines {what}, which this process already has. Each namespace has one TORCH_LIBRARY "
        "and each operator one definition per process; a second one aborts the process, so the library was not "
        "loaded. If you edited a csrc file after loading it, restart the kernel (Kernel > Restart) and run the "
        "notebook again. If two libraries share a namespace on purpose, open it with TORCH_LIBRARY_FRAGMENT in "
        "all but one, and define each operator once."
    )
