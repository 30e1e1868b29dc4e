"""Exercise 04.backward (medium): a backward formula that passes gradcheck and gradgradcheck.

`exercise::cube(Tensor x) -> Tensor` returns x ** 3 for a real floating-point x (it refuses complex and integer
tensors); its CPU and Meta kernels are registered for you, with no gradient. Write the two functions
torch.library.register_autograd takes: `setup_context` saves what backward needs, `backward` turns the gradient of the
output into the gradient of the input. The check compares the gradient with the right one in float64 (to float64's
precision), float32, float16 (a large gradient from above, as GradScaler scales a loss) and bfloat16, at negative x, at
0 and at the ends of each dtype's range (past them too, for an infinite gradient, a NaN gradient from above, and for a
NaN or infinite x under a zero gradient, and under a gradient from above near each dtype's largest value), through
.sum(), arriving undefined (a node below that gives none), on a transposed x, on an x in the memory of an earlier one,
on fresh tensors in a loop, with two forwards before their backwards, on meta tensors, and on fake ones (torch.compile
tracing the backward) before any real call and after one; then double backward (0 included), gradcheck and
gradgradcheck: backward must itself be differentiable. Backward must leave the tensors it receives as they are (a large
one of 4M elements too, and one that two nodes share), keep no tensor between calls (nor in a module variable while it
runs: two threads run backward at once), and leave the settings of the process and thread (default dtype and device,
threads, flushing of denormal numbers, random numbers, anomaly detection, print options, Python's warning filters and
loggers) as it found them; when x is changed in place after forward (transposed, float16 or bfloat16 too), backward must
be refused, as it is for torch's own operators, and a fresh forward on the changed x must give its gradient; when the
output is changed in place after forward, backward must still give x's gradient. Then a third derivative (0 included), a
batched backward (autograd.grad's is_grads_batched=True, as jacobian(vectorize=True) runs it), a backward with
create_graph=True after a plain one on the same graph, and a call under torch.autograd.graph.saved_tensors_hooks (what
save_on_cpu and activation checkpointing use), which must see what forward saves, and be all that keeps it (an
activation the caller drops is freed); an output the caller drops must be freed at once, with no reference cycle. Last,
a step under torch.compile (its backward traced, then run) must give eager's gradient.
"""


def setup_context(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad  # TODO: d(x ** 3)/dx
