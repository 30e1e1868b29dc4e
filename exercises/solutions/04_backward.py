"""Exercise 04.backward (medium): a backward formula that passes gradcheck.

`exercise::cube(Tensor x) -> Tensor` returns x ** 3; its kernel is registered for you, with no gradient. Write the
two functions torch.library.register_autograd takes: `setup_context` saves what backward needs, `backward` turns
the gradient of the output into the gradient of the input. The check compares the gradient with the right one in
float64 and float32, at negative x, at 0 and at the ends of each dtype's range, and through .sum(); then gradcheck.
Backward must leave the tensors it receives as they are.
"""


def setup_context(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * 3 * x * x
