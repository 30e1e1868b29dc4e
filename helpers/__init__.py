"""Small helpers shared by every lesson: build (compile csrc layers), trace (predict and record
the dispatcher's path), plot (draw traces and dispatch tables)."""

from pathlib import Path

from . import trace

# The workbook's own kernels are those registered from its csrc/ (trace.py works without this, in
# your project, by telling torch's registrations from everyone else's).
trace.OURS = Path(__file__).resolve().parent.parent / "csrc"
