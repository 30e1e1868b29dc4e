"""Exercise 03.autograd_outcomes (medium): what backward does, with and without autograd support.

An operator `exercise::double_it(Tensor x) -> Tensor` (x * 2) has no Autograd kernel. For each way of registering
it, what does `double_it(x).sum().backward()` do, for an `x` that requires grad? Answer "grad" (x.grad is right),
"no grad" (backward runs, with a warning, and x.grad stays None) or "error" (backward raises).

- "raw":          a CPU kernel that writes the result through a raw pointer (no torch op autograd can see);
- "torch ops":    a CPU kernel that computes x.mul(2) with torch operations;
- "fallthrough":  the raw CPU kernel, and a fallthrough at the Autograd key.
"""

OUTCOMES = {"raw": "grad", "torch ops": "grad", "fallthrough": "grad"}  # TODO
