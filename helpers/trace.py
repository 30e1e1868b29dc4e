"""See the dispatcher's path for one call: predicted from the rules, and recorded by the kernels.

    from helpers import trace
    t = trace.call(torch.ops.workbook.add, x, y)
    t.predicted   # keys the dispatcher will visit, worked out in Python before the call
    t.recorded    # keys whose kernels ran, as logged by csrc/trace.h during the call
    t.result      # what the op returned

The prediction reads the dispatcher's own state, so it works for any operator, native aten ops included (there,
only the prediction is available):

1. The keyset: the union of the dispatch keys of every tensor argument, plus the thread-local
   *include* set, minus the thread-local *exclude* set (autocast and inference_mode change these).
2. The op's computed dispatch table: for each key, a kernel, a fallthrough, or nothing.
3. The walk: take the highest-priority key. A fallthrough is skipped. A kernel is called; if it is
   a wrapper (autograd, autocast, ...) it hands the call on to the keys after its own (autograd by
   redispatching, past every autograd key; autocast by excluding its key and calling the op again, which
   reaches the same keys), so the walk continues with `keyset & full_after(key)`, and after an autograd
   kernel `& after_autograd_keyset`. A backend kernel (CPU, CUDA, Meta,
   ...) ends it, and so does a composite ("math") kernel, whose calls to other ops each walk anew.
   A key with no kernel ends it with the dispatcher's "could not run" error. At the Python key the walk names the
   mode, subclass or rule that takes the call (_python_handler) and follows FakeTensorMode to the Meta kernel; a
   keyset that runs out with nothing to end the call takes the table's Undefined entry.

Step 3 assumes that every wrapper hands the call on to the next key. The workbook's kernels do; torch's
own may set thread-local guards that change the walks of the calls made *inside* the kernels below them (its
autograd kernels set AutoDispatchBelowADInplaceOrView, yet their redispatch keyset, ks & after_autograd_keyset,
still holds ADInplaceOrView), so for a native op read the prediction as "the keys the dispatcher routes
through", not a recording.

This file needs only torch, and plot.py only this file and matplotlib: copy the two into your own
project to trace your own operators (README: "Using this in your own project"). Recording needs
csrc/trace.h in your kernels and csrc/trace_ops.cpp in your extension.

What it relies on that torch does not promise: torch._C's private dispatcher functions (_dispatch_keys,
_dispatch_tls_local_include_set / _exclude_set, _dispatch_keyset_full_after, _dispatch_key_name,
_dispatch_get_all_op_names, _get_tracing_state / _set_tracing_state), and the text of _dispatch_dump_table, which it
parses line by line ("Key: kernel [file:line]", "fallthrough"). Tested with torch 2.13, 2.14 and 2.15 (make test, and
make test TORCH=2.13.0 or TORCH=2.14.1); a torch that changes them fails tests/test_trace.py first.
"""

from __future__ import annotations

import functools
import os
import re
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

C = torch._C

# Which kernels are "ours" (drawn green, checked against the recording): those registered from a file
# under OURS, where it is set (in the workbook, its csrc/). Otherwise, those registered from a file that
# exists on this machine outside torch's package: torch's own C++ kernels carry paths of the machine that
# built torch (/__w/pytorch/...), its Python ones lie in torch/.
try:
    from .paths import CSRC as OURS
except ImportError:  # copied alone into your project
    OURS: Path | None = None
_TORCH_PACKAGE = os.path.dirname(torch.__file__)

EMPTY_KEYSET = C.DispatchKeySet(C.DispatchKey.Undefined)


# ---------------------------------------------------------------------------------------------
# Keys and keysets


def keys_after(key: C.DispatchKey) -> C.DispatchKeySet:
    """The keys below `key`: the mask a kernel at `key` hands a call on with, less PythonDispatcher. c10's mask
    (DispatchKeySet's FULL_AFTER constructor, c10/core/DispatchKeySet.h) always keeps that key, the top one, which
    torch.compile's and export's tracing turn on: under torch's Python dispatcher every redispatch goes back through it,
    its kernel running again before each kernel below (tests/test_trace.py shows the kernels' keysets). A walk lists
    it once, at the top, then drops it, or it would pick it again forever."""
    return C._dispatch_keyset_full_after(key) - C.DispatchKeySet(C.DispatchKey.PythonDispatcher)


