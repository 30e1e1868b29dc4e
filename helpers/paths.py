"""Where the workbook's files are and where its builds go, and the two small tools every builder needs: a file lock
and a content hash. No torch here: the fresh processes that only ask where things are stay fast."""

from __future__ import annotations

import fcntl
import hashlib
import os
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CSRC = REPO / "csrc"
BUILD = Path(os.environ.get("WORKBOOK_BUILD_DIR", REPO / "build"))
BUILD_DIR = BUILD / "extensions"  # one folder per compiled layer


def compiler() -> str:
    """The C++ compiler torch.utils.cpp_extension runs: $CXX, else c++."""
    return os.environ.get("CXX", "c++")


def use_workbook_inductor_cache() -> None:
    """Keep torch.compile's compiled code in build/inductor instead of /tmp, so that a second run of a notebook or of
    the tests finds it, and `make clean` removes it. Call before the first compile. (Inductor's precompiled header,
    ~150 MB, still goes to /tmp/torchinductor_<user>: torch 2.13 and 2.14 place it there without reading this.)"""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(BUILD / "inductor"))


@contextmanager
def locked(path: Path):
    """Hold an exclusive lock on the file `path` (created if missing): other processes wait at the same lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def content_hash(files: list[Path], *extra: str, length: int = 12) -> str:
    """A hash of the files' names and bytes and of `extra` strings (flags, versions): a cache key that changes when
    any of them does."""
    digest = hashlib.sha256()
    for text in extra:
        digest.update(text.encode() + b"\0")
    for path in sorted(files):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:length]
