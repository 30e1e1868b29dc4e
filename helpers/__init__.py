"""Small helpers shared by every lesson: build (compile csrc layers), trace (predict and record
the dispatcher's path), plot (draw traces and dispatch tables)."""