def key_names(keyset: C.DispatchKeySet) -> list[str]:
    """The keys a walk down a keyset picks, highest priority first: one per functionality (with several backends, the
    highest one's: a keyset of a CPU and a meta tensor walks AutogradMeta, then Meta)."""
    names = []
    # Removing keys can leave backend bits behind, so "empty" means: no key left to pick.
    while (key := keyset.highestPriorityTypeId()) != C.DispatchKey.Undefined:
        names.append(C._dispatch_key_name(key))
        keyset = keyset & keys_after(key)
    return names


# Backend keys that c10 keeps outside the per-backend ranges (c10/core/DispatchKey.h: "TODO: put this in
# BackendComponents"); Python's enum names none of them.
STANDALONE_BACKEND_KEYS = ("FPGA", "Vulkan", "Metal", "MkldnnCPU")


def is_backend_key(name: str) -> bool:
    """CPU, CUDA, Meta, SparseCPU, MkldnnCPU, ...: keys whose kernels compute rather than hand on.

    In c10's DispatchKey enum these are the runtime keys from the first dense backend (CPU) to the
    last nested-tensor backend (Autograd<Backend> keys come after them), and the few that stand alone.
    """
    if name in STANDALONE_BACKEND_KEYS:
        return True
    key = getattr(C.DispatchKey, name, None)
    if key is None:  # keys Python's enum leaves unnamed (Tracer) are not backends
        return False
    value = key.value
    return C.DispatchKey.StartOfDenseBackends.value < value <= C.DispatchKey.EndOfNestedTensorBackends.value


def _tensors(values) -> list[torch.Tensor]:
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(_tensors(value))
    return found


@dataclass
class Keyset:
    """How the dispatcher computes the keyset of a call, term by term."""

    from_tensors: C.DispatchKeySet
    tls_include: C.DispatchKeySet
    tls_exclude: C.DispatchKeySet

    @property
    def effective(self) -> C.DispatchKeySet:
        return (self.from_tensors | self.tls_include) - self.tls_exclude

    @property
    def excluded(self) -> list[str]:
        """Keys the tensors or the include set bring that the exclude set takes away."""
        present = key_names(self.from_tensors | self.tls_include)
        remaining = set(key_names(self.effective))
        return [name for name in present if name not in remaining]

    def __repr__(self) -> str:
        return (
            f"tensors:     {', '.join(key_names(self.from_tensors))}\n"
            f"+ include:   {', '.join(key_names(self.tls_include)) or '-'}\n"
            f"- exclude:   {', '.join(self.excluded) or '-'}   (the excluded keys that matter here)\n"
            f"= effective: {', '.join(key_names(self.effective))}"
        )


def tensor_arguments(op, args, kwargs) -> list:
    """The arguments of op(*args, **kwargs) whose keys the dispatcher reads: those its schema types Tensor, Tensor?,
    Tensor[] or Tensor?[] (c10's DispatchKeyExtractor). A tensor given for an int or a number is read as that number,
    and brings no keys. (An op given by name: every argument.)"""
    if isinstance(op, torch._ops.OpOverloadPacket) and "default" in op.overloads():
        op = op.default
    schema = getattr(op, "_schema", None)
    if schema is None:
        return [*args, *kwargs.values()]
    given = {**dict(zip((argument.name for argument in schema.arguments), args)), **kwargs}
    return [given[argument.name] for argument in schema.arguments
            if argument.name in given and "Tensor" in str(argument.type)]


