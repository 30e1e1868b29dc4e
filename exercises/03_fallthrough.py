"""Exercise 03.fallthrough (easy): skip the Autograd key for an integer operator.

`exercise::count_odd(Tensor x) -> Tensor` counts the odd elements of an integer tensor; its CPU and Meta kernels are
registered for you. Integers have no gradient, so autograd has nothing to do for it, yet every call goes through torch's
autograd fallback, on every device. Make the dispatcher skip autograd for it, on every backend (lesson 03), and leave
its kernels below autograd as they are. `lib` is the torch.library.Library("exercise", "FRAGMENT") to register with: the
registration must live in it, and change nothing else (torch's process-wide autograd fallback mode and Python's warning
filters included; a fallthrough where the entry is one already, as at ADInplaceOrView or AutocastCPU, changes nothing).
The check calls it on CPU and meta tensors, reads its dispatch table at every backend's Autograd key, and destroys
`lib`, after which the table must be as it was; then it does the same with a second Library, and with four more made and
dropped in turn, and one its caller drops without destroying it (torch removes a Library's registrations once it is
collected).
"""

import torch


def register(lib: torch.library.Library) -> None:
    pass  # TODO: one line
