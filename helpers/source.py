"""Show a csrc file, or one block of it, or a Python function of the workbook, in a notebook. What you
see is the file itself. And csrc's Python files, loaded by path as its C++ files are compiled by path."""

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from IPython.display import Code

from .paths import CSRC, REPO


def show(name: str, block: str | None = None, stop: str | None = None) -> Code:
    """The file csrc/<name>, or one block of it: from the one line that starts with `block` (indentation aside; with
    the `template <...>` line above it, if any) to the end of that block (the next line that is a lone `}` or `};`), or,
    with `stop`, up to the next line that starts with `stop` (indentation aside), that line excluded. `block` must
    name one line of the file: no line, or several, is an error that lists them."""
    lines = (CSRC / name).read_text().splitlines()
    if block is not None:
        start = end = _the_line(lines, block, f"csrc/{name}", indented=True)
        while start > 0 and lines[start - 1].lstrip().startswith("template <"):
            start -= 1  # a template's parameters belong to it: the block is pasteable as shown
        if stop is None:
            while lines[end].rstrip() not in ("}", "};"):
                end += 1
        else:
            end = next(i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith(stop)) - 1
            while not lines[end].strip():
                end -= 1
        lines = lines[start : end + 1]
    return Code("\n".join(lines), language="cpp")


def _the_line(lines: list[str], start: str, where: str, indented: bool) -> int:
    """The index of the one line that starts with `start` as a whole word: "TORCH_LIBRARY" is not the start of
    "TORCH_LIBRARY_IMPL(...)", and "at::Tensor add(" not that of "at::Tensor add_(". A shared prefix showing the
    wrong function is the mistake this refuses."""
    word_end = r"(?!\w)" if re.match(r".*\w$", start) else ""
    pattern = re.compile(re.escape(start) + word_end)
    found = [i for i, line in enumerate(lines) if pattern.match(line.lstrip() if indented else line)]
    if len(found) != 1:
        listed = "".join(f"\n  line {i + 1}: {lines[i].strip()}" for i in found)
        raise ValueError(f"{len(found)} lines of {where} start with {start!r}, not one{listed}")
    return found[0]


def python(path: str, start: str, stop: str | None = None) -> Code:
    """Lines of a Python file of the workbook (`path` from the repository's root, e.g.
    "helpers/python_ops.py"): from the one line that starts with `start` (as for show) up to the next line that
    starts with `stop` (or to the end of the file)."""
    lines = (REPO / path).read_text().splitlines()
    first = _the_line(lines, start, path, indented=False)
    last = next((i for i in range(first + 1, len(lines)) if stop and lines[i].startswith(stop)), len(lines))
    return Code("\n".join(lines[first:last]).strip("\n"), language="python")


def module(name: str) -> ModuleType:
    """The Python file csrc/<name>, run as a module of its own. csrc/package/workbook_ops/batching.py (lesson 06's
    vmap rule) ships inside the installable package, whose import would load the package's own build of the
    operators: lesson 06 runs the file alone, beside the layers it loaded, as it compiles csrc's C++ files."""
    path = CSRC / name
    spec = importlib.util.spec_from_file_location(f"csrc.{path.stem}", path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def torch_header(name: str, start: str, stop: str) -> Code:
    """Lines of one of the installed torch's C++ headers (`name` under torch/include, e.g.
    "torch/csrc/autograd/custom_function.h"): from the first line that contains `start` to the next line that contains
    `stop`, both included. The header the reader's own extensions compile against, not a copy."""
    import torch  # here, not at the top: the rest of this module does not need torch

    lines = (Path(torch.__file__).parent / "include" / name).read_text().splitlines()
    first = next((i for i, line in enumerate(lines) if start in line), None)
    if first is None:
        raise ValueError(f"no line of torch's {name} contains {start!r}")
    last = next(i for i in range(first + 1, len(lines)) if stop in lines[i])
    return Code("\n".join(lines[first : last + 1]), language="cpp")