def keyset_of(*args, **kwargs) -> Keyset:
    """The keyset the dispatcher computes for a call with these arguments, in this thread, now (every tensor among
    them counted: for an operator's call, pass tensor_arguments(op, args, kwargs))."""
    from_tensors = EMPTY_KEYSET
    for tensor in _tensors(list(args) + list(kwargs.values())):
        from_tensors = from_tensors | C._dispatch_keys(tensor)
    return Keyset(from_tensors, C._dispatch_tls_local_include_set(), C._dispatch_tls_local_exclude_set())


# ---------------------------------------------------------------------------------------------
# Dispatch tables


@dataclass
class Entry:
    """One row of an operator's computed dispatch table."""

    key: str
    kind: str  # "kernel", "autograd kernel", "backend fallback", "math kernel", ...
    fallthrough: bool
    registered_at: str  # "file:line"

    @property
    def ours(self) -> bool:
        """Registered by our code, not torch's (see OURS)."""
        path = self.registered_at.rpartition(":")[0]
        if OURS is not None:
            return path.startswith(f"{OURS}{os.sep}")
        return os.path.isabs(path) and os.path.exists(path) and not path.startswith(_TORCH_PACKAGE)

    @property
    def where(self) -> str:
        """Where it was registered, short: csrc/cpu.cpp:123 (under OURS, from its folder's name), python_ops.py:93
        (another file of this machine), or, for torch's own registrations, the file alone (VariableType_2.cpp): the file
        says what registered the kernel, and torch's line numbers move with every release."""
        path, _, line = self.registered_at.rpartition(":")
        if not path:
            return self.registered_at
        if OURS is not None and self.ours:
            return f"{OURS.name}/{os.path.relpath(path, OURS)}:{line}"
        if os.path.isabs(path) and os.path.exists(path) and not path.startswith(_TORCH_PACKAGE):
            return f"{os.path.basename(path)}:{line}"
        return os.path.basename(path)


def op_name(op) -> str:
    """'workbook::add' or 'aten::add.Tensor' from an op, an overload packet or a name."""
    if isinstance(op, str):
        return op
    if isinstance(op, torch._ops.OpOverloadPacket):
        if "default" not in op.overloads():
            raise ValueError(f"{op} has overloads {op.overloads()}; pass one, e.g. {op}.{op.overloads()[0]}")
        op = op.default
    schema = op._schema
    return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")


def short_name(op) -> str:
    """'add' from 'workbook::add' or 'aten::add.Tensor': the name a kernel logs with trace.h's Scope."""
    return op_name(op).split("::")[-1].split(".")[0]


# "registered at file:line", or "registered by RegisterOperators" for the legacy C++ API (torch's own _test:: ops).
_ENTRY = re.compile(r"^(\w+): (fallthrough )?registered (?:at|by) (.*) \[(.+)\]$")
# The kinds of entry a composite alias key fills: the kernel calls other operators, each with a walk of its own, and
# never hands the call on (CompositeImplicitAutograd, ...NestedTensor, FuncTorchBatchedDecomposition;
# aten/src/ATen/core/dispatch/OperatorEntry.cpp, computeDispatchTableEntryWithDebug).
DECOMPOSITIONS = ("math kernel", "nested kernel", "batched kernel")


def dispatch_table(op) -> dict[str, Entry]:
    """The op's computed dispatch table: every key that has a kernel or a fallthrough."""
    table = {}
    for line in C._dispatch_dump_table(op_name(op)).splitlines():
        match = _ENTRY.match(line.strip())
        if match:
            key, fallthrough, where, kind = match.groups()
            table[key] = Entry(key, kind, bool(fallthrough), where)
    return table


# ---------------------------------------------------------------------------------------------
# The walk


@dataclass
class Step:
    key: str
    status: str  # "kernel", "fallthrough", "excluded", "missing", "not reached"
    entry: Entry | None = None
    handled_by: str = ""  # at the Python key: the mode or tensor subclass whose __torch_dispatch__ takes the call


