"""Exercise 00.walk (hard): the dispatcher's walk, by hand.

Write `kernels(op, *args)`: the dispatch keys whose kernels the dispatcher calls for op(*args), here and now, highest
priority first. Use torch._C's functions, as lesson 00's "Underneath trace.call" does, not helpers.trace. The check
compares your list with the dispatcher's for aten's and the workbook's operators and operators defined from Python,
composite, in-place and view ones included, on CPU, meta, sparse and conjugated complex tensors, mixed ones and lists of
them, inside torch.no_grad(), torch.inference_mode(), torch.autocast("cpu"), a TorchDispatchMode and
torch._C._AutoDispatchBelowADInplaceOrView(), and for one call made again after a registration changed its operator.
"""

import torch

C = torch._C


def name_of(op) -> str:
    """'aten::mm' or 'aten::add.Tensor': the name torch._C._dispatch_dump_table takes."""
    schema = op._schema
    return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")


def is_backend(key) -> bool:
    """CPU, CUDA, Meta, SparseCPU, ...: the keys whose kernels compute instead of handing the call on."""
    return C.DispatchKey.StartOfDenseBackends.value < key.value <= C.DispatchKey.EndOfNestedTensorBackends.value


def kernels(op, *args) -> list[str]:
    keyset = C.DispatchKeySet(C.DispatchKey.Undefined)
    for arg in args:
        for tensor in arg if isinstance(arg, (list, tuple)) else [arg]:  # a Tensor[] argument's tensors count too
            if isinstance(tensor, torch.Tensor):
                keyset = keyset | C._dispatch_keys(tensor)
    keyset = (keyset | C._dispatch_tls_local_include_set()) - C._dispatch_tls_local_exclude_set()
    table = C._dispatch_dump_table(name_of(op)).splitlines()
    listed = {line.split(":")[0] for line in table}  # keys with an entry
    math_kernels = {line.split(":")[0] for line in table if line.endswith("[math kernel]")}
    path = []
    while (key := keyset.highestPriorityTypeId()) != C.DispatchKey.Undefined:
        name = C._dispatch_key_name(key)
        row = next((line for line in table if line.startswith(f"{name}:")), "")
        if row and not row.split(": ", 1)[1].startswith("fallthrough"):  # its kind, not a file name that says so
            path.append(name)
            if is_backend(key):
                break
            if name in math_kernels:  # it calls other operators, each with a walk of its own
                break
        if name not in listed:  # no entry: the dispatcher raises "could not run" here
            break
        keyset = keyset & C._dispatch_keyset_full_after(key)
    return path
