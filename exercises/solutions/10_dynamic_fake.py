"""Exercise 10.dynamic_fake (hard): a fake kernel for an output whose size depends on the data.

`exercise::positives(Tensor x) -> Tensor` returns the elements of x that are greater than zero, in the order they come
in x, as a 1-D tensor of x's dtype on x's device (what x[x > 0] gives). Its CPU kernel is registered. Write its fake
kernel, so that torch.compile(fullgraph=True) and torch.export can trace a function that calls it: for any shape, dtype
and device of x, with sizes that are numbers or symbols, and without pinning any of x's sizes to a number. How many
elements come out is not in x's metadata, and section 6 shows what becomes of a fake kernel that reads it from the data.
`torch.library.get_ctx()`, called inside a fake kernel, offers what you need instead (its docstring, and that of what it
returns, say how; where one of them says a bound defaults to 2, the signature, which is what runs, says 0: torch 2.15's
torch/_library/fake_impl.py).

The check runs torch.library.opcheck on inputs of several dtypes (floating, integer and bool) and shapes (0-d and one
element included), your kernel on fake tensors with symbolic sizes (the guards it adds must not pin a size), on fake
tensors of another device, on a fake x whose own size is unknown while tracing (positives of positives' output), and on
plain meta tensors (no fake mode: it refuses there, as x[x > 0] does), an export with a Dim (then run on more rows, and
more positive elements, than its example had), and compiles (dynamic and static sizes; inputs with no, one and only
positive elements, tens of thousands of them, transposed, expanded and 3-D ones; two calls in one trace, on one x and on
two views of one x; a plain torch.compile, without fullgraph, which breaks the graph where no size can be left unknown)
of functions that call the operator.
"""

import torch


def fake(x):
    # The count is the data's: a new symbol, unbacked (no value behind it while tracing), at least 0: min's default in
    # the signature (new_dynamic_size's docstring says 0, then 2; 0 is what runs). A max must be a number, and
    # x.numel() may be a symbol. Compiled code reads the real count when it runs the kernel.
    count = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty(count)