def predict(op, *args, **kwargs) -> list[Step]:
    """Every key of the call's keyset, in priority order, with what the dispatcher does there. A kernel the walk
    cannot see into is taken to end the call where torch's own do: a BackendSelect kernel other than torchgen's, a
    functorch hack at FuncTorchDynamicLayerFrontMode; the Python key's handler is asked (_python_handler)."""
    keys = keyset_of(*tensor_arguments(op, args, kwargs))
    table = dispatch_table(op)
    steps: list[Step] = [Step(name, "excluded", table.get(name)) for name in keys.excluded]
    remaining = keys.effective
    ended = False
    while (key := remaining.highestPriorityTypeId()) != C.DispatchKey.Undefined:
        name = C._dispatch_key_name(key)
        entry = table.get(name)
        step = Step(name, "kernel", entry)
        if ended:
            step.status = "not reached"
        elif entry is None:
            step.status, ended = "missing", True
        elif entry.fallthrough:
            step.status = "fallthrough"
        else:
            ended = is_backend_key(name) or entry.kind in DECOMPOSITIONS
        steps.append(step)
        remaining = remaining & keys_after(key)
        if step.status == "kernel" and name.startswith("Autograd"):
            # An autograd kernel hands the call on below every autograd key, not only below its own (ks &
            # after_autograd_keyset in torch's generated kernels and its autograd fallback; the workbook's exclude
            # every autograd key and call again): a nested tensor's keyset holds AutogradCPU below
            # AutogradNestedTensor, and its kernel is skipped.
            masked = remaining - (remaining & C._after_autograd_keyset)
            steps += [Step(name, "not reached", table.get(name)) for name in key_names(masked)]
            remaining = remaining & C._after_autograd_keyset
        if name == "BackendSelect" and step.status == "kernel":
            if entry.registered_at.rpartition(":")[0].endswith(GENERATED_BACKEND_SELECT):
                selected = _backend_selected(op, keys, args, kwargs)
                ended = selected is None  # the kernel itself refuses the arguments: nothing below it runs
                remaining = (selected or EMPTY_KEYSET) & keys_after(key)
            else:  # a kernel of the operator's own, not torchgen's: assumed to end the call, as every such kernel of
                ended = True  # torch's does (the prims' _backend_select_impl in torch/_prims/__init__.py computes it)
        elif name == "FuncTorchDynamicLayerFrontMode" and step.status == "kernel" and entry.kind == "kernel":
            # A kernel of the operator's own there, not functorch's fallback: one of functorch's "hacks"
            # (aten/src/ATen/functorch/PyTorchOperatorHacks.cpp: linear, the dropouts), which compute the operator
            # from others inside a transform, and never hand it on.
            ended = True
        elif name == "Python" and step.status == "kernel":
            step.handled_by, below = _python_handler(op, args, kwargs)
            ended = below is None
            if below is not None:
                remaining = (remaining | below) & keys_after(key)
    steps = sorted(steps, key=functools.cmp_to_key(_by_priority))
    if not ended:
        # No key left, and no kernel that ends the call: the dispatcher takes the table's Undefined entry, which a
        # composite kernel fills (an operator with no tensor argument, such as one that takes only ints, lands here).
        undefined = table.get("Undefined")
        steps.append(Step("Undefined", "kernel" if undefined else "missing", undefined))
    return steps


def _by_priority(a: Step, b: Step) -> int:
    """Which of two keys the dispatcher tries first: the one the other is among the keys after (a keyset of both would
    merge two backends' keys: AutogradCPU with Meta reads as AutogradMeta). Two backends of one kind: neither."""
    first, second = dispatch_key(a.key), dispatch_key(b.key)
    return -1 if keys_after(first).has(second) else 1 if keys_after(second).has(first) else 0


