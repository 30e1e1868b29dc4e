"""Exercise 10.upcast_mode (medium): a mode that runs half-precision calls in float32.

Some kernels have no float16 or bfloat16 code (the check's own operators refuse both). Write `Upcast`, a
TorchDispatchMode under which no kernel sees a float16 or bfloat16 tensor, and no caller notices the difference:

- each float16 or bfloat16 tensor argument, positional or keyword, alone or in a list (`Tensor[]`), reaches the kernel
  as a float32 copy laid out as the original (as `.to()` lays out a copy, and torch's autocast casts: a dense tensor,
  contiguous, channels_last or transposed, keeps its strides); every other argument (float32, float64, float8, integer
  and bool tensors, numbers) reaches it as it is;
- each floating-point output comes back in the call's half-precision dtype (the check's calls have one: float16 or
  bfloat16, and no float64 tensor beside it but one they write), unless the call names its output's dtype (an argument
  that is a dtype, by any name: `x.to(torch.float32)`, `x.sum(dtype=torch.float32)`, `torch.ops.aten.mm.dtype(a, b,
  torch.float32)`); every other output (integer, bool and complex tensors, Python numbers) comes back as the kernel
  returned it, and outputs come back laid out as the call lays them out (dense ones, as above);
- an argument the operator writes (`Tensor(a!)`, alone or in a list: in place, or out=, whose buffers a kernel may
  resize; given in another place too, where the kernel reads what it wrote) holds the result afterwards, in its own
  memory (so that its views, and the tensor it is a view of, see it) with its version counter moved (a backward that
  saved it must refuse, as it does after the same call in float32 without the mode), and an output that is that argument
  is the caller's tensor itself, as it would be without the mode;
- an operator any output of which shares storage with an argument (`Tensor(a) x -> Tensor(a)`, a view, first or not,
  or a list of them) runs as it is: a view of a float32 copy would share nothing with the caller's tensor; and so does
  one that changes an argument's view of memory in place (tagged torch.Tag.inplace_view: t_, as_strided_ and set_
  among others);
- the mode's own work (its casts, and its writes into the caller's tensors) is made as calls the modes below it see:
  make_fx, run on a function that uses the mode (on real tensors, and on fake ones of symbolic sizes, as torch.compile
  traces), must record a graph that computes from its inputs, and writes where the call writes. It keeps nothing between
  calls (an operator's name may be defined again, with another schema; a tensor may be written where its version counter
  does not see it).

One kind of call does show the mode to its caller, by the rule above: one that mixes float32 and half tensors. aten's
`torch.add(f32, f16)` gives float32 without the mode and half under it (the check's own operators refuse half inputs:
for them there is no result without the mode to compare with).

The check calls operators of its own (Python kernels in namespace `exercise`: plain, one that returns float64, in place,
out=, a view, several outputs and several written arguments (a float32 one beside half ones; two returned in the other
order), lists of tensors, keyword arguments) and aten's, in float16 and in bfloat16, under one instance of your mode, on
CPU and meta tensors, empty ones too, and compares each call with the same call in float32 without it; it also makes
calls whose kernels raise (the caller gets the kernel's error, of its type, and its thread's state as it was; one writes
part of an argument first (in place, out=, and an out= it resizes first), which must then hold what was written, and the
rest what it held, as without the mode; one writes an argument, which the caller then writes into), then another, passes
one tensor twice in a written list, enters a mode of its own outside yours, which must still see the calls, writes into
a tensor between two calls, traces a call with make_fx, and differentiates through a call on a parameter (what the mode
returns is an ordinary tensor). (Two different views of one memory in a written list are beyond such a mode: each gets a
float32 copy of its own, and one write is lost. Not every schema tells the truth: aten::native_batch_norm writes
running_mean and running_var without marking them `(a!)`, so a mode like this one loses their updates.)
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

HALF = (torch.float16, torch.bfloat16)


def _float32(value):
    return value.float() if isinstance(value, torch.Tensor) and value.dtype in HALF else value


def _one_copy_each(given, sent):
    """`sent`, the call's arguments with their copies, where a tensor `given` in several places (a list that holds it
    twice) goes to the kernel as one copy, the first made for it: a write through either place is a write to it."""
    first = {}
    return tree_map(lambda original, copy: first.setdefault(id(original), copy)
                    if isinstance(original, torch.Tensor) else copy, given, sent)


def _count_writes(schema, args, kwargs):
    """Each tensor the schema marks written gets a bump of its version counter, which the kernel's writes no longer
    give it: while __torch_dispatch__ runs, every key above Python is excluded, ADInplaceOrView among them (lesson 10,
    section 1), and a backward that saved the tensor would run on the new values. Where a kernel above the mode bumps
    it too (aten's in-place operators), the second bump is harmless: autograd compares a saved version with the
    current one."""
    for position, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        given = args[position] if position < len(args) else kwargs.get(argument.name)
        for tensor in [given] if isinstance(given, torch.Tensor) else list(given or []):
            if isinstance(tensor, torch.Tensor) and not tensor.is_inference():  # an inference tensor has no counter
                torch.autograd.graph.increment_version(tensor)


class Upcast(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        halves = {value.dtype for value in tree_flatten((args, kwargs))[0]
                  if isinstance(value, torch.Tensor) and value.dtype in HALF}
        # A view's output shares the caller's storage: it cannot be computed on a copy (the schema says which). Nor
        # can an argument's view of memory be changed in place (t_, as_strided_, set_: the inplace_view tag).
        views = (any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
                 or torch.Tag.inplace_view in func.tags)
        if not halves or views:
            try:
                return func(*args, **kwargs)
            finally:  # what the kernel wrote before it raised counts too
                _count_writes(schema, args, kwargs)
        (half,) = halves
        # The mode is off while this method runs: .float() and copy_ below go straight to their kernels.
        upcast_args, upcast_kwargs = tree_map(_float32, args), tree_map(_float32, kwargs)
        upcast_args, upcast_kwargs = _one_copy_each((args, kwargs), (upcast_args, upcast_kwargs))
        # Each copy's layout as sent: a kernel may lay out a written argument anew (resize_ with a memory format).
        sent_layouts = {id(t): (t.shape, t.stride()) for t in tree_flatten((upcast_args, upcast_kwargs))[0]
                        if isinstance(t, torch.Tensor)}
        raised = None
        try:
            result = func(*upcast_args, **upcast_kwargs)
        except Exception as error:  # the kernel's: raised again below, once what it wrote is the caller's
            result, raised = None, error
        # The arguments the schema marks written: the caller's tensor takes the result (or what the kernel wrote
        # before it raised, as the caller's tensor would hold it without the mode), and stands for its copy.
        originals = {}
        for position, argument in enumerate(schema.arguments):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            given, sent = ((args[position], upcast_args[position]) if position < len(args) else
                           (kwargs.get(argument.name), upcast_kwargs.get(argument.name)))
            # One tensor, or a list of them (Tensor(a!)[], as torch._foreach_mul_ takes).
            for caller, copy in zip(*([v] if isinstance(v, torch.Tensor) else list(v or []) for v in (given, sent))):
                if not isinstance(caller, torch.Tensor):
                    continue
                if copy is not caller:
                    if caller.shape != copy.shape:  # an out= buffer the kernel resized: as the kernel laid it out
                        caller.resize_(copy.shape).as_strided_(copy.shape, copy.stride())
                    sent_shape, sent_strides = sent_layouts[id(copy)]
                    if copy.shape == sent_shape and copy.stride() != sent_strides:  # or laid out anew at its shape
                        caller.as_strided_(copy.shape, copy.stride())
                    caller.copy_(copy)  # into the caller's own memory: its views, and its base, see it
                originals[id(copy)] = caller  # a float32 one, not copied, too: returned as it is

        _count_writes(schema, args, kwargs)  # what the kernel wrote before it raised counts too
        if raised is not None:
            raise raised
        # A dtype the call names (x.to(torch.float32), x.sum(dtype=torch.float32)) is its output's: kept.
        named = {value for value in tree_flatten((args, kwargs))[0] if isinstance(value, torch.dtype)}

        def back(value):
            if not isinstance(value, torch.Tensor):
                return value
            if id(value) in originals:
                return originals[id(value)]
            return value.to(half) if value.is_floating_point() and value.dtype not in named else value

        return tree_map(back, result)
