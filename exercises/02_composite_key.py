"""Exercise 02.composite_key (medium): one kernel, the right key.

`exercise::softplus2(Tensor x) -> Tensor` computes log(1 + exp(2x)) / 2 with torch operations (below). Register it at
ONE dispatch key so that, with no other kernel, it runs on CPU tensors (float32 and float64, contiguous or not, empty or
not, 0-d too), on meta tensors (so torch.compile and torch.export can trace it), inside torch.inference_mode(), and has
a gradient (on meta tensors too), in reverse and in forward mode (torch.func.jvp), that needs no autograd fallback. Its
output is a new tensor for each call, as the schema promises, in the input's dtype (whatever torch.set_default_dtype
says), at the input's precision, laid out as torch's elementwise operations lay it out (they keep the input's memory
format), and it leaves x as it found it. Your file keeps none of the calls' tensors.
"""

import torch

KEY = "CPU"  # TODO: which key?


def softplus2(x):
    return torch.log1p(torch.exp(2 * x)) / 2