def _python_handler(op, args, kwargs) -> tuple[str, C.DispatchKeySet | None]:
    """Who takes a call at the Python key, and the keys it brings to the call it makes below (None: it ends the call
    in Python, no kernel below runs).

    The Python key's kernel, a fallback for every operator (aten/src/ATen/core/PythonFallbackKernel.cpp,
    pythonFallback), hands the call to the handlers in torch's order (Note [__torch_dispatch__ dispatching order] in
    torch/csrc/utils/python_arg_parser.cpp): the user modes, the one entered last first; the arguments' tensor
    subclasses; then torch's own "infra" modes (FakeTensorMode, FunctionalTensorMode, make_fx's proxy mode), which
    stay below the user modes whenever they were entered. What each does is Python code; this says what two kinds do:
    - a user mode or subclass, or a rule registered for the operator and its class with
      torch.library.register_torch_dispatch: assumed to call the operator again (`func(*args, **kwargs)`) with itself
      popped, so the call goes on to the next handler, or below Python when none is left. (A subclass calls it on the
      tensors it wraps, whose own keys then decide: a walk of their own, not followed here.)
    - FakeTensorMode (or a FakeTensor's class): a fake kernel registered with torch.library.register_fake runs in
      Python, and ends the call; else, if the operator has a kernel at Meta, it calls the operator again with Meta in
      the thread's include set, so the call goes on to the Meta kernel (torch/_subclasses/fake_tensor.py,
      FakeTensorMode._dispatch_impl and in_kernel_invocation_manager).
    """
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    stack = _get_current_dispatch_mode_stack()  # torch keeps infra modes at the bottom, the next to run at the end
    users = [mode for mode in reversed(stack) if not type(mode).is_infra_mode()]
    infra = [mode for mode in reversed(stack) if type(mode).is_infra_mode()]
    subclasses = list(dict.fromkeys(type(t) for t in _tensors(list(args) + list(kwargs.values()))
                                    if type(t).__torch_dispatch__ is not torch.Tensor.__torch_dispatch__))
    registered = torch._library.simple_registry.singleton.find(op_name(op))  # what torch.library keeps in Python
    labels = []
    for handler in users + [s for s in subclasses if s is not FakeTensor] + infra + [s for s in subclasses
                                                                                     if s is FakeTensor]:
        owner = handler if isinstance(handler, type) else type(handler)
        if (rule := registered.torch_dispatch_rules.find(owner)) is not None:  # found by the exact class
            labels.append(f"{getattr(rule, '__name__', 'a rule')} (register_torch_dispatch)")
        elif isinstance(handler, FakeTensorMode) or handler is FakeTensor:
            if registered.fake_impl.kernel is not None:
                return " -> ".join(labels + ["FakeTensorMode: its fake kernel"]), None
            if C._dispatch_has_computed_kernel_for_dispatch_key(op_name(op), "Meta"):
                return " -> ".join(labels + ["FakeTensorMode: on to Meta"]), C.DispatchKeySet(C.DispatchKey.Meta)
            return " -> ".join(labels + ["FakeTensorMode: no fake kernel"]), None
        else:
            labels.append(f"{owner.__name__}.__torch_dispatch__")
    return " -> ".join(labels) or "nothing: no mode, no subclass", EMPTY_KEYSET


QUANTIZED_DTYPES = (torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4)


def dispatch_key(name: str) -> C.DispatchKey:
    """The key named `name`. torch._C parses most names but not all (QuantizedMeta: None), and its enum names most
    keys but not all (MkldnnCPU has no attribute): either way, one of them knows it."""
    key = C._parse_dispatch_key(name)
    return key if key is not None else getattr(C.DispatchKey, name)


GENERATED_BACKEND_SELECT = "RegisterBackendSelect.cpp"  # torchgen's BackendSelect kernels, one file of aten's build

# c10::computeDispatchKey (c10/core/TensorOptions.h) gives a quantized, a sparse and a sparse compressed key only to the
# devices with a key of every per-backend functionality (C10_FORALL_BACKEND_DEVICE_TYPES,
# torch/headeronly/core/DeviceType.h); FPGA, MAIA and Vulkan have a dense key only.
PER_BACKEND_KEYS = ("CPU", "CUDA", "HIP", "XLA", "MPS", "IPU", "XPU", "HPU", "VE", "Lazy", "Meta", "MTIA", "PrivateUse1")


