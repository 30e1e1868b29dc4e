"""Show a csrc file, or one block of it, or a Python function of the workbook, in a notebook. What you
see is the file itself."""

from IPython.display import Code

from .build import CSRC, REPO

def show(name: str, block: str | None = None) -> Code:
    """The file csrc/<name>, or one block of it: from the first line that starts with `block`
    (indentation aside) to the end of that block (the next line that is a lone `}` or `};`)."""
    lines = (CSRC / name).read_text().splitlines()
    if block is not None:
        starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(block)]
        if not starts:
            raise ValueError(f"no line of csrc/{name} starts with {block!r}")
        start = starts[0]
        end = start
        while lines[end].rstrip() not in ("}", "};"):
            end += 1
        lines = lines[start : end + 1]
    return Code("\n".join(lines), language="cpp")


def python(path: str, start: str, stop: str | None = None) -> Code:
    """Lines of a Python file of the workbook (`path` from the repository's root, e.g.
    "helpers/python_ops.py"): from the first line that starts with `start` up to the next line that
    starts with `stop` (or to the end of the file)."""
    lines = (REPO / path).read_text().splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith(start)), None)
    if first is None:
        raise ValueError(f"no line of {path} starts with {start!r}")
    last = next((i for i in range(first + 1, len(lines)) if stop and lines[i].startswith(stop)), len(lines))
    return Code("\n".join(lines[first:last]).strip("\n"), language="python")
