"""Exercise 05.register_autocast (easy): autocast for an operator, from Python.

`exercise::mm2(Tensor a, Tensor b) -> Tensor` is a matrix product whose CPU kernel refuses two different dtypes. Inside
torch.autocast("cpu"), a model calls it with a float32 activation and a bfloat16 weight, and it raises. Make autocast
cast both inputs to bfloat16, whatever the region's dtype, before the kernel runs. `lib` is the torch.library.Library to
register with: the registration must live in it, so that the check can remove it again (lesson 05, section 7). The check
calls mm2 in one region (float32 and bfloat16 inputs in either order, two float32 ones, a float32 and a float16 one, two
float16 ones; two float64 ones and pairs of int64, int32, int16, int8, uint8, complex64 and complex128 ones, which
autocast leaves as they are (as it leaves every input that is not floating point: bool, unsigned and complex32 ones,
which the kernel refuses, too); a float32 and a float64 one; a float32 activation and a weight in each float8 dtype
torch has; an empty activation; two calls its kernel refuses (a RuntimeError, a ValueError: each must reach the caller
as it was raised), one on inputs that require grad and one on a float32 parameter), once after it, in a second region
after writing into a float32 weight and into the parameter (under no_grad, as an optimizer step does), in a third and a
fourth after writes through `.data` (the fourth while an earlier output is kept), in a region of float16, in one without
autocast's cast cache, in one under torch.no_grad() (an evaluation loop: no graph recorded), under a TorchDispatchMode
entered then, in twenty regions on new inputs (nothing of them kept once the caller drops them), and after `lib` is
destroyed and register() given a new Library (a test's fixture, a plugin reloaded), then in two threads' regions at once
(a threaded server: one region of bfloat16, one of float16); it records the dtypes its CPU kernel receives, compares the
results and the gradients, and the thread's dispatch state and autocast's settings (its cast cache too) before and after
each call and register() itself, and that the caller's tensors are left as they were, and that your file holds none of
the calls' tensors, while a call runs or after it.
"""

import torch


def register(lib: torch.library.Library) -> None:
    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)
