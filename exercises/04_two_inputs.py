"""Exercise 04.two_inputs (medium): one gradient per input.

`exercise::mul_add(Tensor a, Tensor b, Tensor c) -> Tensor` returns a * b + c. Write its setup_context and
backward: backward returns one gradient per input, in the order of the schema.
"""


def setup_context(ctx, inputs, output):
    a, b, c = inputs
    ctx.save_for_backward(a, b)


def backward(ctx, grad):
    a, b = ctx.saved_tensors
    return grad, grad, grad  # TODO
