"""Exercise 00.walk (hard): the dispatcher's walk, by hand.

Write `kernels(op, *args, **kwargs)`: the dispatch keys whose kernels the dispatcher calls for op(*args, **kwargs), here
and now, highest priority first. Use torch._C's functions, as lesson 00's "Underneath trace.call" does, not
helpers.trace. The check compares your list with the dispatcher's for aten's and the workbook's operators and operators
defined from Python, composite, in-place and view ones, factory functions (given a device, a layout, jagged too, a
quantized dtype or both, or neither) and an operator with no tensor argument at all (under the Python dispatcher too;
and one whose keyset runs out though it has tensors) included, on CPU, meta (and factories for every device type torch
names: CUDA, XPU, MPS, HPU, MTIA, XLA, Lazy, MAIA, IPU, VE, HIP, FPGA, Vulkan (with a vendor's kernel at some of their
keys), OpenGL, OpenCL, IDEEP and MKLDNN (which have none) and PrivateUse1, under its own name and the name an
out-of-tree backend gives it with torch.utils.rename_privateuse1_backend, as lesson 09 does), sparse (COO and CSR),
nested and conjugated complex tensors, mixed ones, lists and tuples of them and tensors given by keyword (not numbers
given for a Tensor argument, which the call wraps in a tensor of its own; a tensor given for an int argument brings no
keys), inside torch.no_grad(), torch.inference_mode(), torch.autocast("cpu"), torch.device("meta") and after
torch.set_default_device("meta"), a TorchDispatchMode that hands each call on (what a mode such as FakeTensorMode does
with a call is its own Python code: lesson 10), torch._C._AutoDispatchBelowADInplaceOrView(), Meta in the thread's
include set (torch._C._IncludeDispatchKeyGuard, as FakeTensorMode runs a kernel; a factory too) and in its exclude set
(a factory too), a level of torch.func.vmap (as torch.func's transforms enter; aten::linear and
binary_cross_entropy_with_logits too, and the batched tensor vmap hands a function) and torch's Python dispatcher
(torch._dispatch.python.enable_python_dispatcher(), as torch.compile's tracing enters: its key is listed once, at the
top), each alone, and for five calls made again after a registration changed their tables (one of them aten's; one after
a library was destroyed and another registered; one after a backend fallback was registered, for every operator; one
after a library was garbage-collected). Asking must not make the call, and a call the dispatcher refuses (a key of its
keyset with no kernel) is answered too: with the keys whose kernels run before the refusal. (Autocast inside a mode or a
vmap level is not asked: there, autocast's kernel calls the operator anew, and the keys above it run a second time,
lesson 00, section 4; a walk down one keyset, as trace.predict's, lists them once. Nor is an operator's own
BackendSelect kernel, as prims' factories register from Python: it computes the call itself, lesson 00, section 2.)
"""

import torch

C = torch._C


def name_of(op) -> str:
    """'aten::mm' or 'aten::add.Tensor': the name torch._C._dispatch_dump_table takes."""
    schema = op._schema
    return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")


def is_backend(key) -> bool:
    """CPU, CUDA, Meta, SparseCPU, ...: the keys whose kernels compute instead of handing the call on. Most are one
    functionality for one backend, in a range of c10's DispatchKey enum; a few stand alone (c10/core/DispatchKey.h)."""
    return (C.DispatchKey.StartOfDenseBackends.value < key.value <= C.DispatchKey.EndOfNestedTensorBackends.value
            or C._dispatch_key_name(key) in ("FPGA", "Vulkan", "Metal", "MkldnnCPU"))


# The devices with a key of every per-backend functionality (C10_FORALL_BACKEND_DEVICE_TYPES,
# torch/headeronly/core/DeviceType.h): only these have Quantized, Sparse and SparseCsr keys.
PER_BACKEND = ("CPU", "CUDA", "HIP", "XLA", "MPS", "IPU", "XPU", "HPU", "VE", "Lazy", "Meta", "MTIA", "PrivateUse1")


