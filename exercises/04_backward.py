"""Exercise 04.backward (medium): a backward formula that passes gradcheck.

`exercise::cube(Tensor x) -> Tensor` returns x ** 3; its kernel is registered for you, with no gradient. Write the
two functions torch.library.register_autograd takes: `setup_context` saves what backward needs, `backward` turns
the gradient of the output into the gradient of the input.
"""


def setup_context(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad  # TODO: d(x ** 3)/dx