def _backend_selected(op, keys: Keyset, args, kwargs) -> C.DispatchKeySet | None:
    """The keyset a BackendSelect kernel hands the call on with. Such kernels exist for operators that take a device,
    layout and dtype (factory functions: torch.empty, torch.ones): the kernel computes the backend key from those
    arguments, c10::computeDispatchKey in c10/core/TensorOptions.h (CPU where no device is given:
    torch.set_default_device sets the argument of torch's Python functions, such as torch.empty, not this default; a
    quantized dtype on a strided layout: the device's Quantized key, where it has one), and redispatches with that key
    alone, or, where the operator also takes tensors, with their keys and the thread's include set too, less its
    exclude set (torchgen/gen.py, ComputeBackendSelect). None where computeDispatchKey refuses the arguments (a sparse
    layout on MAIA, any layout on the mkldnn device type): the BackendSelect kernel raises, and nothing below it runs."""
    schema = op._schema if not isinstance(op, str) else C._get_schema(*(op_name(op).split(".") + [""])[:2])
    given = {argument.name: value for argument, value in zip(schema.arguments, args)} | kwargs
    device = torch.device(given.get("device") or "cpu")
    layout = given.get("layout") or torch.strided
    try:
        backend = C._dispatch_key_for_device(device.type)  # CPU, CUDA, Meta, PrivateUse1, ...
    except (RuntimeError, NotImplementedError):  # computeDispatchKey's own refusal (mkldnn, opengl, ...)
        return None
    per_backend = backend in PER_BACKEND_KEYS
    if layout == torch.sparse_coo:
        backend = f"Sparse{backend}" if per_backend else None
    elif layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc):
        backend = f"SparseCsr{backend}" if per_backend else None
    elif layout == torch._mkldnn:
        backend = "MkldnnCPU" if backend == "CPU" else None
    elif given.get("dtype") in QUANTIZED_DTYPES and per_backend:  # c10's isQIntType; strided and jagged layouts
        backend = f"Quantized{backend}"
    if backend is None:
        return None
    selected = C.DispatchKeySet(dispatch_key(backend))
    if keys.from_tensors == EMPTY_KEYSET:
        return selected
    return (selected | keys.from_tensors | keys.tls_include) - keys.tls_exclude


def path(steps: list[Step], ours_only: bool = False) -> list[str]:
    """The keys whose kernels run, in order (optionally only the workbook's own kernels)."""
    return [s.key for s in steps if s.status == "kernel" and (not ours_only or s.entry.ours)]


# ---------------------------------------------------------------------------------------------
# Recording


@dataclass
class Event:
    """One kernel that ran, as csrc/trace.h logged it."""

    op: str
    key: str
    keyset: list[str]
    depth: int
    dtypes: list[str]


def _parse_events(text: str) -> list[Event]:
    events = []
    for line in text.splitlines():
        op, key, keyset, depth, dtypes = line.split("\t")
        keys = keyset[len("DispatchKeySet(") : -1].split(", ") if keyset != "DispatchKeySet()" else []
        events.append(Event(op, key, keys, int(depth), dtypes.split(",") if dtypes else []))
    return events


def recorder_loaded() -> bool:
    return hasattr(torch.ops, "workbook_trace") and "workbook_trace::stop" in C._dispatch_get_all_op_names()


@contextmanager
def recording():
    """Record every workbook kernel that runs inside the block: `with recording() as events: ...`"""
    if not recorder_loaded():
        raise RuntimeError("The trace recorder is not loaded: run helpers.build.load('schemas') first.")
    events: list[Event] = []
    with _unseen():
        torch.ops.workbook_trace.start()
    try:
        yield events
    finally:
        with _unseen():
            events.extend(_parse_events(torch.ops.workbook_trace.stop()))


@contextmanager
def _unseen():
    """Keep the recorder's own calls out of what it records: out of a torch.jit.trace graph (lesson 08 records inside
    one), and away from TorchDispatchModes (lesson 10 records inside them). _DisableTorchDispatch excludes the Python
    and PythonTLSSnapshot keys, where modes are called; trace.h does the same for the call its kernels make."""
    state = C._get_tracing_state()
    C._set_tracing_state(None)
    try:
        with C._DisableTorchDispatch():
            yield
    finally:
        C._set_tracing_state(state)