def backend_selected(op, args, kwargs, from_tensors) -> "C.DispatchKeySet | None":
    """What a BackendSelect kernel hands the call on with: the backend key of the device, layout and dtype arguments
    (CPU where no device is given; c10::computeDispatchKey), with the tensors' keys where there are any
    (torchgen/gen.py, ComputeBackendSelect). None where computeDispatchKey refuses them: the kernel raises."""
    given = {**dict(zip((argument.name for argument in op._schema.arguments), args)), **kwargs}
    device = torch.device(given.get("device") or "cpu")
    try:
        backend = C._dispatch_key_for_device(device.type)
    except (RuntimeError, NotImplementedError):  # a device type with no key (opengl, mkldnn, ...): the kernel raises
        return None
    layout = given.get("layout") or torch.strided
    if layout == torch.jagged:  # c10::computeDispatchKey takes a jagged layout as a strided one: the dense key
        layout = torch.strided
    if layout == torch._mkldnn:
        if backend != "CPU":
            return None
        backend = "MkldnnCPU"
    elif layout != torch.strided:
        if backend not in PER_BACKEND:  # a sparse layout on MAIA, FPGA or Vulkan: no such key
            return None
        backend = ("Sparse" if layout == torch.sparse_coo else "SparseCsr") + backend
    elif given.get("dtype") in (torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4):
        if backend in PER_BACKEND:  # MAIA, FPGA and Vulkan have no Quantized key: their dense one
            backend = "Quantized" + backend  # a quantized dtype: the device's Quantized key
    # torch._C parses MkldnnCPU but not QuantizedMeta; its enum has QuantizedMeta but not MkldnnCPU.
    key = C._parse_dispatch_key(backend)
    selected = C.DispatchKeySet(key if key is not None else getattr(C.DispatchKey, backend))
    if from_tensors.highestPriorityTypeId() == C.DispatchKey.Undefined:
        return selected
    return (selected | from_tensors | C._dispatch_tls_local_include_set()) - C._dispatch_tls_local_exclude_set()


def tensor_arguments(op, args, kwargs) -> list:
    """The arguments whose keys the dispatcher reads: those op's schema types Tensor, Tensor?, Tensor[] or Tensor?[]
    (c10's DispatchKeyExtractor). A tensor given for an int (torch.ops takes a 0-dim one) is read as the int."""
    given = {**dict(zip((argument.name for argument in op._schema.arguments), args)), **kwargs}
    return [given[argument.name] for argument in op._schema.arguments
            if argument.name in given and "Tensor" in str(argument.type)]


def kernels(op, *args, **kwargs) -> list[str]:
    keyset = C.DispatchKeySet(C.DispatchKey.Undefined)
    for arg in tensor_arguments(op, args, kwargs):  # keyword arguments count too
        for tensor in arg if isinstance(arg, (list, tuple)) else [arg]:  # a Tensor[] argument's tensors count too
            if isinstance(tensor, torch.Tensor):
                keyset = keyset | C._dispatch_keys(tensor)
    from_tensors = keyset  # what a BackendSelect kernel hands on beside the backend's key
    keyset = (keyset | C._dispatch_tls_local_include_set()) - C._dispatch_tls_local_exclude_set()
    table = C._dispatch_dump_table(name_of(op)).splitlines()
    listed = {line.split(":")[0] for line in table}  # keys with an entry
    # What composite alias keys fill (CompositeImplicitAutograd, ...NestedTensor, FuncTorchBatchedDecomposition):
    # kernels that call other operators.
    math_kernels = {line.split(":")[0] for line in table
                    if line.endswith(("[math kernel]", "[nested kernel]", "[batched kernel]"))}
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
            if name == "FuncTorchDynamicLayerFrontMode" and row.endswith("[kernel]"):  # functorch computes the
                break  # operator from others there, inside vmap (not its fallback, which hands the call on)
            if name == "BackendSelect":  # a factory's: it picks the backend and hands the call on to it
                keyset = backend_selected(op, args, kwargs, from_tensors)
                if keyset is None:  # its kernel refuses the arguments: no kernel below it runs
                    break
        if name not in listed:  # no entry: the dispatcher raises "could not run" here
            break
        # On to the keys below. The mask keeps PythonDispatcher (torch.compile's tracing), which every redispatch goes
        # back through: listed once, at the top.
        keyset = (keyset & C._dispatch_keyset_full_after(key)) - C.DispatchKeySet(C.DispatchKey.PythonDispatcher)
        if name.startswith("Autograd") and name in path:  # its kernel ran: it hands on below every autograd key
            keyset = keyset & C._after_autograd_keyset
    else:  # no key left and nothing ended the call: the table's Undefined entry (no tensor argument, say)
        if "Undefined" in listed:
            path.append("Undefined")
    return path
