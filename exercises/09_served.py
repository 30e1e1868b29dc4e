"""Exercise 09.served (easy): which calls reach the device, and who serves them.

On lesson 09's device, with `x` (4 x 5), `w` (5 x 3) and `b` (3) on it:

    torch.relu(x @ w + b).sum()

Which operators' kernels does this call at the device's key (PrivateUse1), in order? Count the calls that reach the
device from outside, as device.served does, not those a kernel makes inside (such as the fallback's copies). For each,
write the operator with its overload, as the trace recorder names it ("aten::add.Tensor", "aten::sum"), and who serves
it: "native" (a kernel of ours in csrc/backend/device.cpp) or "fallback". The check reads SERVED from your file without
running it: write the list out rather than compute it, and let the file do nothing else.
"""

SERVED = [("aten::matmul", "native")]  # TODO: one (operator, server) pair per call, in order