@dataclass
class Trace:
    op: str
    keyset: Keyset
    predicted: list[Step]
    recorded: list[Event] = field(default_factory=list)
    result: Any = None
    error: Exception | None = None

    @property
    def predicted_path(self) -> list[str]:
        return path(self.predicted)

    @property
    def recorded_path(self) -> list[str]:
        """The keys of this operator's own kernels that ran, in order."""
        return [e.key for e in self.own_events]

    def is_own(self, event: Event) -> bool:
        """Whether a kernel of the called operator itself logged `event`: the workbook's kernels log the operator's
        short name ("add"), lesson 09's device kernels aten's full one ("aten::add.Tensor")."""
        return event.op in (short_name(self.op), self.op)

    @property
    def own_events(self) -> list[Event]:
        """The recorded kernels of the called operator itself."""
        return [e for e in self.recorded if self.is_own(e)]

    @property
    def nested(self) -> list[Event]:
        """Kernels of other operators that ran inside this call (mean's kernel calls sum: sum's)."""
        return [e for e in self.recorded if not self.is_own(e)]

    @property
    def agrees(self) -> bool:
        """Our kernels of the called operator ran exactly where the prediction put them."""
        return path(self.predicted, ours_only=True) == self.recorded_path

    def __repr__(self) -> str:
        marks = {"kernel": "->", "fallthrough": "  skip", "excluded": "  excluded", "missing": "!! missing",
                 "not reached": "  ."}
        rows = [f"{self.op}"]
        for step in self.predicted:
            who = f"  [{step.entry.where}]" if step.entry and step.status == "kernel" else ""
            who += f"  {step.handled_by}" if step.handled_by else ""
            rows.append(f"  {marks[step.status]:<11} {step.key}{who}")
        rows.append(f"  predicted: {' -> '.join(self.predicted_path) or '(none)'}")
        if recorder_loaded():
            shown = [f"{'' if self.is_own(e) else e.op + '@'}{e.key}({','.join(e.dtypes)})" for e in self.recorded]
            rows.append(f"  recorded:  {' -> '.join(shown) or '(none of our kernels ran)'}")
            if self.nested:
                rows.append(f"  nested:    {', '.join(dict.fromkeys(e.op for e in self.nested))} "
                            "(other operators' kernels, called from inside this one)")
        if self.error is not None:
            rows.append(f"  error:     {type(self.error).__name__}: {str(self.error).splitlines()[0]}")
        return "\n".join(rows)


def call(op, *args, **kwargs) -> Trace:
    """Predict the path of `op(*args, **kwargs)`, then call it while recording.

    A call that raises is kept in `.error` rather than raised, so the trace of a failing call
    (a missing kernel, a bad argument) can be looked at and plotted too.
    """
    if isinstance(op, str):
        raise TypeError("pass the op itself (e.g. torch.ops.workbook.add), not its name, to call it")
    result = Trace(op_name(op), keyset_of(*tensor_arguments(op, args, kwargs)), predict(op, *args, **kwargs))
    events: list[Event] = []
    try:
        with recording() if recorder_loaded() else nullcontext(events) as events:
            result.result = op(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - kept on the trace, shown by repr and plots
        result.error = error
    result.recorded = events
    return result


# ---------------------------------------------------------------------------------------------
# Counting operator calls


class _OpCalls(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


@contextmanager
def op_calls():
    """Names of the operators called inside the block, in order: `with op_calls() as names: ...`.

    A TorchDispatchMode sees each call when it reaches the Python key, which sits below Autocast and
    Autograd. So it sees the casts an autocast kernel makes (aten._to_copy.default) and the call it
    hands on; it does not see the calls made inside a call it has already seen (the mode is off
    while it runs one).
    """
    with _OpCalls() as mode:
        yield mode.names
