"""The checks of the exercises: one function per exercise, given the path of the file to check, returning a Result
(passed, and a diagnosis). exercises/runner.py runs each in a process of its own.

A diagnosis says what happened instead of what the exercise asks, and where in the lesson to look; never the answer.
Each check tries every case its task names. tests/test_exercises.py and test_exercise_mistakes.py prove, for every
exercise, that the skeleton fails, every mistake in mistakes/ fails with the diagnosis it names, and the solution
passes.
"""

from __future__ import annotations

import ast
import inspect
import math
import random
import re
import sys
import traceback
import warnings
import weakref
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from helpers import build, device, shipping, trace

from .toolkit import (Result, call_path, compare_paths, exercise, first_difference, keyset_change, load_cpp,
                      load_python, mentions, now_doing, operator, process_settings, process_settings_changes,
                      read_literal, thread_state, thread_state_changes)

FALLBACK_WARNING = "an autograd kernel was not registered"


def _problems(problems: list[str], passed: str) -> Result:
    return Result(not problems, "\n".join(problems) if problems else passed)


# ---------------------------------------------------------------------------------------------
# 00: paths


@exercise("00.predict_path", "easy")
def predict_path(path: Path) -> Result:
    build.load_all("schemas", "cpu")
    x, y = torch.ones(3, requires_grad=True), torch.ones(3)
    with torch.no_grad():
        steps = trace.predict(torch.ops.workbook.add, x, y)
    actual = trace.path(steps)
    answer = list(read_literal(path, "PATH", "a list of dispatch key names, each in quotes", lambda value: isinstance(
        value, list) and all(isinstance(key, str) for key in value)))
    if unknown := [key for key in answer if torch._C._parse_dispatch_key(key) is None]:
        return Result(False, f"{unknown[0]!r} is not the name of a dispatch key (names are case-sensitive): write the "
                             "keys as lesson 00, section 1 prints them.")
    if several := [key for key in answer if not _is_runtime_key(key)]:
        return Result(False, f"{several[0]!r} names a functionality or an alias, which stands for several keys: the "
                             "dispatcher calls each kernel at one key of the call's keyset (lesson 00, section 1: the "
                             "keys a tensor carries).")
    # Where to look depends on what the dispatcher does at the reader's first wrong key, unless the reader left out a
    # kernel that runs: then the mistake is about what no_grad does.
    i = first_difference(answer, actual)
    status = next((step.status for step in steps if i is not None and step.key == answer[i]), None)
    if i is not None and actual[i] not in answer:
        status = None
    where_to_look = {"fallthrough": "lesson 00, sections 3 and 4: what the dispatcher does at a key whose entry is a "
                                    "fallthrough.",
                     "excluded": "lesson 00, section 2: which keys the thread-local exclude set takes out of every "
                                 "call."}.get(status, "lesson 00, section 2: what no_grad changes, and what not.")
    if sorted(answer) == sorted(actual) and answer != actual:
        where_to_look = "lesson 00, section 1: the order of the keys, and from which end the dispatcher walks them."
    elif len(set(answer)) < len(answer):
        where_to_look = ("lesson 00, 'Underneath trace.call': the walk visits each key of the keyset once, and "
                         "moves on below it.")
    return compare_paths(answer, actual, where_to_look)


def _is_runtime_key(name: str) -> bool:
    """Whether `name` is a key a kernel is called at: a set of it holds that key itself, where a set of a functionality
    ("AutogradFunctionality") or an alias ("CompositeImplicitAutograd") holds no key of that name."""
    key = torch._C.DispatchKeySet(torch._C._parse_dispatch_key(name)).highestPriorityTypeId()
    return torch._C._dispatch_key_name(key) == name


_NO_ENTRY = ("lesson 00, sections 4 and 5: what the dispatcher does at a key of the keyset with no entry in the "
             "table.")
_MATH_KERNEL = ("lesson 00, section 4 (the path of a call): what the walk does at a math kernel (the table's [math "
                "kernel], and the [nested kernel] and [batched kernel] its variants fill).")
_BACKEND_SELECT = ("lesson 00, section 2: what BackendSelect does for a call with no tensor argument, and which keyset "
                   "its kernel hands the call on with.")
_BACKEND_SELECT_TENSORS = ("lesson 00, section 2: which keyset a BackendSelect kernel hands the call on with when the "
                           "operator takes tensors too.")
_UNDEFINED = "lesson 00, 'Underneath trace.call': where a call goes when its keyset runs out."
_AUTOGRAD_MASK = ("lesson 00, 'Underneath trace.call' and its 'What just happened': the keys an autograd kernel hands "
                  "the call on to.")
_VMAP_KERNEL = ("lesson 00, 'Underneath trace.call' and its 'What just happened': the kernels that end a walk, one at "
                "FuncTorchDynamicLayerFrontMode included.")
_PYTHON_DISPATCHER = ("lesson 00, 'Underneath trace.call' and its 'What just happened': the one key the mask of the "
                      "keys below a key always keeps.")


class _WalkDidNotEnd(Exception):
    """The reader's walk ran past the time any walk takes (a key picked again and again)."""


def _ending_within(seconds: float, call):
    """call(), or _WalkDidNotEnd once it has used `seconds` of processor time (a Python loop: the handler of
    ITIMER_VIRTUAL's signal interrupts it; a busy machine does not count)."""
    import signal

    def expired(signum, frame):
        raise _WalkDidNotEnd

    previous = signal.signal(signal.SIGVTALRM, expired)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        return call()
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


@contextmanager
def _default_device_meta():
    """torch.set_default_device("meta") for a while, then the default device as it was."""
    was = torch.get_default_device()
    torch.set_default_device("meta")
    try:
        yield
    finally:
        torch.set_default_device(None if was == torch.device("cpu") else was)


def _walk_cases():
    """(what, op, args, context, where to look[, kwargs]) for 00.walk: aten's and the workbook's operators, several
    devices, layouts, argument kinds and thread-local states."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch._functorch.vmap import vmap_increment_nesting
    from torch.utils._python_dispatch import TorchDispatchMode

    class PassingOn(TorchDispatchMode):  # a mode that only calls the op: what it changes is the keyset
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    a, b = torch.randn(2, 3), torch.randn(3, 4)
    x, y = torch.randn(3, requires_grad=True), torch.randn(3)
    conjugated = torch.randn(2, 2, dtype=torch.complex64).conj()  # lazily: it carries the Conjugate key
    with torch.inference_mode():
        frozen = torch.randn(3, 4)  # no autograd key

    walk = ("lesson 00, 'Underneath trace.call': the keyset's three terms, and what the walk does at a fallthrough and "
            "at a backend key.")
    sets = ("lesson 00, section 2 (thread-local state): what the include and exclude sets hold here and now, and "
            "'Underneath trace.call': how the keyset's three terms combine, and in which order.")
    tensors = "lesson 00, section 1 and 'Underneath trace.call': whose keys make up the keyset of a call."
    table = ("lesson 00, section 3 (the dispatch table): which entries are kernels, for an operator that writes its "
             "input or returns a view.")
    return [
        ("aten::mm(a, b)", torch.ops.aten.mm.default, (a, b), nullcontext, walk),
        ("aten::mm(a, b) in torch.no_grad()", torch.ops.aten.mm.default, (a, b), torch.no_grad, walk),
        ("aten::mm(a, b) in torch.inference_mode()", torch.ops.aten.mm.default, (a, b), torch.inference_mode, walk),
        ("aten::mm(a, b) in torch.autocast('cpu')", torch.ops.aten.mm.default, (a, b), lambda: torch.autocast("cpu"),
         walk),
        ("aten::add.Tensor(x, y) in torch.autocast('cpu')", torch.ops.aten.add.Tensor, (x, y),
         lambda: torch.autocast("cpu"), walk),
        ("aten::mm on meta tensors", torch.ops.aten.mm.default, (a.to("meta"), b.to("meta")), nullcontext, walk),
        ("aten::add.Tensor on sparse tensors", torch.ops.aten.add.Tensor, (y.to_sparse(), y.to_sparse()), nullcontext,
         walk),
        ("workbook::add(x, y)", torch.ops.workbook.add.default, (x, y), nullcontext, walk),
        ("workbook::sum on meta tensors", torch.ops.workbook.sum.default, (y.to("meta"),), nullcontext, walk),
        ("aten::mm(a, b) inside a TorchDispatchMode", torch.ops.aten.mm.default, (a, b), PassingOn,
         "lesson 00, section 2 (thread-local state): what the include set holds inside a mode, and 'Underneath "
         "trace.call': a kernel that hands the call on (a mode's, here) does not end the walk."),
        ("aten::add_.Tensor(y, y) inside torch._C._AutoDispatchBelowADInplaceOrView()", torch.ops.aten.add_.Tensor,
         (y, y), torch._C._AutoDispatchBelowADInplaceOrView, sets),
        ("aten::linear(a, w)", torch.ops.aten.linear.default, (a, torch.randn(4, 3)), nullcontext,
         _MATH_KERNEL),
        ("aten::add.Tensor(dense, sparse)", torch.ops.aten.add.Tensor, (y, y.to_sparse()), nullcontext, tensors),
        ("workbook::add(dense, sparse)", torch.ops.workbook.add.default, (y, y.to_sparse()), nullcontext,
         _NO_ENTRY),
        ("aten::cat([a, a]): a list of tensors", torch.ops.aten.cat.default, ([a, a],), nullcontext,
         tensors[:-1] + ", a list of tensors included."),
        ("aten::cat([y, y on meta]): a list of a CPU and a meta tensor", torch.ops.aten.cat.default,
         ([y, y.to("meta")],), nullcontext, tensors[:-1] + ", a list of tensors included."),
        ("aten::mm on conjugated complex tensors", torch.ops.aten.mm.default, (conjugated, conjugated), nullcontext,
         "lesson 00, section 1 (a conjugated tensor's keys) and 'Underneath trace.call': what the walk does at a "
         "fallthrough entry, whatever registered it."),
        ("aten::add_.Tensor(y, y), an in-place operator", torch.ops.aten.add_.Tensor, (y, y), nullcontext, table),
        ("aten::t(a), a view operator", torch.ops.aten.t.default, (a,), nullcontext, table),
        ("aten::add.Tensor on conjugated complex tensors", torch.ops.aten.add.Tensor, (conjugated, conjugated),
         nullcontext, "lesson 00, section 1 (a conjugated tensor's keys) and 'Underneath trace.call': what the walk "
         "does at a kernel that is not a backend's, whoever registered it."),
        ("aten::empty.memory_format([2]), a factory function: no tensor argument", torch.ops.aten.empty.memory_format,
         ([2],), nullcontext, _BACKEND_SELECT),
        # torch.set_default_device works in Python, on torch.* functions (a TorchFunctionMode): an operator called
        # through torch.ops without a device still makes a CPU tensor.
        ("aten::zeros([2]) inside torch.device(\"meta\") (as torch.set_default_device(\"meta\") sets it)",
         torch.ops.aten.zeros.default, ([2],), lambda: torch.device("meta"), _BACKEND_SELECT),
        ("aten::zeros([2]) after torch.set_default_device(\"meta\") itself", torch.ops.aten.zeros.default, ([2],),
         _default_device_meta, _BACKEND_SELECT),
        ("aten::mm(a, b) inside a level of torch.func.vmap (a and b not batched), as torch.func's transforms call",
         torch.ops.aten.mm.default, (a, b), lambda: vmap_increment_nesting(2, "error"), sets),
        ("aten::empty.memory_format([2], dtype=torch.qint8), a quantized dtype (asked, not called)",
         torch.ops.aten.empty.memory_format, ([2],), nullcontext, _BACKEND_SELECT, {"dtype": torch.qint8}),
        ("aten::empty.memory_format([4], dtype=torch.quint4x2), a packed quantized dtype (asked, not called)",
         torch.ops.aten.empty.memory_format, ([4],), nullcontext, _BACKEND_SELECT, {"dtype": torch.quint4x2}),
        ("aten::ones([2, 3]) inside torch.inference_mode()", torch.ops.aten.ones.default, ([2, 3],),
         torch.inference_mode, _BACKEND_SELECT),
        ("aten::zeros([2], device=\"meta\")", torch.ops.aten.zeros.default, ([2],), nullcontext, _BACKEND_SELECT,
         {"device": "meta"}),
        ("aten::empty.memory_format([2], device=\"cuda\") (asked, not called: no GPU needed)",
         torch.ops.aten.empty.memory_format, ([2],), nullcontext, _BACKEND_SELECT, {"device": "cuda"}),
        # A composite kernel's operator on other devices: its table has an Undefined entry too, past the backend's.
        ("aten::zeros([2], device=\"cuda\") (asked, not called)", torch.ops.aten.zeros.default, ([2],), nullcontext,
         _BACKEND_SELECT, {"device": "cuda"}),
        ("aten::ones([2], device=\"xpu\") (asked, not called)", torch.ops.aten.ones.default, ([2],), nullcontext,
         _BACKEND_SELECT, {"device": "xpu"}),
        # Devices whose kernels this build of torch does not have (Apple's GPU, Intel's Gaudi): BackendSelect still
        # hands the call on to their keys, whatever is registered there.
        ("aten::zeros([2], device=\"mps\") (asked, not called)", torch.ops.aten.zeros.default, ([2],), nullcontext,
         _BACKEND_SELECT, {"device": "mps"}),
        ("aten::empty.memory_format([2], device=\"hpu\") (asked, not called)", torch.ops.aten.empty.memory_format,
         ([2],), nullcontext, _BACKEND_SELECT, {"device": "hpu"}),
        ("aten::zeros([2], device=\"mtia\") (asked, not called)", torch.ops.aten.zeros.default, ([2],), nullcontext,
         _BACKEND_SELECT, {"device": "mtia"}),
        ("aten::zeros([2], device=\"privateuseone\") (asked, not called: an out-of-tree backend's, as lesson 09's)",
         torch.ops.aten.zeros.default, ([2],), nullcontext, _BACKEND_SELECT, {"device": "privateuseone"}),
        ("aten::zeros([2], device=\"xla\") (asked, not called)", torch.ops.aten.zeros.default, ([2],), nullcontext,
         _BACKEND_SELECT, {"device": "xla"}),
        ("aten::zeros([2], device=\"cuda:1\"), a device with an index (asked, not called)",
         torch.ops.aten.zeros.default, ([2],), nullcontext, _BACKEND_SELECT, {"device": "cuda:1"}),
        ("aten::empty.memory_format([2], device=torch.device(\"cpu\", 0)), a device with an index",
         torch.ops.aten.empty.memory_format, ([2],), nullcontext, _BACKEND_SELECT, {"device": torch.device("cpu", 0)}),
        ("aten::empty.memory_format([2], device=\"lazy\") (asked, not called)", torch.ops.aten.empty.memory_format,
         ([2],), nullcontext, _BACKEND_SELECT, {"device": "lazy"}),
        ("aten::add.Tensor(self=m, other=m), meta tensors by keyword", torch.ops.aten.add.Tensor, (), nullcontext,
         tensors, {"self": a.to("meta"), "other": a.to("meta")}),
        ("aten::add.out(y, y, out=buffer), out a meta tensor by keyword", torch.ops.aten.add.out, (y, y), nullcontext,
         tensors, {"out": torch.empty(3, device="meta")}),
        ("aten::empty.memory_format([2, 2], layout=torch.sparse_coo)", torch.ops.aten.empty.memory_format, ([2, 2],),
         nullcontext, _BACKEND_SELECT, {"layout": torch.sparse_coo}),
        ("aten::empty.memory_format([2, 2], layout=torch.sparse_csr, device=\"meta\")",
         torch.ops.aten.empty.memory_format, ([2, 2],), nullcontext, _BACKEND_SELECT,
         {"layout": torch.sparse_csr, "device": "meta"}),
        ("aten::empty.memory_format([2, 2], layout=torch.sparse_csc)", torch.ops.aten.empty.memory_format, ([2, 2],),
         nullcontext, _BACKEND_SELECT, {"layout": torch.sparse_csc}),
        ("aten::empty.memory_format([2, 2], layout=torch.sparse_bsr)", torch.ops.aten.empty.memory_format, ([2, 2],),
         nullcontext, _BACKEND_SELECT, {"layout": torch.sparse_bsr}),
        ("aten::empty.memory_format([2, 2], layout=torch.jagged)", torch.ops.aten.empty.memory_format, ([2, 2],),
         nullcontext, _BACKEND_SELECT, {"layout": torch.jagged}),
        ("aten::empty.memory_format([2], layout=torch.jagged, dtype=torch.qint8), jagged and quantized",
         torch.ops.aten.empty.memory_format, ([2],), nullcontext, _BACKEND_SELECT,
         {"layout": torch.jagged, "dtype": torch.qint8}),
        ("aten::_to_copy(sparse y, device=\"cpu\", dtype=torch.float64)", torch.ops.aten._to_copy.default,
         (y.to_sparse(),), nullcontext, _BACKEND_SELECT_TENSORS, {"device": "cpu", "dtype": torch.float64}),
        ("aten::_to_copy(y on meta, device=\"cpu\")", torch.ops.aten._to_copy.default, (y.to("meta"),), nullcontext,
         _BACKEND_SELECT_TENSORS, {"device": "cpu"}),
        ("aten::_to_copy(y on meta), what y.to(torch.float64) calls", torch.ops.aten._to_copy.default,
         (y.to("meta"),), nullcontext, _BACKEND_SELECT_TENSORS),
        ("aten::_to_copy(sparse y)", torch.ops.aten._to_copy.default, (y.to_sparse(),), nullcontext,
         _BACKEND_SELECT_TENSORS),
        ("aten::add.Tensor(sparse CSR, dense)", torch.ops.aten.add.Tensor,
         (torch.eye(3).to_sparse_csr(), torch.ones(3, 3)), nullcontext, walk),
        ("aten::empty.memory_format([2, 2], layout=torch._mkldnn) (asked, not called)",
         torch.ops.aten.empty.memory_format, ([2, 2],), nullcontext, _BACKEND_SELECT, {"layout": torch._mkldnn}),
        ("aten::_to_copy(y, device=\"meta\"), what y.to(\"meta\") calls", torch.ops.aten._to_copy.default, (y,),
         nullcontext, _BACKEND_SELECT_TENSORS, {"device": "meta"}),
        ("aten::empty.memory_format([2], dtype=torch.qint8, device=\"meta\"), a quantized dtype on meta (asked, not "
         "called)", torch.ops.aten.empty.memory_format, ([2],), nullcontext, _BACKEND_SELECT,
         {"dtype": torch.qint8, "device": "meta"}),
        ("aten::cat((a, a)) on meta tensors, given as a tuple", torch.ops.aten.cat.default,
         ((a.to("meta"), a.to("meta")),), nullcontext, tensors),
        ("aten::_to_copy(y) with Meta in the thread's include set (as FakeTensorMode runs a kernel: "
         "torch._C._IncludeDispatchKeyGuard)", torch.ops.aten._to_copy.default, (y,),
         lambda: torch._C._IncludeDispatchKeyGuard(torch._C.DispatchKey.Meta), _BACKEND_SELECT_TENSORS),
        ("aten::empty.memory_format([2]) with Meta in the thread's include set: a factory, no tensor argument",
         torch.ops.aten.empty.memory_format, ([2],),
         lambda: torch._C._IncludeDispatchKeyGuard(torch._C.DispatchKey.Meta), _BACKEND_SELECT),
        ("aten::mm(a, b), a requiring grad, under torch's Python dispatcher (torch._dispatch.python."
         "enable_python_dispatcher(), which torch.compile's tracing enters)", torch.ops.aten.mm.default,
         (a.detach().clone().requires_grad_(), b), enable_python_dispatcher, _PYTHON_DISPATCHER),
        ("aten::empty.memory_format([2, 2], layout=torch.sparse_coo, dtype=torch.qint8): a sparse layout and a "
         "quantized dtype (asked, not called)", torch.ops.aten.empty.memory_format, ([2, 2],), nullcontext,
         _BACKEND_SELECT, {"layout": torch.sparse_coo, "dtype": torch.qint8}),
        ("aten::select.int(t, 0, index), t made in torch.inference_mode() and index a 0-dim tensor given for the int",
         torch.ops.aten.select.int, (frozen, 0, torch.tensor(1)), nullcontext,
         tensors[:-1] + ", and which of the arguments the dispatcher reads keys from (the schema's Tensor ones)."),
    ]


def _walk_end(steps) -> str:
    """Where to look for a walk that goes on past the dispatcher's end: what ended it."""
    if any(step.status == "missing" for step in steps):
        return _NO_ENTRY
    last = [step for step in steps if step.status == "kernel"][-1]
    if last.entry.kind in trace.DECOMPOSITIONS:  # CompositeImplicitAutograd's, and its nested and batched variants
        return _MATH_KERNEL
    if last.key == "BackendSelect":  # its kernel refuses the arguments
        return _BACKEND_SELECT
    if last.key == "FuncTorchDynamicLayerFrontMode":
        return _VMAP_KERNEL
    return f"lesson 00, 'Underneath trace.call': where the walk ends, at {last.key!r}: which keys are backend keys?"


@exercise("00.walk", "hard")
def walk(path: Path) -> Result:
    import gc

    build.load_all("schemas", "cpu", "meta")
    kernels = load_python(path).kernels

    # Here and now (the steps below): the same call, before and after a registration changes its operator's table.
    changed = ("lesson 00, section 3: the dispatch table is read at each call, and a registration changes it (so do "
               "a library destroyed and a C++ library loaded).")

    def walked(what, op, args, context=nullcontext, where_to_look=_NO_ENTRY, kwargs=None) -> Result:
        kwargs = kwargs or {}
        with context():
            try:
                yours = _ending_within(1, lambda: kernels(op, *args, **kwargs))
            except _WalkDidNotEnd:
                return Result(False, f"{what}: your walk did not end within 1 s of processor time (a walk of the "
                                     f"dispatcher's takes milliseconds): it picks the same key again and again?\nLook "
                                     f"again at {where_to_look}")
            except Exception as error:  # noqa: BLE001 - the reader's walk may raise anything: said with its call
                return Result(False, f"{what}: your walk raised {_raised(error, path)}\nLook again at {where_to_look}")
            actual = call_path(op, *args, **kwargs)
            # A walk that went on past its end (unless the table changed since it was read): said by what ended it,
            # unless the walk went on at another key than the one with no entry (BackendSelect computed another).
            if len(yours) > len(actual) and yours[:len(actual)] == actual and where_to_look is not changed:
                steps = trace.predict(op, *args, **kwargs)
                missing = next((step.key for step in steps if step.status == "missing"), None)
                if missing is None or yours[len(actual)] == missing:
                    where_to_look = _walk_end(steps)
        result = compare_paths(yours, actual, where_to_look)
        return result if result.passed else Result(False, f"{what}: {result.diagnosis}")

    def meta_excluded():
        return torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Meta))

    x = torch.randn(3, requires_grad=True)
    # An operator that is not aten's, with a math kernel registered from Python, in a file whose name says
    # "fallthrough": a row's kind, not the file it names, says what an entry is.
    registered = {"torch": torch}
    exec(compile('library = torch.library.Library("exercise", "FRAGMENT")\n'
                 'library.define("twice(Tensor x) -> Tensor")\n'
                 'library.impl("twice", lambda t: t * 2, "CompositeImplicitAutograd")\n',
                 "my_fallthrough_helpers.py", "exec"), registered)
    cases = [*_walk_cases(), ("exercise::twice(x), a composite registered from Python (my_fallthrough_helpers.py)",
                              torch.ops.exercise.twice.default, (x,), nullcontext, _MATH_KERNEL),
             ("aten::add.Tensor(sparse meta, dense meta)", torch.ops.aten.add.Tensor,
              (torch.ones(3).to_sparse().to("meta"), torch.ones(3, device="meta")), nullcontext, _NO_ENTRY),
             # What CompositeImplicitAutograd's variants fill: AutogradNestedTensor, and FuncTorchBatched in vmap.
             ("aten::reshape(a strided nested tensor, [2, 6])", torch.ops.aten.reshape.default,
              (_nested(torch.randn(2, 3)), [2, 6]), nullcontext, _MATH_KERNEL),
             ("aten::_test::cat([x, x]), an operator registered through torch::RegisterOperators (its rows say "
              "\"registered by\")", torch.ops._test.cat.default, ([x.detach(), x.detach()],), nullcontext,
              _MATH_KERNEL),
             # Last: AutogradCPU in a nested tensor's keyset too, below AutogradNestedTensor.
             ("aten::add.Tensor(n, n), n a strided nested tensor that requires grad", torch.ops.aten.add.Tensor,
              (nested := _nested(torch.randn(2, 3)).requires_grad_(), nested), nullcontext, _AUTOGRAD_MASK),
             ("aten::mul.Tensor(n, m), n and m strided nested tensors", torch.ops.aten.mul.Tensor,
              (_nested(torch.randn(2, 3)), _nested(torch.randn(2, 3))), nullcontext, _AUTOGRAD_MASK)]
    for case in cases:
        if not (result := walked(*case)).passed:
            return result
    # A fallthrough at AutogradNestedTensor hands the call on with nothing masked: a kernel at AutogradCPU, below it in
    # a nested tensor's keyset, runs.
    with operator("nested_twice(Tensor x) -> Tensor", lambda t: t * 2, key="NestedTensorCPU") as library:
        library.impl("nested_twice", torch.library.fallthrough_kernel, "AutogradNestedTensor")
        library.impl("nested_twice", lambda keyset, t: torch.ops.exercise.nested_twice.default.redispatch(
            keyset & torch._C._after_autograd_keyset, t), "AutogradCPU", with_keyset=True)
        if not (result := walked("exercise::nested_twice(n), n a strided nested tensor: a fallthrough at "
                                 "AutogradNestedTensor, and a kernel at AutogradCPU that hands the call on",
                                 torch.ops.exercise.nested_twice.default, (_nested(torch.randn(2, 3)),),
                                 where_to_look=_AUTOGRAD_MASK)).passed:
            return result
    registered["library"]._destroy()
    with operator("answer(int n) -> int", lambda n: n + 1, key="CompositeExplicitAutograd"):
        if not (result := walked("exercise::answer(41): no tensor argument, a CompositeExplicitAutograd kernel",
                                 torch.ops.exercise.answer.default, (41,), where_to_look=_UNDEFINED)).passed:
            return result
        from torch._dispatch.python import enable_python_dispatcher

        if not (result := walked("exercise::answer(41) under torch's Python dispatcher: a kernel before the keyset "
                                 "runs out", torch.ops.exercise.answer.default, (41,), enable_python_dispatcher,
                                 _UNDEFINED)).passed:
            return result
    with operator("answer_cpu(int n) -> int", lambda n: n + 1, key="CPU"):  # the call raises: no kernel runs
        if not (result := walked("exercise::answer_cpu(41): no tensor argument, a CPU kernel only (the call raises "
                                 "\"There were no tensor arguments\")", torch.ops.exercise.answer_cpu.default, (41,),
                                 where_to_look=_UNDEFINED)).passed:
            return result
    with operator("spread(Tensor x) -> Tensor", lambda t: t + 1, key="CompositeExplicitAutograd") as library:
        library.impl("spread", torch.library.fallthrough_kernel, "CPU")  # a backend's fallthrough over it
        if not (result := walked("exercise::spread(x): a CompositeExplicitAutograd kernel, and a fallthrough at CPU",
                                 torch.ops.exercise.spread.default, (x,), where_to_look=_UNDEFINED)).passed:
            return result
    batched = []

    def in_vmap(t):  # t is the batched tensor vmap hands the function
        batched.append(walked("aten::flatten.using_ints(t, 0, -1) on the batched tensor vmap hands a function",
                              torch.ops.aten.flatten.using_ints, (t, 0, -1), where_to_look=_MATH_KERNEL))
        return t

    torch.func.vmap(in_vmap)(torch.randn(3, 2, 2))
    if not batched[0].passed:
        return batched[0]
    with operator("shifted(Tensor x) -> Tensor", lambda t: t + 1) as library:
        op = torch.ops.exercise.shifted.default
        if not (result := walked("exercise::shifted(x), a CPU kernel only", op, (x,), where_to_look=changed)).passed:
            return result
        library.impl("shifted", torch.library.fallthrough_kernel, "AutogradCPU")
        if not (result := walked("exercise::shifted(x), called again after a fallthrough was registered at AutogradCPU",
                                 op, (x,), where_to_look=changed)).passed:
            return result
    # A library destroyed and another registered (a notebook's cell run again): as many registrations as before, and
    # another table.
    definition, first = torch.library.Library("exercise", "FRAGMENT"), torch.library.Library("exercise", "FRAGMENT")
    try:
        definition.define("swapped(Tensor x) -> Tensor")
        first.impl("swapped", lambda t: t + 1, "CPU")
        swapped = torch.ops.exercise.swapped.default
        if not (result := walked("exercise::swapped(x), a CPU kernel only", swapped, (x,),
                                 where_to_look=changed)).passed:
            return result
        first._destroy()
        first = torch.library.Library("exercise", "FRAGMENT")
        first.impl("swapped", lambda t: t + 2, "CompositeImplicitAutograd")
        if not (result := walked("exercise::swapped(x), called again after its CPU kernel's library was destroyed and "
                                 "another registered a CompositeImplicitAutograd kernel", swapped, (x,),
                                 where_to_look=changed)).passed:
            return result
    finally:
        first._destroy()
        definition._destroy()
    # aten's tables change too: a library may register at any of aten's operators.
    sin = torch.ops.aten.sin.default
    if not (result := walked("aten::sin(x)", sin, (x,), where_to_look=changed)).passed:
        return result
    aten = torch.library.Library("aten", "IMPL")
    aten.impl("sin", torch.library.fallthrough_kernel, "AutogradCPU")
    try:
        if not (result := walked("aten::sin(x), called again after a library registered a fallthrough at its "
                                 "AutogradCPU", sin, (x,), where_to_look=changed)).passed:
            return result
    finally:
        aten._destroy()
    # A library garbage-collected (a local Library gone out of scope): its kernels go, with no call of _destroy.
    with operator("dropped(Tensor x) -> Tensor", lambda t: t + 1, key="Meta"):
        dropped = torch.ops.exercise.dropped.default

        def register_locally():
            local = torch.library.Library("exercise", "IMPL")
            local.impl("dropped", lambda t: t + 2, "CPU")
            return local

        local = register_locally()
        if not (result := walked("exercise::dropped(x), a CPU kernel in a library of its own", dropped, (x,),
                                 where_to_look=changed)).passed:
            return result
        del local
        gc.collect()
        if not (result := walked("exercise::dropped(x), called again after the library of its CPU kernel was "
                                 "garbage-collected (del, gc.collect(): a local Library gone out of scope)", dropped,
                                 (x,), where_to_look=changed)).passed:
            return result
    # A backend fallback registered (a vendor's library loaded): it changes every operator's computed table, while
    # no operator's own registrations change.
    with operator("nudged(Tensor x) -> Tensor", lambda t: t + 1):
        nudged = torch.ops.exercise.nudged.default

        def vendor_key_included():  # as a vendor's code includes its key for a region
            return torch._C._IncludeDispatchKeyGuard(torch._C.DispatchKey.PrivateUse1)

        if not (result := walked("exercise::nudged(x), PrivateUse1 in the thread's include set", nudged, (x,),
                                 vendor_key_included, changed)).passed:
            return result
        vendor = torch.library.Library("_", "IMPL")
        vendor.fallback(lambda *args, **kwargs: None, "PrivateUse1")
        try:
            if not (result := walked("exercise::nudged(x), PrivateUse1 in the thread's include set, called again after "
                                     "a library registered a backend fallback at PrivateUse1 (for every operator)",
                                     nudged, (x,), vendor_key_included, changed)).passed:
                return result
        finally:
            vendor._destroy()
    # Every other device type torch names: each has a key of its own, whatever kernels this build has there.
    for device_type in ("maia", "ipu", "ve", "hip", "fpga", "vulkan"):
        if not (result := walked(f"aten::empty.memory_format([2], device=\"{device_type}\") (asked, not called)",
                                 torch.ops.aten.empty.memory_format, ([2],), where_to_look=_BACKEND_SELECT,
                                 kwargs={"device": device_type})).passed:
            return result
    # An out-of-tree backend names its device (lesson 09 calls PrivateUse1 "workbook"): the name is the backend's own.
    if torch._C._get_privateuse1_backend_name() == "privateuseone":
        torch.utils.rename_privateuse1_backend("npu")
    named = torch._C._get_privateuse1_backend_name()
    if not (result := walked(f"aten::zeros([2], device=\"{named}\") after torch.utils.rename_privateuse1_backend("
                             f"\"{named}\") (asked, not called)", torch.ops.aten.zeros.default, ([2],),
                             where_to_look=_BACKEND_SELECT, kwargs={"device": named})).passed:
        return result
    # And the four device types torch names that have no key: BackendSelect's kernel refuses a factory on them
    # (c10::computeDispatchKey).
    for device_type in ("opengl", "opencl", "ideep", "mkldnn"):
        if not (result := walked(f"aten::empty.memory_format([2], device=\"{device_type}\") (asked, not called)",
                                 torch.ops.aten.empty.memory_format, ([2],), where_to_look=_BACKEND_SELECT,
                                 kwargs={"device": device_type})).passed:
            return result
    # c10::computeDispatchKey gives MAIA, FPGA and Vulkan a dense key only: a quantized dtype there is dense, and a
    # sparse layout is refused by BackendSelect's kernel itself. MTIA, IPU, VE, HPU and a renamed PrivateUse1 have
    # quantized keys of their own beside their dense one. Kernels at the dense keys and at QuantizedPrivateUse1 (a
    # vendor's, never called here) make the walk's end show which key the call reaches.
    vendor_keys = ("MAIA", "FPGA", "Vulkan", "MTIA", "IPU", "VE", "HPU", "QuantizedPrivateUse1")
    vendor = torch.library.Library("aten", "IMPL")
    try:
        for key in vendor_keys:
            vendor.impl("empty.memory_format", lambda *args, **kwargs: None, key)
        for device_type, kwargs in [*((d, {"dtype": torch.qint8})
                                      for d in ("maia", "fpga", "vulkan", named, "mtia", "ipu", "ve", "hpu")),
                                    *((d, {"layout": torch.sparse_coo}) for d in ("maia", "fpga", "vulkan"))]:
            asked = ", ".join(f"{name}={value}" for name, value in kwargs.items())
            if not (result := walked(f"aten::empty.memory_format([2], {asked}, device=\"{device_type}\") (asked, not "
                                     f"called), with a kernel at {', '.join(vendor_keys[:-1])} and {vendor_keys[-1]}",
                                     torch.ops.aten.empty.memory_format, ([2],), where_to_look=_BACKEND_SELECT,
                                     kwargs={**kwargs, "device": device_type})).passed:
                return result
    finally:
        vendor._destroy()
    from torch._functorch.vmap import vmap_increment_nesting

    for what, op, args in [("aten::linear(a, w)", torch.ops.aten.linear.default,
                            (torch.randn(2, 3), torch.randn(4, 3))),
                           ("aten::binary_cross_entropy_with_logits(a, t)",
                            torch.ops.aten.binary_cross_entropy_with_logits.default,
                            (torch.randn(2, 3), torch.rand(2, 3))),
                           ("aten::dropout(a, 0.5, True)", torch.ops.aten.dropout.default,
                            (torch.randn(2, 3), 0.5, True)),
                           ("aten::alpha_dropout(a, 0.5, True)", torch.ops.aten.alpha_dropout.default,
                            (torch.randn(2, 3), 0.5, True)),
                           # An operator's own kernel there, registered from Python (torch's fake_impls.py), not in
                           # the C++ file that holds most of them: it ends the walk all the same.
                           ("aten::to_dense(a) (a not batched)", torch.ops.aten.to_dense.default,
                            (torch.randn(2, 3),))]:
        if not (result := walked(f"{what} inside a level of torch.func.vmap", op, args,
                                 lambda: vmap_increment_nesting(2, "error"), _VMAP_KERNEL)).passed:
            return result
    # A factory's arguments as BackendSelect's kernel reads them: defaults given, layouts a device has no key for.
    for case in [
        ("aten::zeros([2], dtype=None, layout=None, device=None): the schema's defaults, given",
         torch.ops.aten.zeros.default, ([2],), nullcontext, _BACKEND_SELECT,
         {"dtype": None, "layout": None, "device": None}),
        ("aten::empty.memory_format([2, 2], layout=torch._mkldnn, device=\"meta\") (asked, not called)",
         torch.ops.aten.empty.memory_format, ([2, 2],), nullcontext, _BACKEND_SELECT,
         {"layout": torch._mkldnn, "device": "meta"}),
        ("aten::empty.memory_format([2, 2], layout=torch.sparse_csr, device=\"fpga\") (asked, not called)",
         torch.ops.aten.empty.memory_format, ([2, 2],), nullcontext, _BACKEND_SELECT,
         {"layout": torch.sparse_csr, "device": "fpga"}),
        ("aten::empty.memory_format([2, 2], layout=torch.sparse_csc, device=\"vulkan\") (asked, not called)",
         torch.ops.aten.empty.memory_format, ([2, 2],), nullcontext, _BACKEND_SELECT,
         {"layout": torch.sparse_csc, "device": "vulkan"}),
        # The exclude set at BackendSelect's kernel: torchgen's subtracts it where the operator takes tensors
        # (c10::impl::computeDispatchKeySet), and hands a factory's computed key on as it is.
        ("aten::_to_copy(y, device=\"meta\") with Meta in the thread's exclude set (torch._C._ExcludeDispatchKeyGuard)",
         torch.ops.aten._to_copy.default, (torch.ones(3),), meta_excluded, _BACKEND_SELECT_TENSORS, {"device": "meta"}),
        ("aten::empty.memory_format([2], device=\"meta\") with Meta in the thread's exclude set: a factory, no tensor "
         "argument", torch.ops.aten.empty.memory_format, ([2],), meta_excluded, _BACKEND_SELECT, {"device": "meta"}),
    ]:
        if not (result := walked(*case)).passed:
            return result
    # A backend whose key stands alone, with no dense backend's functionality bit (c10's MkldnnCPU, as Metal): a
    # kernel there computes, and a CompositeExplicitAutograd one fills the other rows; the walk ends at MkldnnCPU's.
    if torch.backends.mkldnn.is_available():  # a torch built without oneDNN has no mkldnn tensors
        with operator("walk_mkldnn(Tensor x) -> Tensor", lambda x: x.to_dense().to_mkldnn(), "MkldnnCPU") as library:
            library.impl("walk_mkldnn", lambda x: x.clone(), "CompositeExplicitAutograd")
            if not (result := walked("exercise::walk_mkldnn(x), x an mkldnn tensor, the operator with a kernel at "
                                     "MkldnnCPU and a CompositeExplicitAutograd one",
                                     torch.ops.exercise.walk_mkldnn.default, (torch.randn(2, 3).to_mkldnn(),))).passed:
                return result

        def below_autograd(a, b):  # never runs: AutogradCPU, above it, hands the call on below every autograd key
            with torch._C._AutoDispatchBelowAutograd():
                return torch.ops.exercise.walk_mixed.default(a, b)

        # A dense CPU tensor beside an mkldnn one: torch's autograd fallback at AutogradCPU (a backend fallback, not the
        # operator's kernel) hands the call on below every autograd key too, AutogradOther's kernel included.
        with operator("walk_mixed(Tensor a, Tensor b) -> Tensor", lambda a, b: a.clone(), "CPU") as library:
            library.impl("walk_mixed", lambda a, b: b.to_dense().to_mkldnn(), "MkldnnCPU")
            library.impl("walk_mixed", below_autograd, "AutogradOther")
            if not (result := walked("exercise::walk_mixed(a, m), a a CPU tensor and m an mkldnn one, the operator "
                                     "with kernels at CPU, MkldnnCPU and AutogradOther (torch's autograd fallback at "
                                     "AutogradCPU)", torch.ops.exercise.walk_mixed.default,
                                     (torch.randn(2, 3), torch.randn(2, 3).to_mkldnn()),
                                     where_to_look=_AUTOGRAD_MASK)).passed:
                return result
    # Asking is not calling: a walk reads the tables, and leaves the arguments as they were.
    x, y = torch.ones(3), torch.ones(3)
    kernels(torch.ops.aten.add_.Tensor, x, y)
    if not torch.equal(x, torch.ones(3)) or x._version:
        return Result(False, "kernels(aten::add_.Tensor, x, y) changed x (it became x + y): your function made the "
                             "call it was asked about. Asking which kernels a call would run reads the dispatch "
                             "tables (lesson 00, \"Underneath trace.call\"); it must not run them: an in-place or "
                             "random operator, or one with side effects, would act")
    walked_calls = len(cases) + 39 + 2 * torch.backends.mkldnn.is_available()
    return Result(True, f"all {walked_calls} calls walked as the dispatcher walks them, five of them again after "
                        "a registration changed; none of them made")


# ---------------------------------------------------------------------------------------------
# 01: schemas


@exercise("01.schema", "easy")
def schema(path: Path) -> Result:
    wanted = torch._C.parse_schema("scale_(Tensor(a!) x, float factor=2.0, *, float? limit=None) -> ()")
    text = load_python(path).SCHEMA
    if text.lstrip().startswith("("):
        return Result(False, "your schema has no name: m.def(...) takes the operator's name with the schema "
                             "(lesson 01, section 1, csrc/schemas.cpp)")
    try:
        yours = torch._C.parse_schema(text)
    except RuntimeError as error:
        # torch's message: what it expected, then the schema with a mark under the place it stopped. An assert's
        # boilerplate, and the "file a bug report" that the parser adds to an unknown type, are not the reader's.
        message = str(error).split("please report a bug to PyTorch. ")[-1].replace(", file a bug report", "").strip()
        return Result(False, f"torch cannot parse it:\n{message}\nLook again at lesson 01, section 2 (the schema "
                             "grammar).")
    problems = []
    if yours.name.split("::")[-1] != wanted.name:
        problems.append(f"the operator is named {wanted.name!r}, not {yours.name!r}")
    elif "::" in yours.name:
        namespace = yours.name.split("::")[0]
        problems.append(f"your schema names a namespace, `{namespace}::`: m.def(...) and define() put the operator in "
                        f"their library's namespace, and refuse a schema that names another (\"Explicitly provided "
                        f"namespace ({namespace}) in schema string does not match namespace of enclosing "
                        "TORCH_LIBRARY block\"): the task's schema, written without one, fits any library")
    if yours.overload_name:
        problems.append(f"your schema declares the overload `{wanted.name}.{yours.overload_name}`, where the task's "
                        f"operator has none: a kernel registered for `{wanted.name}` (m.impl(\"{wanted.name}\", ...)) "
                        "would find no schema to serve (lesson 01, the grammar table: overloads)")
    names, wanted_names = [a.name for a in yours.arguments], [a.name for a in wanted.arguments]
    for want in wanted.arguments:
        have = next((a for a in yours.arguments if a.name == want.name), None)
        if have is None:
            problems.append(f"argument `{want.name}` is missing")
            continue
        if have.real_type.str() != want.real_type.str():  # as the schema spells it (lesson 01, section 2)
            problems.append(f"`{want.name}` has type {have.real_type.str()}; the task asks for another")
        if have.has_default_value() != want.has_default_value() or (
                want.has_default_value() and have.default_value != want.default_value):
            problems.append(f"`{want.name}`'s default is wrong or missing")
        if have.kwarg_only != want.kwarg_only:
            problems.append(f"`{want.name}` can only be passed by keyword in the task (after `*`), and your schema "
                            "lets it be passed by position (lesson 01, the grammar table)" if want.kwarg_only else
                            f"`{want.name}` can be passed by position in the task, and your schema makes it "
                            "keyword-only (after `*`) (lesson 01, the grammar table)")
        written = bool(have.alias_info and have.alias_info.is_write)
        if have.alias_info and (len(have.alias_info.before_set) != 1 or "*" in have.alias_info.before_set):
            sets = "the wildcard set `*`" if "*" in have.alias_info.before_set else (
                f"{len(have.alias_info.before_set)} alias sets at once")
            problems.append(f"`{want.name}`'s annotation puts it in {sets}: an input begins in exactly one alias set, "
                            "named by a letter. torch's alias analysis refuses anything else: a TorchScript function "
                            "that calls the operator fails to compile (lesson 01, aliasing)")
        elif want.alias_info and want.alias_info.is_write and not written:
            problems.append(f"`{want.name}` is written to, and your schema does not say so (lesson 01, aliasing)")
        elif have.alias_info and not want.alias_info:
            problems.append(f"`{want.name}`, a {want.real_type.str()} the call only reads, carries an alias "
                            "annotation: a promise that it shares memory with a tensor or is written (a float has no "
                            "memory to share), which torch holds the schema to: "
                            "FunctionSchema.is_backward_compatible_with tells it from the task's, torch.compile "
                            "refuses an operator that writes a float, and a set shared with a tensor makes torch's "
                            "alias checks warn (lesson 01, aliasing)")
        elif have.alias_info and any(name.startswith("$") for name in have.alias_info.before_set):
            problems.append(f"`{want.name}`'s annotation names no alias set (`Tensor!`): torch gives it a set of its "
                            f"own ({', '.join(sorted(have.alias_info.before_set))}), which it leaves after the call, "
                            "a promise the operator does not keep; an annotation names its set by a letter (lesson "
                            "01, aliasing)")
        elif have.alias_info and have.alias_info.after_set != have.alias_info.before_set:
            problems.append(f"`{want.name}`'s annotation says that after the call it belongs to another alias set "
                            f"({', '.join(sorted(have.alias_info.after_set))}): a promise the operator does not keep, "
                            "which torch holds the schema to (FunctionSchema.is_backward_compatible_with)")
    if not problems and [name for name in names if name in wanted_names] != wanted_names:
        problems.append("the arguments are in another order than the task's: a positional argument is passed by its "
                        "place, so the order is part of the schema")
    extra = set(names) - set(wanted_names)
    if extra:
        problems.append(f"unexpected arguments: {', '.join(sorted(extra))}")
    if len(yours.returns) != len(wanted.returns):
        problems.append("the task's operator returns nothing, and your schema returns something")
    return _problems(problems, "the schema the task describes")


def _clamp_count_(x, lo, hi):
    changed = ((x < lo) | (x > hi)).sum()
    x.clamp_(lo, hi)
    return changed


def _minmax_out(x, *, min, max):
    torch.amin(x, 1, out=min)
    torch.amax(x, 1, out=max)
    return min, max


@dataclass(frozen=True)
class _AliasTruth:
    """What a kernel of 01.alias_annotations does, which its schema must promise: nothing less, nothing more."""
    kernel: Callable
    fake: Callable
    samples: Callable  # () -> [(args, kwargs)], made fresh per call: a contiguous and a transposed input
    arguments: tuple[str, ...]
    written: frozenset[str]
    outputs: tuple[str | None, ...]  # per output, the argument whose storage it shares (None: a new tensor)
    tag: torch.Tag | None  # the mutation tag it needs
    compiles: bool  # whether torch.compile takes it: not a custom operator that returns a view


_MUTATION_TAGS = (torch.Tag.inplace, torch.Tag.out, torch.Tag.inplace_view)
# What other tags state (torch's tags.yaml), where none of the three kernels does it. pt2_compliant_tag, "works with
# torch.compile and torch.export", is true of the operators that torch can compile, and is judged per operator.
# Left unjudged: flexible_layout (true of all three), reduction (arguably true of two), out_variant (does nothing).
_CLAIMS = {torch.Tag.nondeterministic_seeded: "that it is random",
           torch.Tag.nondeterministic_bitwise: "that two calls on the same inputs may differ bit by bit",
           torch.Tag.dynamic_output_shape: "that its outputs' shapes depend on the input's values",
           torch.Tag.data_dependent_output: "that it returns a non-tensor value read from the input's data",
           torch.Tag.pointwise: "that each output element is computed from the matching input elements alone",
           torch.Tag.view_copy: "that it is the copying variant of a view operator, with new tensors for outputs",
           torch.Tag.core: "that it belongs to aten's core operator set",
           torch.Tag.generated: "that torchgen generated it from aten's own definitions",
           # Tags that ask the compiler for care: each says the kernel needs it, and these kernels do not.
           torch.Tag.maybe_aliasing_or_mutating: "that its schema cannot tell whether it aliases or mutates",
           torch.Tag.cudagraph_unsafe: "that it cannot run inside a CUDA graph (Inductor splits the graph around it)",
           torch.Tag.needs_contiguous_strides: "that it must be given contiguous tensors",
           torch.Tag.needs_exact_strides: "that it must be given the strides eager mode gives it",
           torch.Tag.needs_fixed_stride_order: "that it must be given the stride order eager mode gives it"}
ALIAS_OPS = {
    "diag_sum": _AliasTruth(
        lambda x: (x.diagonal(), x.diagonal().sum()), lambda x: (x.diagonal(), x.new_empty(())),
        lambda: [((torch.randn(3, 4),), {}), ((torch.randn(4, 3).t(),), {})],
        ("x",), frozenset(), ("x", None), None, False),
    "clamp_count_": _AliasTruth(
        _clamp_count_, lambda x, lo, hi: x.new_empty((), dtype=torch.int64),
        lambda: [((torch.randn(2, 5), -0.5, 0.5), {}), ((torch.randn(5, 2).t(), -0.5, 0.5), {})],
        ("x", "lo", "hi"), frozenset({"x"}), (None,), None, True),
    "minmax_out": _AliasTruth(
        _minmax_out, lambda x, *, min, max: (min, max),
        lambda: [((x,), {"min": torch.empty(3), "max": torch.empty(3)})
                 for x in (torch.randn(3, 4), torch.randn(4, 3).t())],
        ("x", "min", "max"), frozenset({"min", "max"}), ("min", "max"), torch.Tag.out, True),
}


def _broken_promises(name: str, schema, tags, truth: _AliasTruth) -> list[str]:
    """Where a schema's promises (written arguments, outputs that share an argument's storage, the mutation tag)
    differ from what the kernel does."""
    names = tuple(argument.name for argument in schema.arguments)
    if names != truth.arguments:
        return [f"{name}: the kernel takes ({', '.join(truth.arguments)}); your schema declares ({', '.join(names)})"]
    if len(schema.returns) != len(truth.outputs):
        return [f"{name}: the kernel returns {len(truth.outputs)} tensor(s); your schema declares "
                f"{len(schema.returns) or 'none'}"]
    problems = []
    sets = {argument.name: argument.alias_info.before_set if argument.alias_info else set()
            for argument in schema.arguments}
    written = {argument.name for argument in schema.arguments if argument.alias_info and argument.alias_info.is_write}
    tensors = {argument.name for argument in schema.arguments if isinstance(argument.type, torch._C.TensorType)}
    problems += [f"{name}: the kernel writes `{argument}`, and your schema does not mark it written"
                 for argument in truth.arguments if argument in truth.written - written]
    problems += [f"{name}: your schema marks `{argument}` written, and the kernel never writes it"
                 for argument in truth.arguments if argument in written - truth.written]
    for i, (returned, shares) in enumerate(zip(schema.returns, truth.outputs), 1):
        # The wildcard, Tensor(*), may share storage with any tensor: alias analysis reads it so.
        promised = {argument for argument in truth.arguments
                    if returned.alias_info and (sets[argument] & returned.alias_info.before_set
                                                or "*" in returned.alias_info.before_set
                                                and argument in tensors)}
        if shares and shares not in promised:
            problems.append(f"{name}: output {i} shares storage with `{shares}`, and your schema does not say so")
        problems += [f"{name}: your schema says output {i} may share storage with `{argument}`, and it never does"
                     for argument in truth.arguments if argument in promised - {shares}]
    # A read-only argument in an alias set that no output shares: torch reads the set as "returns a view of it"
    # (FunctionSchema._is_view_op, torch.fx.passes.reinplace's _is_view_op: the first argument's annotation).
    returned = set().union(*(r.alias_info.before_set for r in schema.returns if r.alias_info))
    problems += [f"{name}: your schema puts `{argument.name}`, which the call only reads, in alias set "
                 f"{', '.join(sorted(argument.alias_info.before_set))}, and no output is in it: torch reads a "
                 "read-only argument's alias set as the promise that the operator returns a view of it "
                 "(FunctionSchema._is_view_op, which torch.fx.passes.reinplace reads), and the kernel returns none"
                 for argument in schema.arguments if argument.alias_info and not argument.alias_info.is_write
                 and not argument.alias_info.before_set & returned and "*" not in returned]
    # And an output in an alias set no argument is in: an annotation that names no memory of the call's.
    given = set().union(*(a.alias_info.before_set for a in schema.arguments if a.alias_info))
    problems += [f"{name}: your schema puts output {i} in alias set {', '.join(sorted(r.alias_info.before_set))}, "
                 "which no argument is in: an output's annotation says which argument's memory it may share, and a "
                 "new tensor shares none, so it carries no annotation (lesson 01, aliasing)"
                 for i, r in enumerate(schema.returns, 1) if r.alias_info and "*" not in r.alias_info.before_set
                 and not r.alias_info.before_set & given]
    mutation_tags = {tag for tag in tags if tag in _MUTATION_TAGS}
    if truth.tag and truth.tag not in mutation_tags:
        problems.append(f"{name}: it returns arguments it writes, and no tag says which kind of mutation that is: "
                        "torch.compile refuses such an operator")
    problems += [f"{name}: tagged {tag.name}, a kind of mutation its kernel does not do"
                 for tag in mutation_tags - {truth.tag}]
    claims = _CLAIMS | ({} if truth.compiles else {torch.Tag.pt2_compliant_tag: "that torch.compile takes it"})
    problems += [f"{name}: tagged {tag.name}, which says {claims[tag]}, and that is not true of it"
                 for tag in tags if tag in claims]
    return problems


_ALIAS_TYPES = {"x": "Tensor", "lo": "float", "hi": "float", "min": "Tensor", "max": "Tensor"}  # the task's arguments


@exercise("01.alias_annotations", "hard")
def alias_annotations(path: Path) -> Result:
    answer = load_python(path)
    problems, defined = [], []  # (name, operator, truth, its context) of each schema torch took, nothing broken
    for name, truth in ALIAS_OPS.items():
        schema_text, tags = answer.SCHEMAS.get(name, ""), tuple(answer.TAGS.get(name, ()))
        if not schema_text.startswith(f"{name}("):
            problems.append(f"{name}: the schema must start with `{name}(`")
            continue
        try:
            context = operator(schema_text, truth.kernel, tags=tags)
            library = context.__enter__()
        except (RuntimeError, ValueError) as error:
            problems.append(f"{name}: torch refuses the definition: {str(error).strip().splitlines()[0]}")
            continue
        op = getattr(torch.ops.exercise, name).default
        written = {"number": "Scalar"}  # the schema's spelling of a type torch prints otherwise
        if wrong := [f"{name}: `{arg.name}` has type {written.get(str(arg.type), arg.type)}, and the task says "
                     f"{_ALIAS_TYPES[arg.name]}"
                     for arg in op._schema.arguments if str(arg.type) != _ALIAS_TYPES.get(arg.name, str(arg.type))]:
            problems += wrong
            continue
        if defaulted := [arg.name for arg in op._schema.arguments if arg.has_default_value()]:
            problems.append(f"{name}: `{defaulted[0]}` has a default, where the task's argument has none: a caller who "
                            "leaves it out is not refused, and gets a value the schema made up")
            continue
        if broken := _broken_promises(name, op._schema, tags, truth):
            problems += broken
            continue
        # A return named after another argument than the one it is (by their alias sets) tells a reader, and tools
        # that name outputs after it (torch.onnx.export: "{node}_{return's name}"), the wrong argument.
        if misnamed := [(ret.name, arg.name) for ret in op._schema.returns if ret.name and ret.alias_info
                        for arg in op._schema.arguments if arg.alias_info and arg.name != ret.name
                        and set(arg.alias_info.before_set) & set(ret.alias_info.before_set)]:
            problems.append(f"{name}: the return named `{misnamed[0][0]}` is `{misnamed[0][1]}` (their alias sets say "
                            "so): its name tells a reader, and tools that name outputs after it (torch.onnx.export), "
                            "another argument than the one it is")
            continue
        torch.library.register_fake(f"exercise::{name}", truth.fake, lib=library)
        defined.append((name, op, truth, context))  # the context kept: dropped, it would remove the operator
    for name, op, truth, _ in defined if not problems else ():  # opcheck, the slow part, once every schema reads right
        tests = ("test_schema", "test_faketensor") + (("test_aot_dispatch_dynamic",) if truth.compiles else ())
        for args, kwargs in truth.samples():
            results = torch.library.opcheck(op, args, kwargs, test_utils=tests, raise_exception=False)
            # The first test that failed: a later one fails for the same reason, or for one that differs from one
            # machine to another (torch.compile's test passed on one of ours and failed on another).
            if failed := next(((test, outcome) for test, outcome in results.items() if outcome != "SUCCESS"), None):
                test, outcome = failed
                first = str(outcome).strip().splitlines()[0] if str(outcome).strip() else type(outcome).__name__
                problems.append(f"{name}: opcheck's {test} failed: {first[:240]}")
                break
    hint = ("\nLook again at lesson 01, section 2: the grammar table (aliasing, the `!`, several returns, tags), and "
            "its 'What just happened' on tags (which mutated arguments a tag lets an operator return).")
    return Result(not problems, "\n".join(problems) + hint if problems else
                  "every schema promises what its kernel does, no more, and opcheck passes")


# ---------------------------------------------------------------------------------------------
# 02: backend kernels


def _softplus2_error(error: Exception, key: str) -> str:
    """What a call of 02.composite_key's operator raised: torch's long "Could not run" text said in a line."""
    if isinstance(error, NotImplementedError) and str(error).startswith("Could not run"):
        return f"the dispatcher finds no kernel at the keys of this call: KEY {key!r} fills none of them."
    return f"{type(error).__name__}: {str(error).split('. ')[0][:200]}."


def _softplus2_after_a_write(op, write, how: str, why: str, context=nullcontext) -> list[str]:
    """A call on x (four 0.5s), then `write(x)`, then a call on x again, inside `context`: the second output is that of
    x's new values, not one kept from the first call. `how` says the call and the write, `why` what a wrong one kept."""
    with context():
        x = torch.full((4,), 0.5)
        op(x)
        write(x)
        again, expected = op(x), torch.log1p(torch.exp(2 * x.double())) / 2
    if torch.allclose(again.double(), expected):
        return []
    return [f"{how}, then a call on x again: {again[0].item():.6g} where log(1 + exp(2x)) / 2 is "
            f"{expected[0].item():.6g}: the output of x's values before the write, {why}"]


def _softplus2_fresh_outputs(op) -> list[str]:
    """A new output per call, computed from the input it is given: calls on tensors that reuse the memory, and the
    id, of earlier ones, and two calls on one tensor."""
    # The same tensor, its values changed in place between two calls.
    if wrong := _softplus2_after_a_write(op, lambda x: x.fill_(-2.0), "a call on x, then x.fill_(-2.0)",
                                         "something kept from the first call"):
        return wrong
    for value in (0.25, -1.5, 2.0, 0.75) * 4:  # sixteen calls: the allocator hands back freed memory often
        x = torch.full((1000,), value)  # the memory (and often the id) of an earlier iteration's x
        out = op(x)
        expected = torch.log1p(torch.exp(2 * x.double())) / 2
        if not torch.allclose(out.double(), expected):
            return [f"a call on a new tensor of {value}s, made where an earlier tensor was freed: "
                    f"{out[0].item():.6g} where log(1 + exp(2x)) / 2 is {expected[0].item():.6g}: an output computed "
                    "for another input (a cache keyed on id(), a data pointer or a version is one of them)"]
        del x, out
    # Writes that x's version counter does not count: through .data, and through numpy's view of its memory (a batch
    # buffer a data loader refills); and any write in inference mode, where a tensor has no version counter (a
    # server's buffer, updated in place).
    unseen = "something kept from an earlier call and trusted while x's version stayed the same"
    for write, how, why, context in (
            (lambda x: x.data.fill_(1.5), "x.data.fill_(1.5) (a write x's version counter does not count)", unseen,
             nullcontext),
            (lambda x: x.numpy().fill(-0.75), "x.numpy().fill(-0.75), numpy's view of x's memory (a write x's version "
             "counter does not count)", unseen, nullcontext),
            (lambda x: x.add_(3), "x.add_(3)", "something kept from an earlier call (an inference tensor has no "
             "version counter to tell a write)", torch.inference_mode)):
        where = "inside torch.inference_mode(), " if context is torch.inference_mode else ""
        if wrong := _softplus2_after_a_write(op, write, f"{where}a call on x, then {how}", why, context):
            return wrong
    x = torch.randn(3)
    first, second, third = op(x), op(x), op(x)
    storages = {out.untyped_storage()._cdata for out in (first, second, third)}
    if len(storages) < 3:
        return ["three calls on one tensor gave the same output tensor twice: a caller that writes into one (out += "
                "1) changes another, and the schema promises a new tensor per call"]
    return []


def _softplus2_gradient_after_write(op) -> list[str]:
    """The gradient of a call whose input is written in place afterwards (an optimizer step, a normalization): autograd
    gives the gradient at the values the call saw, or refuses (a saved tensor's version moved); never one at the new
    values."""
    leaf = torch.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    x = leaf * 1  # not a leaf: it can be written in place
    out = op(x)
    with torch.no_grad():
        x.mul_(3)
    try:
        grad = torch.autograd.grad(out.sum(), leaf)[0]
    except RuntimeError as error:
        if "modified by an inplace operation" in str(error):
            return []
        raise
    if torch.allclose(grad, torch.sigmoid(2 * leaf.detach())):
        return []
    return [f"a call on x = {leaf.tolist()}, then x.mul_(3) under torch.no_grad(), then backward: the gradient is "
            f"{[round(g, 4) for g in grad.tolist()]}, that of x's new values, where autograd gives the gradient at the "
            "values the call saw, or refuses the backward. A tensor kept for backward outside autograd's saved "
            "tensors (ctx.save_for_backward, lesson 04) escapes the version check that makes it refuse"]


def _softplus2_tangent(op) -> list[str]:
    """Forward-mode AD (torch.func.jvp, jacfwd, a Hessian's forward-over-reverse): a dual x, which requires no grad,
    carries its tangent through torch's operations: softplus2's is sigmoid(2x) times x's."""
    from torch.autograd import forward_ad

    for x, tangent_of_x in [(torch.tensor([-1.0, 0.0, 0.5, 2.0], dtype=torch.float64),
                             torch.tensor([1.0, 2.0, -1.0, 0.5], dtype=torch.float64)),
                            (torch.tensor(0.3, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))]:  # 0-d
        what = (f"a dual tensor x = {x.tolist()} of tangent {tangent_of_x.tolist()} (forward-mode AD: torch.func.jvp, "
                "jacfwd; a dual tensor does not require grad)")
        try:
            with forward_ad.dual_level():
                tangent = forward_ad.unpack_dual(op(forward_ad.make_dual(x, tangent_of_x))).tangent
        except (NotImplementedError, RuntimeError) as error:
            return [f"{what}: {type(error).__name__}: {str(error).splitlines()[0][:200]}"]
        if tangent is not None and torch.allclose(tangent.double(), torch.sigmoid(2 * x) * tangent_of_x):
            continue
        shown = "none" if tangent is None else [round(value, 4) for value in tangent.reshape(-1).tolist()]
        return [f"{what}: the output's tangent is {shown}, not the derivative times x's tangent. The kernel's "
                "operations did not carry x's tangent: a kernel made of torch operations, at the right key, is "
                "differentiable in forward mode too, whatever requires_grad says"]
    return []


def _softplus2_on_fake_tensors(op) -> list[str]:
    """softplus2 on fake tensors, as torch.compile and torch.export trace it: a CPU device, a shape and a dtype, and no
    values to read."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    x = mode.from_tensor(torch.tensor([-1.0, 0.5, 3.0]))
    try:
        with mode:
            op(x)
    except Exception as error:  # noqa: BLE001 - the reader's kernel may raise anything; that is the diagnosis
        data_dependent = "DataDependent" in type(error).__name__
        real_met_fake = "convert all Tensors to FakeTensors" in str(error)
        return [f"fake tensors (what torch.compile and torch.export trace with: a device, a shape and a dtype, no "
                f"values), on the CPU device: {type(error).__name__}: {str(error).strip().splitlines()[0][:200]}"
                + (". A kernel that branches on its input's values cannot be traced; torch operations on the whole "
                   "tensor can" if data_dependent else "")
                + (". A real tensor met the fake ones inside the kernel: one made before this call (kept from an "
                   "earlier call, or at import), which a trace cannot hold" if real_met_fake else "")]
    return []


def _softplus2_traced_on_meta(op) -> list[str]:
    """softplus2 traced on a meta tensor (make_fx, as a large model is traced without its memory): below autograd a
    composite kernel's operations are what the trace records, so the graph, run on CPU tensors, computes softplus2."""
    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.tensor([-2.0, 0.0, 0.5, 3.0])
    try:
        got = make_fx(op)(torch.empty(4, device="meta"))(x)
    except Exception as error:  # noqa: BLE001 - the reader's kernel may raise anything; that is the diagnosis
        return [f"traced on a meta tensor (make_fx), then the graph run on a CPU tensor: {type(error).__name__}: "
                f"{str(error).strip().splitlines()[0][:200]}"]
    expected = torch.log1p(torch.exp(2 * x.double())) / 2
    if isinstance(got, torch.Tensor) and torch.allclose(got.double(), expected, rtol=1e-5):
        return []
    shown = [round(v, 4) for v in got.tolist()] if isinstance(got, torch.Tensor) else type(got).__name__
    return [f"traced on a meta tensor (make_fx, as a large model is traced without its memory), then the graph run on "
            f"x = {x.tolist()}: {shown}, where log(1 + exp(2x)) / 2 is {[round(v, 4) for v in expected.tolist()]}: "
            "what your kernel does on meta tensors is not what it does on real ones (a branch on x.is_meta?), and a "
            "trace records what it does on the tensors it traces with"]


def _sparse_bsc() -> torch.Tensor:
    """A 2 x 2 sparse BSC tensor that requires grad (torch warns, once, that BSC support is in beta: not the reader's
    concern)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.eye(2).to_sparse_bsc((1, 1)).requires_grad_()


def _flushes_denormals() -> bool:
    return (torch.tensor([1e-40]) * 1.0).item() == 0.0


def _process_state() -> dict:
    """What a kernel must leave as it found it, for the whole process: (its value, how to set it back)."""
    return {"torch's default dtype (torch.set_default_dtype)": (torch.get_default_dtype(), torch.set_default_dtype),
            "torch's default device (torch.set_default_device)": (_default_device_set(), _set_default_device_back),
            "the number of threads (torch.set_num_threads)": (torch.get_num_threads(), torch.set_num_threads),
            "the random number generator's state (torch.manual_seed)": (torch.random.get_rng_state(),
                                                                        torch.random.set_rng_state),
            "whether denormal numbers flush to zero (torch.set_flush_denormal)": (_flushes_denormals(),
                                                                                 torch.set_flush_denormal),
            "autograd's anomaly detection (torch.autograd.set_detect_anomaly)": (
                (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
                lambda setting: torch.set_anomaly_enabled(*setting)),
            "how tensors print (torch.set_printoptions)": (dict(vars(torch._tensor_str.PRINT_OPTS)),
                                                           lambda options: torch.set_printoptions(**options)),
            "float32 matmul precision (torch.set_float32_matmul_precision)": (
                _float32_matmul_precision(), _set_float32_matmul_precision),
            "whether oneDNN and cuDNN run, and how cuDNN chooses (torch.backends.mkldnn, torch.backends.cudnn)": (
                _backend_switches(), _set_backend_switches)}


def _default_device_set() -> tuple:
    """What torch.set_default_device sets (torch/__init__.py): the thread's DeviceContext, and the device
    torch.utils._device keeps for torch.compile (which guards compiled graphs on it). torch.get_default_device() reads
    the thread's mode stack, which autograd's engine sets back after each node, so it misses a backward's change."""
    import torch.utils._device

    return getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None), torch.utils._device.CURRENT_DEVICE


def _set_default_device_back(setting: tuple) -> None:
    import torch.utils._device

    # Not torch.set_default_device(...): it would exit the answer's DeviceContext, which may no longer be on the
    # mode stack (autograd's engine took it off), and pop the caller's mode instead.
    torch._GLOBAL_DEVICE_CONTEXT.device_context, torch.utils._device.CURRENT_DEVICE = setting


def _float32_matmul_precision() -> str:
    """torch's float32 matmul precision by its legacy getter, which refuses to read it once code has set it through the
    per-backend API (torch.backends.*.matmul.fp32_precision): that refusal is a setting too."""
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return "set through the per-backend API"


def _set_float32_matmul_precision(precision: str) -> None:
    if precision != "set through the per-backend API":  # what no legacy setter can give back
        torch.set_float32_matmul_precision(precision)


def _backend_switches() -> tuple:
    """Whether oneDNN and cuDNN run, and how cuDNN chooses (a process's switches, read on the CPU too)."""
    cudnn = torch.backends.cudnn
    return (torch.backends.mkldnn.enabled, cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32)


def _set_backend_switches(switches: tuple) -> None:
    cudnn = torch.backends.cudnn
    (torch.backends.mkldnn.enabled, cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) = switches


def _process_state_differs(before: dict) -> list[str]:
    """What of the process's state differs from `before` (_process_state()) now."""
    now = _process_state()
    return [what for what, (old, _) in before.items()
            if not (torch.equal(old, now[what][0]) if isinstance(old, torch.Tensor) else old == now[what][0])]


def _process_state_changed(before: dict) -> str:
    """'' where the process's state is as `before` (_process_state()); else what changed, which is set back."""
    changed = _process_state_differs(before)
    for what in changed:
        before[what][1](before[what][0])
    return " and ".join(changed)


def _process_state_while_running(call) -> tuple[str, list[str]] | None:
    """(an operation `call` made, what of the process's state differed there from the caller's), for the first
    where any did, seen by a TorchDispatchMode below the kernel; None where none did. A setting changed and set back
    inside a call is every thread's while it is changed."""
    from torch.utils._python_dispatch import TorchDispatchMode

    before, seen = _process_state(), []

    class Watching(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not seen and (differs := _process_state_differs(before)):
                seen.append((func._schema.name, differs))
            return func(*args, **(kwargs or {}))

    with Watching():
        call()
    return seen[0] if seen else None


def _other_dtypes_computed(op, x: torch.Tensor) -> list[tuple[str, torch.dtype]]:
    """(operation, dtype) for each floating-point result, of another dtype than x's, of the operations op(x) runs,
    seen by a TorchDispatchMode below the kernel."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Dtypes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            seen.extend((str(func), t.dtype) for t in torch.utils._pytree.tree_leaves(out)
                        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != x.dtype)
            return out

    with Dtypes():
        op(x)
    return seen


def _softplus2_dtypes_inside(op) -> list[str]:
    """The dtypes of the operations the kernel runs on a float32 input: at the input's precision, none computes in
    another floating dtype (float64 and back gives other roundings, two casts in every traced graph, and fails where a
    device has no float64)."""
    if seen := _other_dtypes_computed(op, torch.linspace(-3, 3, 7)):
        func, dtype = seen[0]
        return [f"on a float32 input, your kernel computes in {dtype} ({func} gives it): a computation at another "
                "precision than the input's rounds otherwise, puts two casts in every graph torch.compile and "
                "torch.export trace, and fails on a device without that dtype"]
    return []


def _softplus2_dtypes_when_traced(op) -> list[str]:
    """The same on a float64 fake tensor (what torch.compile and torch.export trace with): a kernel that tells traced
    tensors apart computes otherwise in the compiled or exported program than in eager."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        seen = _other_dtypes_computed(op, torch.linspace(-3, 3, 7, dtype=torch.float64))
    if seen:
        func, dtype = seen[0]
        return [f"on a float64 fake tensor (what torch.compile and torch.export trace with), your kernel computes in "
                f"{dtype} ({func} gives it), where on a real one it does not: the compiled or exported program "
                "computes at another precision than eager. A kernel computes alike on every tensor that reaches it"]
    return []


@exercise("02.composite_key", "medium")
def composite_key(path: Path) -> Result:
    import contextlib

    answer = load_python(path)
    if answer.KEY in ("", "Undefined"):  # Library.impl then registers at a key of its choosing, which KEY does not name
        return Result(False, f"KEY {answer.KEY!r} names no dispatch key: torch then registers the kernel at a key of "
                             "its own choosing. Which key is that, and why does it fit? Name it (lesson 02, sections 3 "
                             "and 4).")
    if torch._C._parse_dispatch_key(answer.KEY) is None:
        return Result(False, f"torch knows no dispatch key named {answer.KEY!r} (lesson 02, section 3: the keys a "
                             "registration can name)")
    @contextlib.contextmanager
    def float64_by_default():  # a project that computes in float64 by default
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            yield
        finally:
            torch.set_default_dtype(default)

    with operator("softplus2(Tensor x) -> Tensor", answer.softplus2, answer.KEY):
        op = torch.ops.exercise.softplus2.default
        problems = []
        # Inputs far below 0 too, where log(1 + exp(2x)) loses every digit log1p keeps (float32 at -9, float64 at -20).
        # And far above it, where a clamp against overflow changes the value (log1p(exp(2x)) itself holds up to 44 in
        # float32, 354 in float64).
        for what, x, context in [("float32 CPU tensors",
                                  torch.tensor([-9.0, -5.0, -0.5, 0.0, 0.5, 3.0, 42.0]), nullcontext),
                                 ("float64 CPU tensors",
                                  torch.tensor([-20.0, -9.0, -1.0, 0.0, 1.0, 3.0, 12.0, 13.0, 100.0],
                                               dtype=torch.float64),
                                  nullcontext),
                                 ("a transposed CPU tensor", torch.randn(3, 2).t(), nullcontext),
                                 ("a channels_last CPU tensor", torch.randn(2, 3, 2, 2).contiguous(
                                     memory_format=torch.channels_last), nullcontext),
                                 ("an expanded CPU tensor (stride 0)", torch.randn(1, 3).expand(2, 3), nullcontext),
                                 ("a float32 CPU tensor, after torch.set_default_dtype(torch.float64)",
                                  torch.tensor([-3.0, 0.5, 2.0]), float64_by_default),
                                 ("a 0-d float32 CPU tensor, after torch.set_default_dtype(torch.float64)",
                                  torch.tensor(0.5), float64_by_default),
                                 ("an empty CPU tensor", torch.randn(0, 2), nullcontext),
                                 ("an empty float64 CPU tensor", torch.randn(0, 2, dtype=torch.float64), nullcontext),
                                 ("meta tensors (what torch.compile and torch.export trace with)",
                                  torch.empty(3, device="meta"), nullcontext),
                                 ("an empty meta tensor", torch.empty(0, 2, device="meta"), nullcontext),
                                 ("a 0-d meta tensor", torch.empty((), device="meta"), nullcontext),
                                 ("inside torch.inference_mode()", torch.randn(3), torch.inference_mode),
                                 # A size-1 dimension's stride is the input's own (a slice, as_strided): torch's
                                 # elementwise output recomputes it, and it decides the output's memory format.
                                 ("a channels_last CPU tensor whose size-1 dimension has a stride of its own",
                                  torch.randn(24).as_strided((2, 4, 3, 1), (12, 1, 4, 2)), nullcontext),
                                 # The values of a training step's call are its values too.
                                 ("float32 CPU tensors that require grad (a training step's)",
                                  torch.tensor([-9.0, -5.0, -0.5, 0.0, 0.5, 3.0, 42.0], requires_grad=True),
                                  nullcontext),
                                 ("float64 CPU tensors that require grad",
                                  torch.tensor([-20.0, -9.0, -1.0, 0.0, 1.0, 3.0, 12.0, 13.0, 100.0],
                                               dtype=torch.float64, requires_grad=True), nullcontext),
                                 # A batch, not a handful: a kernel may take another path from some size on.
                                 ("a float32 CPU tensor of 2**20 + 3 elements",
                                  torch.linspace(-9, 42, 2**20 + 3), nullcontext),
                                 ("a float64 CPU tensor of 2**20 + 3 elements",
                                  torch.linspace(-20, 100, 2**20 + 3, dtype=torch.float64), nullcontext)]:
            given = x.clone()
            before = _process_state()
            try:
                with context():
                    grad_mode = torch.is_grad_enabled()
                    out = op(x)
                    grad_mode_changed = torch.is_grad_enabled() != grad_mode
            except (NotImplementedError, RuntimeError) as error:
                problems.append(f"{what}: {_softplus2_error(error, answer.KEY)}")
                continue
            if changed := _process_state_changed(before):
                problems.append(f"{what}: the call changed {changed}, for everything the process runs later: a "
                                "kernel changes nothing but its output")
                break  # once: every later case would say it again
            expected = (torch.log1p(torch.exp(2 * x.double())) / 2).to(x.dtype)
            precision = torch.finfo(x.dtype).eps * 16  # a few roundings in the input's own dtype, relative: 0 < values
            if (out.dtype, out.shape, out.device) != (x.dtype, x.shape, x.device):
                problems.append(f"{what}: the output is {out.dtype}, shape {list(out.shape)} on {out.device}; the "
                                f"input {x.dtype}, shape {list(x.shape)} on {x.device}")
            elif x.device.type != "meta" and not torch.equal(x, given):
                problems.append(f"{what}: the call changed its input, which the schema does not let it write (no "
                                "`(a!)`; lesson 01)")
            elif out is x or out.untyped_storage()._cdata == x.untyped_storage()._cdata:
                problems.append(f"{what}: the output shares the input's storage, and the schema promises a new tensor")
            elif x.device.type != "meta" and out.numel() > 1 and out.stride() != (
                    reference := torch.log1p(torch.exp(2 * x)) / 2).stride():
                problems.append(f"{what}: the output has strides {list(out.stride())}, where torch's elementwise "
                                f"operations give {list(reference.stride())}: they keep the input's memory format")
            elif x.device.type != "meta" and not torch.allclose(out, expected, rtol=precision, atol=0):
                worst, digits = ((out.double() - expected.double()).abs() / expected.double()).argmax(), (
                    17 if x.dtype == torch.float64 else 9)  # enough to tell two values of the dtype apart
                problems.append(f"{what}: wrong values (at x = {x.flatten()[worst].item():g}: "
                                f"{out.flatten()[worst].item():.{digits}g}, where log(1 + exp(2x)) / 2 is "
                                f"{expected.flatten()[worst].item():.{digits}g}), or computed at a lower precision "
                                "than the input's")
            if grad_mode_changed:
                problems.append(f"{what}: grad mode changed in the call; a kernel must leave the caller's thread-local "
                                "state as it found it (lesson 00, section 2)")
        if not problems:
            problems += _softplus2_fresh_outputs(op) or _softplus2_dtypes_inside(op)
        if not problems:  # where meta tensors fail, fake ones do too: that is said already
            problems += _softplus2_on_fake_tensors(op) or _softplus2_traced_on_meta(op)
        # Whether autograd saw the operations inside the kernel, read from the dispatch table, not from the fallback's
        # warning: the reader's code could turn the warning off (_set_autograd_fallback_mode, a warnings filter).
        # 0: where abs and clamp have a kink; -50: where exp(2x) underflows, and a where()'s unused branch is inf.
        x = torch.tensor([-1.0, 0.0, -0.0, 0.5, 2.0, -50.0], requires_grad=True)
        steps = trace.predict(op, x)
        first = next((step for step in steps if step.status == "kernel"), None)
        if (first is not None and first.key.startswith("Autograd") and first.entry.kind == "backend fallback"
                and not any(step.status == "missing" for step in steps)):
            problems.append("the gradient only comes through torch's autograd fallback, which warns that this is "
                            "deprecated: autograd does not see the operations inside your kernel")
        else:
            try:
                out = op(x)
                grad = torch.autograd.grad(out.sum(), x)[0] if out.grad_fn is not None else None
            except (NotImplementedError, RuntimeError) as error:
                problems.append(f"a gradient: {_softplus2_error(error, answer.KEY)}")
            else:
                empty = torch.empty(0, requires_grad=True)
                with contextlib.suppress(NotImplementedError, RuntimeError):  # told above
                    if not op(empty).requires_grad:
                        problems.append("an empty input that requires grad: the output does not, so the graph stops "
                                        "there (an empty batch is still part of the model)")
                    if op(torch.empty(3, device="meta", requires_grad=True)).grad_fn is None:
                        problems.append("a meta tensor that requires grad (a model built on the meta device: deferred "
                                        "initialization, memory planning): the output has no grad_fn, where a CPU "
                                        "tensor's has one, so backward on meta stops there")
                if grad is None:
                    problems.append("no gradient: the output has no grad_fn")
                elif not torch.allclose(grad, want := torch.sigmoid(2 * x.detach())):
                    at = int((~torch.isclose(grad, want)).nonzero()[0])
                    problems.append(f"wrong gradient at x = {x[at].item()}: {grad[at].item()}, where the derivative of "
                                    f"log(1 + exp(2x)) / 2 is {want[at].item()}")
                elif (again := op(x)) is out:
                    problems.append("a second call on one x that requires grad returned the first call's output "
                                    "itself, whose graph the first backward has used up (a second backward through it "
                                    "fails): each call's output is a new tensor, with a graph of its own")
                elif not (second := torch.autograd.grad(again.sum(), x, create_graph=True)[0]).requires_grad:
                    problems.append("with create_graph=True (double backward: a Hessian, a gradient penalty) the "
                                    "gradient has no history of its own, so its derivative is lost: a kernel made of "
                                    "torch operations, at the right key, is differentiable as many times as they are")
                else:
                    problems += _softplus2_gradient_after_write(op) or _softplus2_tangent(op)
            with torch.no_grad():
                with contextlib.suppress(NotImplementedError, RuntimeError):  # told above
                    if op(torch.randn(3, requires_grad=True)).requires_grad:
                        problems.append("inside torch.no_grad() (an evaluation loop), the output requires grad and "
                                        "has a graph: your kernel turned grad mode on for its own operations, so every "
                                        "step builds and keeps a graph the caller switched off")
                left_on = torch.is_grad_enabled()
            if left_on:
                problems.append("a call inside torch.no_grad() turned grad mode on for the rest of the block: a "
                                "kernel must leave the caller's thread-local state as it found it (lesson 00, "
                                "section 2)")
        if not problems:  # last: as torch.compile and torch.export trace it, the kernel computes as eager does
            problems += _softplus2_dtypes_when_traced(op)
        if not problems and (name := _variable_holding_a_tensor(answer)):
            problems.append(f"after the check's calls, your file keeps a tensor in its variable `{name}`: each call's "
                            "tensors outlive the call, their memory and graph with them, and a training loop's pile up "
                            "step after step. A kernel returns its output and keeps nothing")
        if not problems and (told := _softplus2_keeps_nothing(op) or _softplus2_input_left_alone(op)):
            problems.append(told)
        if not problems and (seen := _process_state_while_running(
                lambda: op(torch.tensor([-1.0, 0.5, 3.0], dtype=torch.float64)))):
            operation, differs = seen
            problems.append(f"on a float64 x, when your kernel called {operation}, {' and '.join(differs)} differed "
                            "from the caller's: set and set back inside the call, it is every thread's meanwhile (a "
                            "data loader's workers, a server's requests make their tensors by it). A kernel reads "
                            "the input's dtype from the input, and changes nothing of the process's")
        if not problems and op(torch.randn(3))._is_view():
            problems.append("the output is a view (of a tensor made inside the call), where the schema's `-> Tensor` "
                            "promises a new tensor: autograd treats a view otherwise, so an output made under no_grad "
                            "and written into in place with grad mode on is refused (\"A view was created in no_grad "
                            "mode and is being modified inplace with grad mode enabled\"), where torch's own "
                            "operators' outputs are not")
        if answer.KEY == "CompositeImplicitAutograd":  # the key is right: the kernel is at fault
            hint = ("\nThe key is right; look at the kernel. Lesson 02, sections 3 and 4: a composite kernel runs on "
                    "every kind of tensor that reaches it, with autograd watching: torch operations only, in the "
                    "input's dtype and device, whatever its strides.")
        else:
            hint = ("\nLook again at lesson 02, section 3: the entries of the dispatch table each composite key "
                    "fills, and what autograd sees of the kernel there.")
        return Result(not problems, "\n".join(problems) + hint if problems else f"{answer.KEY}: every case works")


def _softplus2_keeps_nothing(op) -> str | None:
    """A call's input and output are freed as soon as the caller drops them, by reference counting, as torch's own
    operators' are: nothing of the reader's (a default argument, a function's attribute, a closure) keeps them."""
    import gc

    for device, requires_grad in (("cpu", False), ("cpu", True), ("meta", True)):
        def call():
            x = torch.randn(4, device=device, requires_grad=requires_grad)
            return x, op(x)

        dropped = dict(zip(("input", "output"), _kept_once_dropped(call)))
        if kept := [what for what, (alive, _) in dropped.items() if alive]:
            gc.collect()
            until = ("until Python's cycle collector runs" if all(dropped[what][1]() is None for what in kept)
                     else "for good")
            grad = ", requiring grad" if requires_grad else ""
            return (f"a call's {' and '.join(kept)} ({device}{grad}), dropped by the caller, stayed alive {until}: "
                    "something of your file's (a default argument, an attribute of the function, a closure) keeps "
                    "what a call made or was given, and a training loop's tensors pile up step after step. A kernel "
                    "returns its output and keeps nothing")
    return None


def _softplus2_input_left_alone(op) -> str | None:
    """The schema writes nothing: a call leaves x as it found it, its values and its version, on a contiguous float32
    x that requires no grad (where a kernel might think a write, undone, goes unseen), 2x past float32's range too."""
    x = torch.tensor([3e38, 1.0, -2.0])
    values, version = x.clone(), x._version
    op(x)
    if torch.equal(x, values) and x._version == version:
        return None
    changed = (f"its values from {values.tolist()} to {x.tolist()}" if not torch.equal(x, values) else
               f"its version counter from {version} to {x._version} (its values written and written back)")
    return (f"a call on a contiguous float32 x that requires no grad changed {changed}: the schema (Tensor x, no (a!)) "
            "promises x is not written, and a write undone is a write: a backward that saved x for another operation "
            "refuses to run once its version moved, another thread reads x meanwhile, and a value past float32's range "
            "halfway does not come back (lesson 01, aliasing)")


def _outer_samples() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(a, b) for 02.meta_kernel: ranks 0 to 6, empty, non-contiguous and channels_last tensors, float32 and float64 in
    every pairing (a 0-d tensor's dtype weighs less in type promotion than one with dimensions)."""
    f32, f64 = torch.float32, torch.float64
    generator = torch.Generator().manual_seed(0)

    def tensor(shape, dtype):
        return torch.randn(shape, generator=generator, dtype=dtype)

    return [(tensor(4, f32), tensor(3, f32)), (tensor(1, f32), tensor(6, f32)), (tensor((2, 3), f32), tensor(4, f32)),
            (tensor(3, f64), tensor((2, 2), f64)), (tensor(3, f32), tensor(4, f64)), (tensor(2, f64), tensor(5, f32)),
            (tensor(0, f32), tensor(5, f32)), (tensor((2, 0), f64), tensor(3, f64)), (tensor((), f64), tensor(3, f32)),
            (tensor(3, f32), tensor((), f64)), (tensor((), f32), tensor((), f32)),
            (tensor((), f64), tensor((), f32)), (tensor((), f32), tensor((), f64)),  # two 0-d: the usual promotion
            (tensor((3, 2), f32).t(), tensor((4, 2), f32)[:, 0]), (tensor((2, 1, 3), f32), tensor(2, f64)),
            (tensor(2, f32), tensor((3, 1, 2), f32).transpose(0, 2)),
            (channels_last := tensor((2, 3, 2, 2), f32).contiguous(memory_format=torch.channels_last), tensor((), f32)),
            (channels_last, tensor(2, f64)),
            (tensor(1, f64), tensor(3, f32)),  # one element, yet a dimension: its dtype weighs as much as b's
            (tensor((1, 2, 1, 2, 1), f32), tensor((2, 1, 1, 1, 2), f32)),  # ranks 5 and 5: an output of rank 10
            (tensor((2, 1, 1, 2, 1, 3), f32), tensor((1, 2, 1, 1, 2), f64)),  # 6 and 5: rank 11, past any fixed 10
            (tensor((), f32), channels_last), (tensor((), f64), tensor((4, 3), f32).t()),  # a 0-d a before a laid-out b
            # An empty tensor beside one of another dtype: its dtype counts (result_type skips no empty tensor, as
            # torch.cat's promotion does).
            (tensor(0, f64), tensor(3, f32)), (tensor(3, f32), tensor((2, 0), f64))]


def _outer_high_ranks() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """02.meta_kernel's last samples, tried once the others pass (a kernel that writes past a fixed array crashes on
    them): an output of rank 64, the most many of torch's operators take (their dimensions in a 64-bit set), and one
    of rank 65: the CPU kernel takes any rank, and a fixed buffer of 64 sizes overflows. Then a layout of 5-d tensors
    beside a 0-d one (channels_last_3d: the CPU kernel's output is contiguous whatever its inputs' layout)."""
    return [(torch.ones((1,) * 31 + (2,)), torch.ones((2,) + (1,) * 31, dtype=torch.float64)),
            (torch.ones((1,) * 32 + (2,)), torch.ones((2,) + (1,) * 31, dtype=torch.float64)),
            # Last (no answer before them crashed): a 5-d channels_last_3d tensor beside a 0-d one, both ways.
            (volume := torch.ones(2, 3, 2, 2, 2).contiguous(memory_format=torch.channels_last_3d), torch.ones(())),
            (torch.ones((), dtype=torch.float64), volume)]


def _described(tensor: torch.Tensor) -> str:
    layout = ("" if tensor.is_contiguous() else " (channels_last)" if tensor.dim() == 4 and tensor.is_contiguous(
        memory_format=torch.channels_last) else " (channels_last_3d)" if tensor.dim() == 5 and tensor.is_contiguous(
        memory_format=torch.channels_last_3d) else " (non-contiguous)")
    return f"{list(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}{layout}"


def _meta_difference(real: torch.Tensor, fake: torch.Tensor, inputs: tuple[torch.Tensor, ...]) -> str | None:
    """How the Meta kernel's output differs from the CPU kernel's, in what torch.compile plans with; None if not."""
    from torch._prims_common import check_significant_strides

    if fake.device.type != "meta":
        return f"your kernel returns a tensor on {fake.device}, not on the inputs' device (meta)"
    if fake.shape != real.shape:
        return f"your kernel returns shape {list(fake.shape)}; the CPU kernel {list(real.shape)}"
    if fake.dtype != real.dtype:
        return f"your kernel returns {fake.dtype}; the CPU kernel {real.dtype}"
    if fake.is_inference():
        return ("your kernel returns an inference tensor (made under c10::InferenceMode): the CPU kernel's output is a "
                "normal tensor, and an in-place update of an inference tensor outside InferenceMode is refused")
    if any(fake.untyped_storage()._cdata == tensor.untyped_storage()._cdata for tensor in inputs):
        return ("your kernel returns a view of an input, sharing its storage: the CPU kernel returns a new tensor, and "
                "the schema promises one")
    if not check_significant_strides(real, fake, only_cuda=False)[0]:
        return (f"your kernel returns strides {list(fake.stride())}; the CPU kernel {list(real.stride())}: compiled "
                "code that reads the output by its strides reads the wrong elements")
    if fake.storage_offset() != real.storage_offset():
        return (f"your kernel returns a tensor at offset {fake.storage_offset()} of its storage; the CPU kernel's is "
                f"at {real.storage_offset()}: compiled code plans memory by the fake's (opcheck's test_faketensor "
                "compares it too)")
    if fake._is_view() and not real._is_view():
        return ("your kernel returns a view (of a tensor it made itself: its ._base is set), where the CPU kernel "
                "returns a tensor of its own: autograd treats a view's in-place update otherwise (under "
                "requires_grad, out.mul_(2) is refused on meta and runs on CPU), so what is traced on meta or fake "
                "tensors is not what runs")
    return None


def _innermost(error: BaseException) -> BaseException:
    """The error at the bottom of a chain: the compiler wraps the kernel's in its own, several times over."""
    while (inner := error.__cause__ or error.__context__) is not None:
        error = inner
    return error


_SYMBOLS = "lesson 01, 'Sizes are SymInt', and lesson 02, section 2 (csrc/meta.cpp)"


def _outer_unbacked(outer) -> str | None:
    """outer on fake tensors whose sizes are unbacked symbols: the counts of x[x > 0] and y[y > 0], which no trace
    knows, as `a`, as `b`, and as both. A kernel that branches on such a size (size == 0) cannot be traced; one that
    computes with it can."""
    from helpers import shapes

    for where, placed in (("as `a`", lambda count, other: ((count,), (3,))),
                          ("as `b`", lambda count, other: ((3,), (count,))),
                          ("as both `a` and `b`", lambda count, other: ((count,), (other,)))):
        mode, counts = shapes.unbacked(2)  # new symbols each time: nothing decided about them before
        a, b = placed(*counts)
        with mode:
            try:
                out = outer(torch.empty(a), torch.empty(b))
            except Exception as error:  # noqa: BLE001 - a C++ exception arrives as any Python error torch maps it to
                return (f"on a tensor whose size is unknown while tracing (the count of x[x > 0]), {where}, your Meta "
                        f"kernel raised {type(error).__name__}: {str(error).strip().splitlines()[0][:200]}: a kernel "
                        f"that reads a size as a number, or decides on its value (== 0, say), itself or through a "
                        f"torch function it calls on plain sizes, cannot be traced where no value exists ({_SYMBOLS})")
        if out.dim() != 2:
            return (f"on a tensor whose size is unknown while tracing, {where}, your kernel returns {out.dim()} "
                    "dimensions, not 2")
    return None


def _first_wrong_in_threads(call, arguments) -> str | None:
    """`call(argument)` in one thread per argument, all at once (torch.compile in several threads, a server): the
    first wrong result one of them reports (a string), else None."""
    import threading

    wrong, start = [], threading.Barrier(len(arguments))  # all at once: none done before the last has started

    def run(argument):
        start.wait()
        wrong.append(call(argument))

    threads = [threading.Thread(target=run, args=(argument,)) for argument in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return next(filter(None, wrong), None)


def _outer_in_threads(outer) -> str | None:
    """Four threads tracing shapes at once: each call must get its own output's sizes, nothing shared between
    calls."""
    def trace(argument):
        n, dtype_a, dtype_b = argument
        a, b = torch.empty(n, n + 1, device="meta", dtype=dtype_a), torch.empty(n + 2, device="meta", dtype=dtype_b)
        dtype = torch.promote_types(dtype_a, dtype_b)
        for _ in range(20000):  # a short kernel: many calls, for two threads to be in it at once
            out = outer(a, b)
            if (shape := tuple(out.shape)) != (n, n + 1, n + 2):
                return "shape", f"{(n, n + 1)} and {(n + 2,)} gave {shape}"
            if out.dtype != dtype:
                return "dtype", f"{dtype_a} and {dtype_b} gave {out.dtype}"
        return None

    now_doing("calling outer from four threads at once (a crash here alone: something every call shares, a static "
              "variable?)")
    # Each thread its own sizes and dtypes: what one call leaves in a shared variable is wrong for another's.
    f32, f64 = torch.float32, torch.float64
    if wrong := _first_wrong_in_threads(trace, ((2, f32, f32), (5, f64, f64), (9, f32, f64), (13, f64, f32))):
        kind, said = wrong
        return (f"called from four threads at once, on meta tensors, your Meta kernel gave a wrong {kind} ({said}): "
                "something in it is shared between calls (a static variable?), and calls in two threads overwrite it. "
                "Each call's output is computed from that call's inputs alone (lesson 02, section 2: the Meta layer)")
    return None


def _meta_pairs_of_every_dtype() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """For each dtype but float32 and float64 that torch names and of which a meta tensor can be made, in a fixed
    order: two meta tensors of it, and one beside a float32 one, both ways round."""
    import warnings

    common = [torch.complex64, torch.float8_e4m3fn, torch.bfloat16, torch.int32, torch.bool]  # reported first
    named = common + sorted({value for value in vars(torch).values() if isinstance(value, torch.dtype)}
                            - set(common), key=str)
    pairs = []
    with warnings.catch_warnings():  # "experimental" (complex32), "deprecated" (quantized): made all the same
        warnings.simplefilter("ignore")
        for dtype in named:
            if dtype in (torch.float32, torch.float64):  # the two outer takes: its CPU kernel would compute on meta
                continue
            try:
                torch.empty(1, dtype=dtype, device="meta")
            except (RuntimeError, TypeError, NotImplementedError):
                continue
            pairs += [(torch.empty(3, dtype=x, device="meta"), torch.empty(2, dtype=y, device="meta"))
                      for x, y in ((dtype, dtype), (dtype, torch.float32), (torch.float32, dtype))]
    return pairs


@exercise("02.meta_kernel", "hard")
def meta_kernel(path: Path) -> Result:
    library = load_cpp("exercise02_outer", path, label="your 02_meta_kernel.cpp")
    outer = torch.ops.exercise02.outer
    problems = []
    thread = thread_state()  # the caller's: what every later call on this thread depends on
    for a, b in _outer_samples() + _outer_high_ranks():
        if problems and a.dim() + b.dim() >= 64:  # the problems so far, before a sample that may crash
            break
        what = f"on meta tensors {_described(a)} and {_described(b)}"
        try:
            real = outer(a, b)
        except Exception as error:  # noqa: BLE001 - whichever Python error torch maps the C++ one to
            said = str(error).strip().splitlines()[0][:200].rstrip(".")
            return Result(False, f"on {_described(a)} and {_described(b)} the CPU kernel raised "
                                 f"{type(error).__name__}: {said}: the task is the Meta kernel, and the CPU kernel, "
                                 "as written, is what it must agree with")
        expected = (a.reshape(-1, 1) * b.reshape(1, -1)).reshape(a.shape + b.shape).to(torch.result_type(a, b))
        # Compared flat: torch.allclose takes 64 dimensions at most.
        if (real.dtype != expected.dtype or real.device != expected.device or not real.is_contiguous()
                or not torch.allclose(real.reshape(-1), expected.reshape(-1))):
            return Result(False, f"on {_described(a)} and {_described(b)} the CPU kernel no longer returns the "
                                 "contiguous outer product in a * b's dtype: the task is the Meta kernel, and the CPU "
                                 "kernel is what it must agree with")
        on_meta = (a.to("meta"), b.to("meta"))
        try:
            fake = outer(*on_meta)
        except Exception as error:  # noqa: BLE001 - a C++ exception arrives as whichever Python error torch maps it to
            problems.append(f"{what} your kernel raised {type(error).__name__}: "
                            f"{str(error).strip().splitlines()[0][:200]}; the CPU kernel runs")
            continue
        if difference := _meta_difference(real, fake, on_meta):
            problems.append(f"{what} {difference}")
        elif (again := outer(*on_meta)) is fake or again.untyped_storage()._cdata == fake.untyped_storage()._cdata:
            problems.append(f"{what} two calls returned the same tensor (or two views of one): each call's output is "
                            "the caller's own, as the CPU kernel's is, and a caller that writes into one (resize_, "
                            "unsqueeze_, a meta-device model's initialization) changes the other")
    if problems:
        more = f"\n(and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return Result(False, "\n".join(problems[:3]) + more + "\nThe Meta kernel must give what the CPU kernel "
                             "gives: read outer_cpu, and lesson 02, section 2.")
    if changed := thread_state_changes(thread):
        return Result(False, f"after calls of outer on meta tensors, {changed}: your kernel changed the caller's "
                             "thread, and every later call on it (of any operator, on any device) runs so. A kernel "
                             "computes its output and leaves the thread as it found it (lesson 02, section 2)")
    # Each kernel called directly (redispatch): a CPU tensor next to a meta one reaches the Meta kernel alone.
    def kernel_at(key: str):
        keyset = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, key))
        return lambda *args: outer.default.redispatch(keyset, *args)

    meta = torch.device("meta")
    for a, b in [(torch.ones(3, dtype=torch.int64, device=meta), torch.ones(2, device=meta)),
                 (torch.ones(3, device=meta), torch.ones(2, dtype=torch.half, device=meta)),
                 (torch.ones(3), torch.ones(2, device=meta)), (torch.tensor(2.0), torch.ones(2, device=meta)),
                 # and the other way round: a meta a, a CPU b
                 (torch.ones(3, device=meta), torch.ones(2)), (torch.ones(3, device=meta), torch.tensor(2.0)),
                 # every dtype: both inputs of it (float8 or complex, which a * b takes alone), and beside float32
                 *_meta_pairs_of_every_dtype(),
                 # and empty inputs, which hold nothing to compute: refused all the same
                 (torch.ones(0, dtype=torch.int64, device=meta), torch.ones(3, device=meta)),
                 (torch.ones(3, device=meta), torch.ones(2, 0, dtype=torch.half, device=meta)),
                 (torch.ones(0), torch.ones(3, device=meta)), (torch.ones(3, device=meta), torch.ones(0))]:
        try:
            kernel_at("CPU")(a, b)
            continue  # the CPU kernel takes them (the first check above says if it should not)
        except RuntimeError as error:
            refusal = str(error).splitlines()[0]
        try:
            kernel_at("Meta")(a, b)
        except RuntimeError:  # the CPU kernel's kind of refusal
            continue
        except Exception as error:  # noqa: BLE001 - another kind (TORCH_CHECK_TYPE's is a TypeError): said below
            return Result(False, f"on a {_described(a)} tensor on {a.device} and a {_described(b)} tensor on "
                                 f"{b.device}, your kernel raises {type(error).__name__}, where the CPU kernel raises "
                                 f"RuntimeError ({refusal}): a caller that handles the operator's refusals (except "
                                 "RuntimeError) misses the one on meta and fake tensors. A Meta kernel refuses as the "
                                 "CPU kernel does (lesson 02, section 2).")
        return Result(False, f"on a {_described(a)} tensor on {a.device} and a {_described(b)} tensor on {b.device}, "
                             f"your kernel returns a tensor, and the CPU kernel refuses them ({refusal}): "
                             "torch.compile would trace a call that fails when it runs. A Meta kernel runs the CPU "
                             "kernel's checks (lesson 02, section 2).")
    from torch._dynamo.testing import CompileCounterWithBackend  # here: importing torch._dynamo costs 2 s

    counter = CompileCounterWithBackend("aot_eager")  # fake tensors and AOTAutograd, no code generation
    compiled = torch.compile(lambda a, b: outer(a, b) * 2, backend=counter, dynamic=True, fullgraph=True)
    try:
        for n, m in [(3, 4), (5, 7), (9, 6)]:  # no size twice in a call: torch.compile gives equal sizes one symbol
            a, b = torch.randn(n), torch.randn(m, 2)
            torch.testing.assert_close(compiled(a, b), outer(a, b) * 2)
    except Exception as error:  # noqa: BLE001 - the compiler wraps the kernel's error
        cause = _innermost(error)
        # No kernel at Meta itself (one at another key, AutogradMeta say, serves plain meta tensors): fake tensors
        # look for one there, at the Meta key, or for a fake impl.
        unregistered = not torch._C._dispatch_has_kernel_for_dispatch_key("exercise02::outer", "Meta")
        where = ("lesson 02, section 2: the key a Meta kernel is registered at" if unregistered else _SYMBOLS)
        return Result(False, f"under torch.compile(dynamic=True), with fake tensors whose sizes are symbols, your "
                             f"Meta kernel failed: {type(cause).__name__}: {str(cause).strip().splitlines()[0][:300]}\n"
                             f"Look again at {where}.")
    if counter.frame_count != 1:
        return Result(False, f"torch.compile(dynamic=True) compiled {counter.frame_count} times for 3 sizes, not once: "
                             "your Meta kernel turned a symbolic size into a number, and the compiled graph had to be "
                             f"specialized to it ({_SYMBOLS})")
    if problem := _outer_unbacked(outer) or _outer_in_threads(outer):
        return Result(False, problem)
    # Backends outer has no kernel for: the call is refused, not answered by a kernel that computes nothing. (CUDA's
    # and others', read from the table: no GPU here.)
    others = [("a sparse CPU tensor", lambda: torch.ones(2).to_sparse()),
              ("a sparse CSR CPU tensor", lambda: torch.ones(2, 2).to_sparse_csr())]
    if torch.backends.mkldnn.is_available():
        others.append(("an mkldnn CPU tensor", lambda: torch.ones(2).to_mkldnn()))
    for what, make in others:
        try:
            outer(make(), make())
        except (NotImplementedError, RuntimeError):
            continue
        return Result(False, f"on {what}, which no kernel of outer's computes for, the call returned a tensor, one "
                             "that holds no product: your kernel answers for backends beyond Meta (a registration at a "
                             "key that stands for several?). A Meta kernel is registered at Meta (lesson 02, section "
                             "2)")
    # The sparse and nested meta keys too: a sparse fake tensor (torch.compile tracing) reaches them, where eager on
    # the real tensors finds no kernel.
    if filled := [key for key in ("CUDA", "XPU", "MPS", "HIP", "PrivateUse1", "SparseMeta", "SparseCsrMeta",
                                  "NestedTensorMeta", "SparseCPU", "SparseCsrCPU", "MkldnnCPU")
                  if torch._C._dispatch_has_kernel_for_dispatch_key("exercise02::outer", key)]:
        return Result(False, f"outer's dispatch table has a kernel at {filled[0]}, where it has none to compute with: "
                             "your kernel answers for backends beyond Meta (a registration at a key that stands for "
                             "several?), and a call on those tensors returns a tensor that holds no product. A Meta "
                             "kernel is registered at Meta (lesson 02, section 2)")
    # Outputs of 2**31 and 2**32 elements, past any 32-bit count: a meta tensor holds no memory, and the CPU kernel
    # computes them where memory allows, so torch.compile and export must be able to trace them. Then one whose first
    # stride is 2**32, past any 32-bit stride.
    for n, m in ((2**16, (2**15,)), (2**16, (2**16,)), (4, (2**16, 2**16))):
        elements = n * math.prod(m)
        what = (f"on meta tensors of {n} and {m[0]} elements (an output of 2**{elements.bit_length() - 1} elements)"
                if len(m) == 1 else f"on meta tensors of shapes [{n}] and {list(m)} (an output of "
                f"2**{elements.bit_length() - 1} elements, whose first stride is 2**32)")
        try:
            fake = outer(torch.empty(n, device="meta"), torch.empty(m, device="meta"))
        except Exception as error:  # noqa: BLE001 - a C++ exception arrives as whichever Python error torch maps it to
            return Result(False, f"{what} your kernel raised {type(error).__name__}: "
                                 f"{str(error).strip().splitlines()[0][:200]}; the CPU kernel has no such limit (it "
                                 "computes the output where memory allows), so a compiled or exported model would "
                                 "refuse what eager runs. The Meta kernel refuses what the CPU kernel refuses, and "
                                 "nothing more (lesson 02, section 2)")
        if (tuple(fake.shape), fake.stride(), fake.dtype) != ((n, *m), (math.prod(m), *m[1:], 1), torch.float32):
            return Result(False, f"{what} your kernel gives shape {list(fake.shape)}, strides {list(fake.stride())}, "
                                 f"{fake.dtype}: not the CPU kernel's output (lesson 02, section 2)")
    # Nor a decision about them: a guard (a fast path for large outputs, say) holds the graph to one side of it, and
    # sizes on the other side compile it again; the three sizes above may all fall on one side.
    mode, shape_env, (a, b) = _symbolic_fakes(torch.randn(3, 4), torch.randn(5, 2))
    shown = " and ".join(f"[{', '.join(str(size) for size in t.shape)}]" for t in (a, b))
    with mode:
        outer(a, b)
    if guards := [str(guard.expr) for guard in shape_env.guards]:
        return Result(False, f"on fake tensors of symbolic shapes {shown}, your Meta kernel decided something about "
                             f"the sizes: torch recorded the guard {guards[0]}"
                             + (f" (and {len(guards) - 1} more)" if len(guards) > 1 else "") + ", so a graph "
                             "compiled with torch.compile(dynamic=True) holds only where it holds, and sizes where it "
                             "does not compile it again. A Meta kernel computes the output's sizes from the "
                             f"inputs', and decides nothing about them ({_SYMBOLS})")
    # Above the backend, a call on meta tensors takes the path a call on CPU ones takes: outer has no backward, and
    # the autograd fallback marks the output as needing grad where an input does. A kernel at AutogradMeta skips it.
    inputs = (torch.randn(2, requires_grad=True), torch.randn(3))
    real = outer(*inputs)
    fake = outer(*(t.detach().to("meta").requires_grad_(t.requires_grad) for t in inputs))
    if fake.requires_grad != real.requires_grad:
        return Result(False, f"on meta tensors [2] float32, requiring grad, and [3] float32, your kernel's output "
                             f"{'requires' if fake.requires_grad else 'does not require'} grad, where the CPU kernel's "
                             f"{'does' if real.requires_grad else 'does not'}: a call on meta tensors reached your "
                             "kernel by another way than a call on CPU tensors reaches the CPU kernel (past autograd's "
                             "key?), so fake tensors (torch.compile, torch.export) skip what autograd does for outer: "
                             "the backward a project registers later (lesson 04) too. A Meta kernel is registered at "
                             "Meta (lesson 02, section 2)")
    # Inputs the CPU kernel takes whatever their memory: expanded (stride 0) and a slice past its storage's start.
    # (A copy to meta, .to("meta"), would make them dense: each is made so on meta too.)
    for what, make in (("an expanded [2, 3] (stride 0) and a [4]",
                        lambda device: (torch.zeros(3, device=device).expand(2, 3), torch.ones(4, device=device))),
                       ("a slice x[1:] of a [5] (a storage offset) and a [4]",
                        lambda device: (torch.zeros(5, device=device)[1:], torch.ones(4, device=device)))):
        real = outer(*make("cpu"))
        try:
            fake = outer(*make("meta"))
        except Exception as error:  # noqa: BLE001 - a C++ exception arrives as whichever Python error torch maps it to
            return Result(False, f"on meta tensors, {what}, your kernel raised {type(error).__name__}: "
                                 f"{str(error).strip().splitlines()[0][:200]}; the CPU kernel computes them, so a "
                                 "compiled or exported model refuses what eager runs. The Meta kernel refuses what the "
                                 "CPU kernel refuses, and nothing more (lesson 02, section 2)")
        if (tuple(fake.shape), fake.dtype, fake.stride()) != (tuple(real.shape), real.dtype, real.stride()):
            return Result(False, f"on meta tensors, {what}, your kernel returns shape {list(fake.shape)}, "
                                 f"{fake.dtype}, strides {list(fake.stride())}; the CPU kernel {list(real.shape)}, "
                                 f"{real.dtype}, {list(real.stride())} (lesson 02, section 2)")
    if kept := _outer_keeps(outer) or _outer_statics(library):
        return Result(False, kept)
    return Result(True, "the CPU kernel's shape, dtype, device and strides on meta tensors of every shape and dtype, "
                        "its refusals, one compile for three sizes, a size no trace knows, and four threads at once")


def _outer_statics(library: Path) -> str | None:
    """The function-local static variables of the reader's library (readelf's symbol table: LOCAL OBJECT symbols named
    `function(...)::name`; thread_local ones are TLS, and aside): one variable for every call and every thread, which
    two threads tracing at once share. A race on one shows only now and then; the symbol is always there."""
    import shutil
    import subprocess

    if shutil.which("readelf") is None:  # not on macOS: the threads above are all that looks there
        return None
    table = subprocess.run(["readelf", "-sW", "-C", str(library)], capture_output=True, text=True).stdout
    rows = [line.split(None, 7) for line in table.splitlines()]
    statics = [row[7] for row in rows if len(row) == 8 and row[3] == "OBJECT" and row[4] == "LOCAL"
               and ")::" in row[7] and not row[7].startswith("guard variable")]
    if not statics:
        return None
    return (f"your kernel's library holds {statics[0]}, a static variable of a function: one for every call and "
            "every thread, so two threads tracing at once (torch.compile's, a server's) read what the other wrote "
            "there. A race on it shows only now and then (the four threads above may have missed it); the variable "
            "is always there. Keep what a call computes in the call's own variables (lesson 02, section 2)")


def _outer_keeps(outer) -> str | None:
    """A call's inputs and output are freed as soon as the caller drops them, as torch's own kernels' are: nothing of
    the kernel's (a static, a global) keeps one. (A tensor made in C++ that C++ still holds keeps its Python object
    alive too: torch preserves it.)"""
    def call():
        a, b = torch.empty(2, 3, device="meta"), torch.empty(4, device="meta")
        return a, b, outer(a, b)

    kept = [what for what, (alive, _) in zip(("the input `a`", "the input `b`", "the output"), _kept_once_dropped(call))
            if alive]
    if not kept:
        return None
    return (f"{' and '.join(kept)} of a call on meta tensors stayed alive once the caller dropped them: something of "
            "your kernel's (a static, a global) keeps them. Under torch.compile these are fake tensors, each holding "
            "its trace's fake mode (FakeTensor.fake_mode, torch/_subclasses/fake_tensor.py). A kernel returns its "
            "output and keeps nothing (lesson 02, section 2)")


# ---------------------------------------------------------------------------------------------
# 03: fallthroughs and in-place operators


def _autograd_keys() -> list[str]:
    """The runtime keys the Autograd alias stands for: one per backend, AutogradOther and AutogradNestedTensor."""
    keys = {key for name, key in torch._C.DispatchKey.__members__.items()
            if name.startswith("Autograd") and key != torch._C.DispatchKey.AutogradFunctionality
            and not torch._C._dispatch_is_alias_key(key)
            and torch._C._dispatch_is_included_in_alias(key, torch._C.DispatchKey.Autograd)}
    return [torch._C._dispatch_key_name(key) for key in sorted(keys, key=lambda key: key.value)]


def _redispatch_refused(error: BaseException) -> str | None:
    """torch's internal assert for a redispatch handed a keyset that no call computes, told plainly; None for any
    other error."""
    if "INTERNAL ASSERT" not in str(error):
        return None
    return ("torch stopped at an internal check of its own (which it reports as a bug in torch): a redispatch was "
            "handed a keyset the dispatcher never computes for a call here. A redispatch runs whatever sits at the "
            "highest key of the keyset it is given, even a fallthrough: the dispatcher skips those only when it "
            "computes a call's keyset. A tensor's own keys (torch._C._dispatch_keys) hold keys an operator may only "
            "fall through (AutocastCPU; ADInplaceOrView, where it has no kernel there), and a mask "
            "(torch._C._after_autograd_keyset) holds every backend's keys and PythonDispatcher, the highest key of "
            "all.\nLook again at lesson 03, section 3: which keyset a kernel hands on.")


def _switch_threads_below_autograd() -> None:
    """Lets another thread run now, in a kernel below autograd (_keyset_kept_apart's two threads), and raises
    _StateLeft where that thread's call changed this thread's dispatch state meanwhile: nothing of this thread ran, so
    something its call shares with this one (a guard object made once and entered by every call) reached across."""
    import time

    before = thread_state()
    time.sleep(0)
    if changes := thread_state_changes(before):
        raise _StateLeft(f"while a call was below autograd, another thread's call changed its thread's state "
                         f"({changes}), and a call made then runs the kernels above again: something the two calls "
                         "share (one guard object, entered by each in turn?) belongs to one thread at a time")


@exercise("03.fallthrough", "easy")
def fallthrough(path: Path) -> Result:
    def count_odd(x):
        return (x % 2 != 0).sum()

    with operator("count_odd(Tensor x) -> Tensor", count_odd) as definition:
        definition.impl("count_odd", lambda x: torch.empty((), dtype=torch.int64, device="meta"), "Meta")
        # A neighbour in the namespace, with a gradient: what register does to count_odd must not reach it.
        definition.define("doubled(Tensor x) -> Tensor")
        definition.impl("doubled", lambda x: x * 2, "CPU")
        torch.library.register_autograd("exercise::doubled", lambda ctx, grad: grad * 2, lib=definition)
        neighbour = trace.dispatch_table("exercise::doubled")
        dangling = torch._C._dispatch_find_dangling_impls()  # registrations for operators no library defines (yet)
        op = torch.ops.exercise.count_odd
        before, mode = trace.dispatch_table(op), torch._C._get_autograd_fallback_mode()
        library = torch.library.Library("exercise", "FRAGMENT")  # the reader's, apart from the definition's
        answer = load_python(path)  # kept: a Library the module holds lives as long as the module
        thread, filters = thread_state(), list(warnings.filters)
        process, warn_always = _process_state(), torch.is_warn_always_enabled()
        try:
            answer.register(library)
        except Exception as error:  # noqa: BLE001 - torch refuses a registration with whatever error it maps to
            return Result(False, f"register raised {_raised(error, path)}\nLook again at lesson 03, section 2: a "
                                 "fallthrough, and the dispatch table of one operator it is registered in.")
        process_changed = _process_state_changed(process)  # said after the steps below: they were there first
        warn_always_changed = torch.is_warn_always_enabled() != warn_always
        torch.set_warn_always(warn_always)
        if changed := thread_state_changes(thread):
            return Result(False, f"register changed this thread's state: {changed}. That changes every later call on "
                                 "the thread, of every operator, not count_odd's dispatch table alone (lesson 00, "
                                 "section 2: thread-local state). The registration must change count_odd's dispatch "
                                 "table only.")
        table = trace.dispatch_table(op)
        if trace.dispatch_table("exercise::doubled") != neighbour:
            return Result(False, "register changed the dispatch table of exercise::doubled, another operator of the "
                                 "namespace, too: it loses its gradient (its Autograd keys fall through). The "
                                 "registration must change count_odd's dispatch table only (lesson 03, section 2).")
        if added := [entry.split("\n")[0].removeprefix("name: ")
                     for entry in torch._C._dispatch_find_dangling_impls() if entry not in dangling]:
            return Result(False, f"register also registered a kernel for {', '.join(added)}, an operator no library "
                                 "has defined yet: once one defines it (another file of the namespace, imported "
                                 "later), that registration is in its dispatch table too (a fallthrough at Autograd: "
                                 "it loses its gradient). The registration must change count_odd's dispatch table "
                                 "only (lesson 03, section 2).")
        if list(warnings.filters) != filters:
            return Result(False, "register changed Python's warning filters (warnings.filters): a process-wide "
                                 "setting that outlives lib, and hides torch's warnings for every operator, not "
                                 "count_odd's alone. The registration must change count_odd's dispatch table only.")
        if torch._C._get_autograd_fallback_mode() != mode:
            return Result(False, f"register changed torch's autograd fallback mode from {mode!r} to "
                                 f"{torch._C._get_autograd_fallback_mode()!r}: a process-wide mode, for every operator "
                                 "without an Autograd kernel, not count_odd's alone (lesson 03, section 1). The "
                                 "registration must change count_odd's dispatch table only.")
        if process_changed or warn_always_changed:
            what = process_changed or "whether torch warns every time, not once (torch.set_warn_always)"
            return Result(False, f"register changed {what}: a process-wide setting, for every operator and every "
                                 "tensor the program makes afterwards, not count_odd's dispatch table, and it "
                                 "outlives lib. The registration must change count_odd's dispatch table only.")
        problems = []
        hint = ("\nLook again at lesson 03, section 2: how an operator tells the dispatcher that a key has nothing to "
                "do for it, on every backend.")
        # A fallthrough where the entry is one already changes nothing either: ADInplaceOrView's backend fallback is
        # one (lesson 03's csrc/fallthrough.cpp registers it, to say so), and so is autocast's.
        changed = [key for key in {**before, **table}
                   if not key.startswith(("Autograd", "Undefined")) and table.get(key) != before.get(key)
                   and not (key in table and table[key].fallthrough and before.get(key) and before[key].fallthrough)]
        if changed:
            shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
            problems.append(f"your registration changed count_odd's entries at keys outside autograd ({shown}): the "
                            "entries at every other key must stay as they were")
        for device in ("cpu", "meta"):
            x = torch.arange(10, dtype=torch.int32, device=device)
            try:
                result = op(x)
            except (RuntimeError, NotImplementedError) as error:
                if told := _redispatch_refused(error):
                    return Result(False, f"on a {device} tensor, {told}{hint}")
                problems.append(f"count_odd no longer runs on {device}: {str(error).splitlines()[0][:160]}")
                continue
            if device == "cpu" and result.item() != 5:
                problems.append("count_odd no longer counts right")
            autograd_key = "AutogradCPU" if device == "cpu" else "AutogradMeta"
            step = next(step for step in trace.predict(op, x) if step.key == autograd_key)
            if step.status == "fallthrough":
                continue
            what = ("a kernel of yours runs on every call (it may hand the call on, but the dispatcher still calls it)"
                    if step.entry and step.entry.kind == "autograd kernel" else "torch's autograd fallback still runs")
            problems.append(f"on a {device} tensor the path is {' -> '.join(call_path(op, x))}: at {autograd_key}, "
                            f"{what}")
        not_skipped = [key for key in _autograd_keys() if key not in ("AutogradCPU", "AutogradMeta")
                       and not (key in table and table[key].fallthrough)]
        if not_skipped:
            kernels = [key for key in not_skipped if key in table]
            problems.append(f"for other backends' tensors autograd is not skipped, at {', '.join(not_skipped[:4])}"
                            + (f" and {len(not_skipped) - 4} more" if len(not_skipped) > 4 else "")
                            + (": a kernel is called there (even one that hands the call on), not a fallthrough"
                               if kernels else ""))
        if problems:
            return Result(False, "\n".join(problems) + hint)
        outlived = ("your fallthrough outlives the Library you were given: once `lib` is destroyed, count_odd's "
                    "Autograd keys still fall through. A registration lives as long as the Library it went into, and "
                    "only that Library can remove it (lesson 02, section 4: a _scoped_library removes its "
                    "registrations when its `with` ends; lesson 05, section 7, says the same of register_autocast); "
                    "registrations made when the file is imported change the dispatcher before anyone asks.")
        library._destroy()
        if trace.dispatch_table(op) != before:
            return Result(False, outlived)
        again = torch.library.Library("exercise", "FRAGMENT")  # as a test suite that makes a Library per test
        answer.register(again)
        table = trace.dispatch_table(op)
        if not all(key in table and table[key].fallthrough for key in _autograd_keys()):
            return Result(False, "once `lib` was destroyed, register given a new Library did not make count_odd's "
                                 "Autograd keys fall through again: each call registers into the Library it is given, "
                                 "whatever was registered, and removed, before." + hint)
        again._destroy()
        if trace.dispatch_table(op) != before:
            return Result(False, outlived)
        # Libraries made and dropped in turn, one per test: a new one often takes a dropped one's memory, and its id().
        del library, again
        for _ in range(4):
            fresh = torch.library.Library("exercise", "FRAGMENT")
            answer.register(fresh)
            table = trace.dispatch_table(op)
            if not all(key in table and table[key].fallthrough for key in _autograd_keys()):
                return Result(False, "Libraries made and dropped in turn (one per test), each given to register: one "
                                     "of them got no fallthrough, a new Library in the memory of a dropped one, whose "
                                     "id() it has: what your code keeps of the Libraries it was given (their ids?) "
                                     "took it for one registered already. Each call registers into the Library it is "
                                     "given." + hint)
            fresh._destroy()
            del fresh
        # And one dropped as a caller drops a Library it is done with, without _destroy(): torch removes a Library's
        # registrations when it is collected (the weakref.finalize in Library.__init__), once nothing holds it.
        import gc

        dropped = torch.library.Library("exercise", "FRAGMENT")
        answer.register(dropped)
        dropped_ref = weakref.ref(dropped)
        del dropped
        gc.collect()
        if dropped_ref() is not None or trace.dispatch_table(op) != before:
            return Result(False, "a Library given to register, then dropped by its caller without _destroy() (its last "
                                 "reference gone, as when a test's fixture ends; torch removes a collected Library's "
                                 "registrations): count_odd's Autograd keys still fall through"
                                 + (", and the Library is still alive: something your code keeps holds it"
                                    if dropped_ref() is not None else "")
                                 + ". A registration lives as long as the Library its caller holds." + hint)
        # And gone at once, by reference counting, not at the cycle collector's next pass, whenever that comes.
        collecting = gc.isenabled()
        gc.disable()
        try:
            dropped = torch.library.Library("exercise", "FRAGMENT")
            answer.register(dropped)
            dropped_ref = weakref.ref(dropped)
            del dropped
            in_a_cycle = dropped_ref() is not None
        finally:
            if collecting:
                gc.enable()
        gc.collect()
        if in_a_cycle:
            return Result(False, "a Library given to register, then dropped by its caller without _destroy(): it "
                                 "stayed alive, and count_odd's Autograd keys fell through, until Python's cycle "
                                 "collector ran: your code made a reference cycle through it (something of yours kept "
                                 "on the Library, that refers to it?). A registration lives as long as the Library its "
                                 "caller holds, and goes when the caller's last reference does." + hint)
        return Result(True, f"autograd skipped at all {len(_autograd_keys())} Autograd keys, CPU and meta tensors "
                            "included; the registration lives in your Library")


def _recording_mode():
    """A TorchDispatchMode that runs every operator call reaching it (at the Python key, below autocast and autograd)
    and records it in .calls as (operator, the dtypes of its tensor arguments), and in .grads whether any of those
    tensors requires grad."""
    from torch.utils._python_dispatch import TorchDispatchMode  # here: the module is only needed by a few checks
    from torch.utils._pytree import tree_leaves

    class Recording(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls: list[tuple[str, list[torch.dtype]]] = []
            self.grads: list[bool] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            leaves = tree_leaves(args)  # a Tensor[] argument's tensors too
            tensors = [a for a in leaves if isinstance(a, torch.Tensor)]
            self.calls.append((str(func), [a.dtype for a in tensors]))
            self.grads.append(any(a.requires_grad for a in tensors))
            return func(*args, **(kwargs or {}))

    return Recording()


class _StateLeft(Exception):
    """A call came back with the thread's include or exclude set changed."""


def _autocast_settings() -> dict:
    """What autocast reads on this thread, by name: its dtype, whether its region is on (the CPU's, and CUDA's), the
    cast cache, and how many regions are open."""
    return {"autocast's dtype on the CPU (torch.set_autocast_dtype)": torch.get_autocast_dtype("cpu"),
            "autocast's cast cache (torch.set_autocast_cache_enabled)": torch.is_autocast_cache_enabled(),
            "autocast on the CPU (torch.set_autocast_enabled)": torch.is_autocast_enabled("cpu"),
            "autocast's dtype on CUDA (torch.set_autocast_dtype)": torch.get_autocast_dtype("cuda"),
            "autocast on CUDA (torch.set_autocast_enabled)": torch.is_autocast_enabled("cuda"),
            "autocast's nesting (how many regions are open: the last to close empties the cast cache)":
                _autocast_nesting()}


def _autocast_nesting() -> int:
    """How many autocast regions are open on this thread (torch.autocast's entry adds one, its exit takes one away and,
    at none, empties the cast cache): read by adding one and taking it away, which does nothing else."""
    count = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return count


def _watching_dispatch_state(op, where_to_look: str = "lesson 03, section 3: the guard, and how long what it changes "
                                                       "lasts."):
    """op, called with the thread-local include and exclude sets, and autocast's settings, compared before and after
    each call."""

    def call(*args):
        before = (torch._C._dispatch_tls_local_include_set(), torch._C._dispatch_tls_local_exclude_set())
        settings = _autocast_settings()
        raised = None
        try:
            return op(*args)
        except BaseException as error:
            raised = error
            raise
        finally:
            if not isinstance(raised, _StateLeft):  # a change found inside the call is said as it was found
                state_kept(before, settings, raised)

    def state_kept(before: tuple, settings: dict, raised: BaseException | None) -> None:
        after = (torch._C._dispatch_tls_local_include_set(), torch._C._dispatch_tls_local_exclude_set())
        # Which call: one that raised leaves what an error skipped (a guard exited by hand, not by `with`).
        which = op._schema.name.split('::')[-1] + (f" (it raised {type(raised).__name__})" if raised else "")
        for name, old, new in zip(("include", "exclude"), before, after):
            if old != new:
                raise _StateLeft(f"after a call of {which} the thread-local {name} set had changed "
                                 f"({keyset_change(old, new)}): every later call on this thread walks a "
                                 f"different keyset.\nLook again at {where_to_look}")
        for name, old in settings.items():
            if (new := _autocast_settings()[name]) != old:
                raise _StateLeft(f"after a call of {which} {name} had changed ({old} to {new}): every later "
                                 f"operation on this thread runs with it. A kernel changes nothing but its "
                                 f"output.\nLook again at {where_to_look}")

    return call


_BELOW = "lesson 03, section 3: how a call is handed on below autograd, and which keys the keyset handed on keeps"


def _inplace_other_autograd_keys(op, ran: list[str]) -> list[str]:
    """exercise::add_ on tensors whose autograd key is not a backend's own (AutogradCPU): nested tensors carry
    AutogradNestedTensor beside it, mkldnn tensors AutogradOther instead. The Autograd alias covers every one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "The PyTorch API of nested tensors is in prototype stage"
        nested = [torch.nested.nested_tensor([torch.full((2,), value), torch.full((3,), value)]) for value in (1., 2.)]
    cases = [("nested tensors", nested, "NestedTensorCPU")]
    if torch.backends.mkldnn.is_available():  # a torch built without oneDNN has no mkldnn tensors
        cases.append(("mkldnn tensors", [torch.full((2, 3), value).to_mkldnn() for value in (1.0, 2.0)], "MkldnnCPU"))
    for what, (x, other), backend in cases:
        keys = str(torch._C._dispatch_keys(x)).removeprefix("DispatchKeySet(").removesuffix(")")
        ran.clear()
        try:
            op(x, other)
        except RecursionError:
            return [f"on {what} (keyset {keys}), x not requiring grad, the call came back to the Autograd kernel "
                    "again and again (RecursionError): forward's call did not go below every autograd key the call's "
                    f"keyset can hold ({_BELOW})"]
        values = [t.tolist() for t in x.unbind()] if x.is_nested else x.to_dense().flatten().tolist()
        if ran != ["ADInplaceOrView", backend] or values not in ([[3.0] * 2, [3.0] * 3], [3.0] * 6):
            return [f"on {what} (keyset {keys}), x not requiring grad, the kernels below autograd that ran were "
                    f"{ran or 'none'}, and x became {values}, not x + other ({_BELOW})"]
    return []


def _inplace_calls(op, ran: list[str], autograd_runs: list) -> list[str]:
    """What exercise::add_ must do under autograd: [] when it does, else the problems. `ran` lists the check's kernels
    below autograd as they run, `autograd_runs` the reader's Autograd kernel's."""
    problems = []
    x, other = torch.ones(3, requires_grad=True), torch.full((3,), 2.0, requires_grad=True)
    y = x.clone()
    ran.clear()
    autograd_runs.clear()
    returned = op(y, other)
    if len(autograd_runs) > 1:
        return [f"your Autograd kernel ran {len(autograd_runs)} times for one call: the call in forward came back to "
                f"it, through the top of the dispatcher or with a keyset that still held an Autograd key ({_BELOW})"]
    if returned is not y:
        problems.append("add_ returned a new tensor, not its first argument itself (the schema's (a!) on the return): "
                        "autograd hands back a new tensor for an input that forward returns, unless it was told that "
                        "forward modified it")
    if not torch.equal(y.detach(), torch.full((3,), 3.0)):
        problems.append(f"x + other should be [3, 3, 3]; y became {y.detach().tolist()}")
    elif "CPU" not in ran:
        problems.append(f"y became x + other, but exercise::add_'s CPU kernel did not run: forward wrote into y some "
                        f"other way than through the operator's own kernels ({_BELOW})")
    elif "ADInplaceOrView" not in ran:
        problems.append("exercise::add_'s ADInplaceOrView kernel did not run: forward's call went on below autograd "
                        "past that key. torch's own Autograd kernels for in-place and view operators hand the call on "
                        "to it, where such an operator's version and view bookkeeping lives; a keyset past it, or the "
                        "AutoDispatchBelowADInplaceOrView guard and a call from the top, skip it, as add's no-graph "
                        f"branch does for a functional operator ({_BELOW})")
    if y._version == 0:
        problems.append("y's version counter did not move: autograd was not told that y changed")
    (y * 5).sum().backward()
    for name, tensor in (("x (the tensor y was cloned from)", x), ("other", other)):
        if tensor.grad is None or not torch.equal(tensor.grad, torch.full((3,), 5.0)):
            problems.append(f"d/d{name}: {None if tensor.grad is None else tensor.grad.tolist()}, should be [5, 5, 5]")
    if not problems:
        try:
            op(torch.ones(2, requires_grad=True), torch.ones(2))
            problems.append("writing in place into a leaf that requires grad should be refused, as torch's add_ does")
        except RuntimeError:
            pass
        problems += _inplace_target_without_grad(op)
    if not problems:
        ran.clear()
        ym, om = (torch.ones(3, device="meta", requires_grad=True) for _ in range(2))
        ym = ym.clone()
        returned = op(ym, om)
        if "CPU" in ran or "Meta" not in ran:
            problems.append(f"on meta tensors the kernels below autograd that ran were {ran or 'none'}, not the ones "
                            f"the call's own keyset picks ({_BELOW})")
        elif returned is not ym or ym.grad_fn is None:
            problems.append("on meta tensors add_ did not hand back its first argument with a history")
    if not problems:
        problems += _inplace_other_autograd_keys(op, ran)
    if not problems:
        problems += _inplace_after_a_refused_call(op)
    if not problems:
        y = torch.ones(3, requires_grad=True).clone()
        with _recording_mode() as mode:
            returned = op(y, torch.full((3,), 2.0, requires_grad=True))
        if "exercise.add_.default" not in [name for name, _ in mode.calls]:
            problems.append("inside a TorchDispatchMode the mode never saw add_: the keyset forward handed on lacks "
                            "the keys the thread-local include set adds to the call's (the mode's Python key; lesson "
                            f"00, section 2: thread-local state; {_BELOW})")
        elif returned is not y or not torch.equal(y.detach(), torch.full((3,), 3.0)) or y.grad_fn is None:
            problems.append("inside a TorchDispatchMode add_ did not write x + other into its first argument and hand "
                            "it back with a history")
    if not problems:
        problems += (_inplace_writes_after_the_call(op) + _inplace_into_a_view(op) + _inplace_constant_other(op)
                     + _inplace_result_freed(op))
    if not problems:
        args = tuple(torch.randn(3, dtype=torch.float64, requires_grad=True) for _ in range(2))
        if not torch.autograd.gradcheck(lambda a, b: op(a.clone(), b), args, raise_exception=False):
            problems.append("gradcheck failed")
        elif not torch.autograd.gradgradcheck(lambda a, b: op(a.clone(), b) ** 2, args, raise_exception=False):
            problems.append("gradgradcheck failed (of add_(x, other) ** 2): with create_graph=True (a gradient "
                            "penalty, a Hessian-vector product) the gradients your backward returns must themselves be "
                            "differentiable: a backward that detaches them, or computes outside autograd, stops there")
        elif told := _sum_gradients_differentiable(lambda a, b: op(a.clone(), b), ("x", "other")):
            problems.append(told)
    if not problems and (told := _complex_gradients(lambda x, other: op(x.clone(), other),
                                                    lambda x, other: x.clone().add_(other), ("x", "other"),
                                                    "x.clone().add_(other)")
                         or _complex_gradients(lambda x, other: op(x.clone(), other.conj()),
                                               lambda x, other: x.clone().add_(other.conj()),
                                               ("x", "other (given as other.conj(), lazily conjugated)"),
                                               "x.clone().add_(other.conj())")
                         or _complex_gradients(lambda x, other: op(x.clone(), other),
                                               lambda x, other: x.clone().add_(other), ("x", "other (real)"),
                                               "x.clone().add_(other)", real_second=True)
                         or _complex_gradients(lambda x, other: op(x.clone(), other),
                                               lambda x, other: x.clone().add_(other),
                                               ("x (complex128)", "other (complex64)"), "x.clone().add_(other)",
                                               second_dtype=torch.complex64)
                         or _complex_gradients(lambda x, other: op(x.clone(), other),
                                               lambda x, other: x.clone().add_(other),
                                               ("x (complex128)", "other (complex128)"), "x.clone().add_(other)",
                                               second_dtype=torch.complex128)
                         # A real other of every floating dtype: torch's add_ takes each into a complex x.
                         or next((told for dtype in (torch.float64, torch.bfloat16)
                                  if (told := _complex_gradients(
                                      lambda x, other: op(x.clone(), other), lambda x, other: x.clone().add_(other),
                                      ("x (complex128)", f"other (real, {_dtype_names([dtype])})"),
                                      "x.clone().add_(other)", real_second=True, second_dtype=dtype))), None)
                         or _tangent_kept(lambda make_dual: op(make_dual(torch.ones(3), torch.ones(3)).clone(),
                                                               make_dual(torch.full((3,), 2.0), torch.full((3,), 2.0))),
                                          "y = x.clone(), x of tangent [1, 1, 1], and other of tangent [2, 2, 2], "
                                          "add_(y, other)", 3.0, "AddInPlace")
                         or _inplace_tangents_kept_apart(op) or _inplace_other_kinds_kept_apart(op)
                         or _tangent_kept(_in_no_grad(lambda make_dual: op(
                                              make_dual(torch.ones(3), torch.ones(3)).clone(),
                                              make_dual(torch.full((3,), 2.0), torch.full((3,), 5.0)))),
                                          "add_(y, other) inside torch.no_grad() (an optimizer's step; forward mode "
                                          "does not depend on grad mode), y = x.clone(), x of tangent [1, 1, 1] and "
                                          "other of tangent [5, 5, 5]", 6.0,
                                          "AddInPlace")
                         # Complex tangents: d(x + other) is dx + d(other), nothing conjugated (conjugation is
                         # backward's, for a complex gradient).
                         or _tangent_kept(lambda make_dual: op(
                                              make_dual(torch.ones(3, dtype=torch.complex128),
                                                        torch.full((3,), 1 - 1j, dtype=torch.complex128)).clone(),
                                              make_dual(torch.full((3,), 2.0, dtype=torch.complex128),
                                                        torch.full((3,), 2 + 3j, dtype=torch.complex128))),
                                          "y = x.clone(), x complex of tangent [1-1j, 1-1j, 1-1j], and other complex "
                                          "of tangent [2+3j, 2+3j, 2+3j], add_(y, other)", 3 + 2j, "AddInPlace")
                         or _forward_mode_alike(op)
                         # Last, once the complex gradients are right: double backward across dtypes too.
                         or _sum_gradients_differentiable(lambda a, b: op(a.clone(), b), ("x", "other"), (
                             (torch.complex128, torch.complex64), (torch.complex128, torch.float64)))):
        problems.append(told)
    return problems


def _forward_mode_alike(op) -> str | None:
    """add_(y, other) on dual tensors twice: the tangent on y alone, then on other alone. A Function without a jvp
    refuses both (Function.apply says it has none); one with a jvp computes both. A jvp that works for one and, for the
    other, runs into an error of torch's is a broken jvp, not a refusal."""
    import torch.autograd.forward_ad as forward_ad

    raised = {}
    for given, x_tangent, other_tangent in (
            ("on y alone (y = x.clone(), x of tangent [1, 1, 1], other plain)", torch.ones(3), None),
            ("on other alone (y plain, other of tangent [2, 2, 2])", None, torch.full((3,), 2.0))):
        with forward_ad.dual_level():
            x, other = torch.ones(3), torch.full((3,), 2.0)
            x = x if x_tangent is None else forward_ad.make_dual(x, x_tangent)
            other = other if other_tangent is None else forward_ad.make_dual(other, other_tangent)
            try:
                op(x.clone(), other)
            except (NotImplementedError, RuntimeError) as error:
                raised[given] = str(error).strip().splitlines()[0][:200]
    if len(raised) == 1:
        (failed, error), = raised.items()
        return (f"add_(y, other) on dual tensors (forward-mode AD), a tangent on one input: the call computed the "
                f"output's tangent with the tangent on {'other' if failed.startswith('on y') else 'y'} alone, and "
                f"raised with the tangent {failed}: {error}. A jvp computes the output's tangent from each input's, "
                "None where an input has none; a Function without a jvp refuses every call on dual tensors, and says "
                "so. One that works in some cases and fails in others is broken (lesson 03, section 4)")
    return None


def _inplace_into_a_view(op) -> list[str]:
    """add_ into a column of a buffer (a view, not contiguous), and into a transposed y: the write lands in the memory
    the caller sees, not in a copy."""
    buffer = torch.zeros(3, 4)
    op(buffer[:, 1], torch.ones(3))
    x = torch.zeros(3, 2, requires_grad=True)
    y = x.clone().t()
    op(y, torch.ones(2, 3))
    if not torch.equal(buffer[:, 1], torch.ones(3)) or not torch.equal(y.detach(), torch.ones(2, 3)):
        return ["add_ into a column of a 3 x 4 buffer (a view, not contiguous), and into a transposed y: the sum did "
                "not land in their memory (a contiguous copy written instead?): an in-place operator writes the "
                "caller's tensor, whatever its strides"]
    return []


def _inplace_constant_other(op) -> list[str]:
    """add_(y, other) with an `other` that requires no grad (a constant: a fixed bias, a mask): x still gets its
    gradient."""
    x = torch.ones(3, requires_grad=True)
    y = x.clone()
    op(y, torch.full((3,), 2.0))
    (y * 5).sum().backward()
    if x.grad is None or not torch.equal(x.grad, torch.full((3,), 5.0)):
        return [f"y = x.clone(); add_(y, other) with an `other` that requires no grad (a constant): d/dx is "
                f"{None if x.grad is None else x.grad.tolist()}, should be [5, 5, 5]: x's gradient does not depend on "
                "whether other needs one (ctx.needs_input_grad says which inputs want one)"]
    return []


def _outlives_its_last_reference(make) -> bool:
    """Whether the tensor `make()` returns stays alive once its last reference is dropped, with the cycle collector
    off: torch's own outputs are freed at once, by reference counting; one the graph points back at (through an
    attribute of ctx) waits for the collector."""
    (kept, _), = _kept_once_dropped(lambda: (make(),))
    return kept


def _kept_once_dropped(make) -> list[tuple[bool, weakref.ref]]:
    """For each object of the tuple `make()` returns: whether it is still alive once dropped, read with the cycle
    collector off (reference counting frees what nothing else holds, at once; a cycle waits for the collector), and a
    weak reference to it, to read again later."""
    import gc

    gc.disable()
    try:
        refs = [weakref.ref(made) for made in make()]
        return [(ref() is not None, ref) for ref in refs]
    finally:
        gc.enable()


def _inplace_result_freed(op) -> list[str]:
    """The written tensor and its graph are freed as soon as the caller drops them, by reference counting, as torch's
    add_'s are: nothing the Function keeps (an attribute of ctx) points back at the tensor it marked dirty."""
    def written(into_itself: bool):
        def make():
            y = torch.ones(1000, requires_grad=True).clone()
            op(y, y if into_itself else torch.ones(1000, requires_grad=True))
            return y
        return make

    if _outlives_its_last_reference(written(False)):
        return ["y = x.clone(); add_(y, other); del y: y is still alive until Python's cycle collector runs: the graph "
                "refers back to it (an attribute of ctx holding x, which forward returns: y -> grad_fn -> ctx -> y), "
                "so each step's tensors, and their memory, outlive the step. What backward needs is saved with "
                "ctx.save_for_backward, which makes no cycle (lesson 04, section 1)"]
    if _outlives_its_last_reference(written(True)):
        return ["y = x.clone(); add_(y, y) (y doubled in place); del y: y is still alive until Python's cycle "
                "collector runs: the graph refers back to it through `other`, which is y here (an attribute of ctx "
                "holding other: y -> grad_fn -> ctx -> y), so each step's tensors outlive the step. What backward "
                "needs is saved with ctx.save_for_backward, which makes no cycle, and only that (lesson 04, section 1)"]
    from torch.multiprocessing.reductions import StorageWeakRef

    y = torch.ones(1000, requires_grad=True).clone()  # kept, and its graph with it, until a backward
    other = torch.ones(1000, requires_grad=True) * 3  # an intermediate: mul by a number keeps no tensor
    freed = StorageWeakRef(other.untyped_storage())
    op(y, other)
    del other
    if not freed.expired():
        return ["y = x.clone(); add_(y, other), other an intermediate; then the caller dropped other while y and its "
                "graph live on (until a backward): other's memory is still held, where torch's own add_ frees it: "
                "add_'s backward needs none of other's values, only its dtype. Yours keeps other, or a view or alias "
                "of it (saved for backward, or kept on ctx: a detached one too), which it does not need (lesson 04, "
                "section 1: what forward saves)"]
    # And the written tensor, the caller's graph kept (a loss made from it) while it drops the tensor itself.
    y = torch.ones(1000, requires_grad=True).clone()
    freed = StorageWeakRef(y.untyped_storage())
    loss = (op(y, torch.ones(1000, requires_grad=True)) * 2).sum()  # noqa: F841 - the graph, alive until the end
    del y
    if not freed.expired():
        return ["y = x.clone(); loss = (add_(y, other) * 2).sum(); then the caller dropped y while the loss and its "
                "graph live on (until a backward): y's memory is still held, where torch's own add_ frees it: "
                "add_'s backward needs none of y's values. Yours keeps y, or a view or alias of it (saved for "
                "backward, or kept on ctx: a detached one too), which it does not need (lesson 04, section 1: what "
                "forward saves)"]
    return []


def _inplace_writes_after_the_call(op) -> list[str]:
    """Backward after later writes: two add_ in a row into one tensor (an accumulation loop), and `other` written in
    place after the call. The gradient of x + other needs neither tensor's values, and torch's add_ gives it."""
    x, a, b = (torch.ones(3, requires_grad=True) for _ in range(3))
    y = x.clone()
    op(y, a)
    op(y, b)
    w = torch.ones(3, requires_grad=True)
    other = w * 1
    z = torch.ones(3, requires_grad=True).clone()
    op(z, other)
    other.mul_(0)
    for what, result, wanted in (("two add_ calls in a row into one tensor", 2 * y, (x, a, b)),
                                 ("`other` written in place after the call", z, (w,))):
        try:
            grads = torch.autograd.grad(result.sum(), wanted)
        except RuntimeError as error:
            said = str(error).splitlines()[0].split(" Hint:")[0].rstrip(".")
            return [f"{what}: backward failed: {said}. The gradient of x + other needs "
                    "neither tensor's values: forward saves what backward reads, and nothing else"]
        if not all(torch.equal(grad, torch.full((3,), 2.0 if result is not z else 1.0)) for grad in grads):
            return [f"{what}: gradients {[grad.tolist() for grad in grads]}"]
    return []


def _inplace_after_a_refused_call(op) -> list[str]:
    """A call the CPU kernel refuses (shapes that do not broadcast into x), then one that must work as the first did:
    what forward changed on its way down must be undone on the way out of an error too."""
    try:
        op(torch.ones(3, requires_grad=True).clone(), torch.ones(2, requires_grad=True))
        return ["add_ of a tensor of 2 elements into one of 3 returned, where the CPU kernel refuses it"]
    except RuntimeError:
        pass
    x, other = torch.ones(3, requires_grad=True), torch.full((3,), 2.0, requires_grad=True)
    y = x.clone()
    op(y, other)
    (y * 5).sum().backward()
    grads = [None if tensor.grad is None else tensor.grad.tolist() for tensor in (x, other)]
    if grads != [[5.0] * 3] * 2:
        return [f"after one call that the CPU kernel refused (shapes that do not broadcast), the next call's gradients "
                f"were {grads[0]} for x and {grads[1]} for other, where the same call gave both [5, 5, 5] before: what "
                "your forward changed on its way down (a flag, a guard) was not undone when the call below it raised"]
    return []


def _inplace_target_without_grad(op) -> list[str]:
    """add_ into a tensor that does not require grad: from other that does, and into one that mul saved."""
    problems = []
    acc, w = torch.zeros(3), torch.full((3,), 2.0, requires_grad=True)
    returned = op(acc, w)
    if returned is not acc:
        problems.append("add_(t, w), t not requiring grad and w requiring it, returned a new tensor, not t itself")
    elif not acc.requires_grad:
        problems.append("after add_(t, w), t not requiring grad and w requiring it, t still does not require grad: "
                        "w's gradient has no way back from what t now holds")
    else:
        (acc * 5).sum().backward()
        if w.grad is None or not torch.equal(w.grad, torch.full((3,), 5.0)):
            problems.append(f"after add_(t, w), t not requiring grad and w requiring it, d/dw: "
                            f"{None if w.grad is None else w.grad.tolist()}, should be [5, 5, 5]")
    v, c = torch.ones(3, requires_grad=True), torch.full((3,), 2.0)
    z = v * c  # mul saves c, which does not require grad, for v's gradient
    version = c._version
    op(c, torch.ones(3))
    if c._version == version:
        problems.append("z = v * c saves c (not requiring grad) for backward; add_(c, ones) then wrote into c and its "
                        "version counter did not move, so backward would use c's new values without noticing")
    else:
        try:
            z.sum().backward()
            problems.append("add_(c, ones) wrote into c, which z = v * c had saved, and backward did not refuse")
        except RuntimeError:
            pass
    return problems


def _complex_shown(values: torch.Tensor) -> str:
    return "[" + ", ".join(f"{z.real:g}{z.imag:+g}j" for z in values.tolist()) + "]"


def _complex_gradients(call, reference, names: tuple[str, ...], formula: str,
                       real_second: bool = False, second_dtype: torch.dtype | None = None) -> str | None:
    """The gradients of complex inputs, for a loss whose gradient at the output is complex ((out * w).real.sum(), w
    complex), against those of torch's own `formula` (`reference`); None where they agree. For complex tensors autograd
    hands backward the conjugate Wirtinger gradient (torch's docs, "Autograd for Complex Numbers"): a backward right
    for real inputs may still be wrong for complex ones, and a real gradient at the output does not tell.
    real_second: the second input real (a real bias added into a complex tensor), its gradient real too.
    second_dtype: the second input's dtype, where it is not the first's."""
    values = [torch.tensor([1 + 2j, -3j, 0.5 - 1j]), torch.tensor([2 - 1j, 0.5j, -1 + 0j])]
    if real_second:
        values[1] = values[1].real.clone()
    if second_dtype is not None:
        values = [values[0].to(torch.complex128), values[1].to(second_dtype)]
    weights = torch.tensor([0.5 - 2j, 1 + 1j, -3j])

    def gradients(function):
        inputs = [value.clone().requires_grad_() for value in values[:len(names)]]
        return torch.autograd.grad((function(*inputs) * weights).real.sum(), inputs)

    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        try:
            got_all = gradients(call)
        except RuntimeError as error:
            if not real_second:
                raise
            told = str(error).splitlines()[0].split("  (Could this error")[0][:200]
            dtype = "" if values[1].dtype == torch.float32 else f" of {_dtype_names([values[1].dtype])}"
            return (f"{formula} with a complex x and a real other{dtype} (which torch's add_ takes: a real bias added "
                    "into a complex tensor), under a loss that gives the output a complex gradient: backward raised: "
                    f"{told}. Each gradient has its input's kind: a real input's gradient is real, as torch's own "
                    "formulas give it (its docs: Autograd for Complex Numbers)")
    with warnings.catch_warnings(record=True) as torch_warned:
        warnings.simplefilter("always")
        want_all = gradients(reference)
    if new := [str(w.message) for w in warned if str(w.message) not in {str(w.message) for w in torch_warned}]:
        kind = "a real other added into a complex x" if real_second else "complex inputs"
        said = new[0].splitlines()[0].split(" (Triggered internally")[0][:160]  # not the build's source path
        return (f"{formula} with {kind}, under a loss that gives the output a complex gradient: backward warned "
                f"\"{said}\", where torch's own does not: a project that runs with warnings as errors (pytest -W "
                "error, a CI's setting) fails there. A gradient is made in its input's kind by what torch's formulas "
                "use, without a cast that warns")
    for name, got, want in zip(names, got_all, want_all):
        if not torch.allclose(got, want):
            return (f"for complex inputs, and a loss whose gradient at the output is complex ((out * w).real.sum(), "
                    f"w = {_complex_shown(weights)}), the gradient of {name} is {_complex_shown(got)}, where torch's "
                    f"{formula} gives {_complex_shown(want)}: for complex tensors, backward receives and returns "
                    "gradients as torch's own formulas do (its docs: Autograd for Complex Numbers), and a real "
                    "gradient at the output cannot tell a wrong one")
    return None


def _sum_gradients_differentiable(call, names: tuple[str, str],
                                  dtypes: tuple = ((torch.float64, torch.float64),)) -> str | None:
    """For a sum of two inputs (of each pair of `dtypes`): with create_graph=True and a grad_output that requires grad
    (double backward: a gradient penalty, a Hessian-vector product), each gradient the backward returns requires grad,
    and, in float64, is grad_output to autograd too. gradgradcheck checks only the gradients that require grad, and
    only in the dtypes it is given: a detached one slips by it."""
    for dtype_pair in dtypes:
        inputs = tuple(torch.randn(3, dtype=dtype, requires_grad=True) for dtype in dtype_pair)
        grad_output = torch.randn(3, dtype=dtype_pair[0], requires_grad=True)
        gradients = torch.autograd.grad(call(*inputs), inputs, grad_output, create_graph=True, allow_unused=True)
        weights = torch.randn(3, dtype=torch.float64)
        said = ("" if len(set(dtype_pair)) == 1 else
                f", a {dtype_pair[1]} `{names[1]}` added into a {dtype_pair[0]} `{names[0]}`")
        for name, gradient in zip(names, gradients):
            if gradient is None:
                continue  # no gradient at all: the checks before this one say so
            if not gradient.requires_grad:
                return (f"with create_graph=True and a grad_output that requires grad (double backward: a gradient "
                        f"penalty, a Hessian-vector product){said}, the gradient of `{name}` your backward returned "
                        "does not require grad: detached (grad.detach(), or computed under torch.no_grad()), so its "
                        "derivative is lost. gradgradcheck checks only the gradients that require grad, and cannot "
                        "tell")
            if dtype_pair != (torch.float64, torch.float64):
                continue
            (through,) = torch.autograd.grad((gradient * weights).sum(), grad_output, allow_unused=True)
            if through is None or not torch.allclose(through, weights):
                return (f"with create_graph=True, the gradient of `{name}` your backward returned is grad_output's "
                        "values but not, to autograd, grad_output: its derivative by grad_output is "
                        f"{'none' if through is None else 'wrong'}")
    return None


def _inplace_other_kinds_kept_apart(op) -> str | None:
    """add_ with a complex other, then add_ with a real one, then the first call's backward, under a loss that gives
    the output a complex gradient: what backward knows of other's kind is its own call's, not the last call's."""
    x, other = torch.tensor([1 + 2j, -3j], requires_grad=True), torch.tensor([2 - 1j, 0.5j], requires_grad=True)
    weights = torch.tensor([0.5 - 2j, 1 + 1j])
    first = op(x.clone(), other)
    op(torch.tensor([1 + 1j, 2j]), torch.tensor([1.0, 2.0], requires_grad=True))
    (got,) = torch.autograd.grad((first * weights).real.sum(), [other])
    (want,) = torch.autograd.grad((x.clone().add_(other) * weights).real.sum(), [other])
    if not torch.allclose(got, want):
        return (f"add_(y, other) with a complex other, then add_ with a real other (a real bias), then the first "
                f"call's backward: the gradient of the first other is {_complex_shown(got)}, where torch's "
                f"x.clone().add_(other) gives {_complex_shown(want)}: backward read something of the second call's "
                "(kept on the class, or in a module's variable?). What backward needs comes from its own call's ctx "
                "(lesson 04, section 1)")
    return None


def _inplace_tangents_kept_apart(op) -> str | None:
    """add_(y, other) twice, y without a tangent, other a dual tensor: other's tangent stays its own. (A jvp that hands
    y other's tangent tensor itself, where y had none, lets the second add_ write into other's.) AddInPlace without a
    jvp refuses forward mode: nothing to compare."""
    import torch.autograd.forward_ad as forward_ad

    with forward_ad.dual_level():
        other = forward_ad.make_dual(torch.full((3,), 2.0), torch.ones(3))
        y = torch.zeros(3)
        try:
            op(y, other)
        except (NotImplementedError, RuntimeError):
            return None  # refused: no jvp
        first = forward_ad.unpack_dual(y).tangent
        first = None if first is None else first.clone()  # as it is now: the second call may write into it
        try:
            op(y, other)
        except (NotImplementedError, RuntimeError):  # the second call refused: nothing kept to compare
            kept = torch.ones(3)
        else:
            kept = forward_ad.unpack_dual(other).tangent
    if first is None or not torch.equal(first, torch.ones(3)):
        shown = "none" if first is None else first.tolist()
        # What torch hands a jvp for a written input without a tangent (the lessons do not show it): said where the
        # answer's tangent reads as if it got None.
        missing = first is None or not first.any()
        return (f"add_(y, other), y without a tangent and other a dual tensor of tangent [1, 1, 1] (forward-mode AD): "
                f"y's tangent afterwards is {shown}, where torch's own y.add_(other) gives it other's, [1, 1, 1]"
                + (". A written input without a tangent of its own comes to the jvp as zeros, not as None" if missing
                   else ""))
    if not torch.equal(kept, torch.ones(3)):
        return (f"add_(y, other) twice, y without a tangent and other a dual tensor of tangent [1, 1, 1] (forward-mode "
                f"AD): other's tangent became {kept.tolist()}: y's tangent was other's tangent tensor itself, and the "
                "second add_ wrote into it. A tangent written in place is the written tensor's own")
    return None


def _in_no_grad(call):
    """A call for _tangent_kept, made inside torch.no_grad(): forward-mode AD does not depend on grad mode, so torch's
    own operators keep the tangent there too."""
    def made_in_no_grad(make_dual):
        with torch.no_grad():
            return call(make_dual)
    return made_in_no_grad


def _tangent_kept(call, given: str, want: complex, function: str) -> str | None:
    """`call(make_dual)`, made inside a dual level (forward-mode AD, torch.autograd.forward_ad), returns a tensor whose
    tangent must be `want` in every element, or the call refuses (`function` has no jvp, and Function.apply says so).
    The kernels below autograd, like C++ ones, carry no tangent: a call that goes below autograd past `function` drops
    it without a word."""
    import torch.autograd.forward_ad as forward_ad

    handed = []  # (a tangent the call was given, its values then): the caller's, which a jvp reads and leaves

    def make_dual(primal, tangent):
        handed.append((tangent, tangent.clone()))
        return forward_ad.make_dual(primal, tangent)

    with forward_ad.dual_level():
        try:
            out = call(make_dual)
        except (NotImplementedError, RuntimeError):
            return None  # refused: no jvp
        tangent = forward_ad.unpack_dual(out).tangent
    if changed := next(((before, now) for now, before in handed if not torch.equal(now, before)), None):
        return (f"on {given}: a tangent the caller gave went from {changed[0].tolist()} to {changed[1].tolist()}: the "
                "jvp wrote into the tangent it was handed, which is the caller's (the input's own, read again by "
                "the next call and by anything else that asks for it). A jvp computes a new tangent from it")
    if tangent is None or not torch.equal(tangent, torch.full((3,), want, dtype=tangent.dtype)):
        shown = "None" if tangent is None else tangent.tolist()
        return (f"on {given} (forward-mode AD: torch.autograd.forward_ad, torch.func.jvp), the output's tangent is "
                f"{shown}, where it is [{want:g}, {want:g}, {want:g}]. Either {function}'s jvp computes another "
                f"tangent than the output's, or the call went below autograd without {function} (which, without a "
                "jvp, refuses forward mode), and the kernels there, like C++ kernels, carry no tangent")
    return None


def _exported(function, *args) -> str | None:
    """torch.export of a model that calls `function`: export traces at the PreDispatch key, above autograd, so an
    Autograd kernel that hands the call on with keys above its own still in the keyset gets it back, for ever."""
    class Model(torch.nn.Module):
        def forward(self, *inputs):
            return function(*inputs)

    try:
        torch.export.export(Model(), args)
    except RecursionError:
        return ("torch.export of a model that calls it: the call came back to the Autograd kernel again and again "
                "(RecursionError). Export traces at PreDispatch, a key above autograd: the keyset handed on below "
                "autograd must hold no key above it either")
    except Exception as error:  # noqa: BLE001 - export wraps whatever the kernels raise
        cause = _innermost(error)
        return (f"torch.export of a model that calls it failed: {type(cause).__name__}: "
                f"{str(cause).strip().splitlines()[0][:200]}")
    return None


def _leaf_refused(op) -> str | None:
    """add_ into a leaf that requires grad, and into a view of one (a row of a parameter): refused, as torch's add_
    refuses them, before anything is written."""
    for what, make_target in [("a leaf that requires grad", lambda leaf: leaf),
                              ("a view of a leaf that requires grad (leaf[0], a row of a parameter)",
                               lambda leaf: leaf[0])]:
        leaf = torch.zeros(2, 3, requires_grad=True)
        try:
            op(make_target(leaf), torch.ones(3))
        except RuntimeError:
            if leaf._version == 0 and not leaf.detach().any():
                continue
            return (f"add_ into {what} was refused only after it wrote into the leaf (now "
                    f"{leaf.detach().tolist()}, version {leaf._version}): torch's add_ refuses before writing, as the "
                    f"Autograd kernel you were given does; Function.apply refuses a dirty leaf only after forward ran")
        return (f"add_ into {what} ran: torch's add_ refuses it (a leaf's value is what autograd differentiates with "
                "respect to), and so does the Autograd kernel you were given")
    return None


def _leaf_written_without_grad(op) -> str | None:
    """add_ into a leaf that requires grad, inside torch.no_grad(): an optimizer's step. torch's add_ writes it."""
    leaf = torch.zeros(3, requires_grad=True)
    try:
        with torch.no_grad():
            op(leaf, torch.ones(3))
    except RuntimeError as error:
        return (f"add_ into a leaf that requires grad, inside torch.no_grad() (what an optimizer's step does to every "
                f"parameter), raised {str(error).strip().splitlines()[0][:160]!r}: torch's add_ writes it there, and "
                "so does the Autograd kernel you were given: with grad mode off nothing is recorded, so nothing "
                "needs the leaf's old value")
    if not torch.equal(leaf.detach(), torch.ones(3)):
        return f"add_ into a leaf inside torch.no_grad(): the leaf holds {leaf.detach().tolist()}, not the sum"
    return None


def _subclass_passed_on(call, given: list, name: str) -> str | None:
    """`call(x)` on a plain CPU tensor, then on a tensor subclass that carries the Python key itself (TwoTensor, torch's
    test subclass: two tensors in one): below autograd the call must reach the subclass's __torch_dispatch__, which
    hands the kernel the plain tensors inside. `given` lists the types the kernel received."""
    from torch.testing._internal.two_tensor import TwoTensor

    call(torch.ones(3))  # a plain call first: a keyset kept from it is a plain CPU tensor's
    given.clear()
    out = call(TwoTensor(torch.ones(3), torch.ones(3)))
    if any(kind != "Tensor" for kind in given) or type(out) is not TwoTensor:
        return (f"on a tensor subclass that carries the Python key itself (TwoTensor, torch's test subclass: two "
                f"tensors in one), {name}'s CPU kernel received {', '.join(given) or 'nothing'} and the call returned "
                f"a {type(out).__name__}: the call below autograd skipped the Python key, which this call's keyset "
                "holds, so the subclass's __torch_dispatch__ never ran. The keyset handed on is the call's own, each "
                "time, not one kept from an earlier call")
    return None


def _subclass_tangent_passed_on(op, given: list) -> str | None:
    """scale2 of a dual tensor whose primal is a plain tensor and whose tangent a tensor subclass (TwoTensor): a
    tangent's calls are dispatched on its own keys, which hold the Python key where the primal's do not. Refused (no
    forward-mode formula), or 2 * the tangent, a TwoTensor."""
    import torch.autograd.forward_ad as forward_ad
    from torch.testing._internal.two_tensor import TwoTensor

    given.clear()
    with forward_ad.dual_level():
        x = forward_ad.make_dual(torch.ones(3), TwoTensor(torch.full((3,), 5.0), torch.full((3,), 7.0)))
        try:
            tangent = forward_ad.unpack_dual(op(x)).tangent
        except (RuntimeError, NotImplementedError):  # refused: no forward-mode formula
            return None
    what = ("on a dual tensor whose primal is a plain tensor and whose tangent a tensor subclass (TwoTensor, torch's "
            "test subclass: two tensors in one; a tangent made by a subclass-aware transform)")
    if any(kind != "Tensor" for kind in given):
        return (f"{what}, scale2's CPU kernel received {', '.join(given)}: the tangent's call below autograd skipped "
                "the Python key, which the tangent's keyset holds and the primal's does not. A call is dispatched on "
                "the keys of the tensors it is given")
    if not (type(tangent) is TwoTensor and torch.equal(tangent.a, torch.full((3,), 10.0))
            and torch.equal(tangent.b, torch.full((3,), 14.0))):
        return f"{what}: the output's tangent is {tangent!r}, where 2 * the tangent is TwoTensor([10...], [14...])"
    return None


def _tangent_recorded(op) -> str | None:
    """scale2 of a dual tensor whose tangent requires grad (it depends on w: reverse over forward, a loss built on a
    directional derivative): the output's tangent is 2 * it, recorded by autograd, or forward mode is refused."""
    import torch.autograd.forward_ad as forward_ad

    w = torch.tensor(3.0, requires_grad=True)
    with forward_ad.dual_level():
        try:
            tangent = forward_ad.unpack_dual(op(forward_ad.make_dual(torch.ones(3), torch.ones(3) * w))).tangent
        except (RuntimeError, NotImplementedError):  # refused: no forward-mode formula
            return None
    what = ("on a dual tensor whose tangent requires grad (ones * w, w a parameter: reverse mode over forward mode, as "
            "a loss built on a directional derivative needs)")
    if tangent is None or not tangent.requires_grad:
        return (f"{what}, the output's tangent does not require grad: it was computed where autograd does not record "
                "(below the guard, or under no_grad), so a loss built on it gets no gradient through it")
    (grad,) = torch.autograd.grad(tangent.sum(), w)
    if grad.item() != 6.0:
        return f"{what}: d(sum of the output's tangent)/dw is {grad.item():g}, where 2 * 3 ones give 6"
    return None


def _keyset_kept_apart(call, expected: torch.Tensor, what: str, function: type) -> str | None:
    """`call(device)`, one call of the operator on new tensors of that device, 300 times in each of two threads at
    once, one on CPU tensors (each result must equal `expected`) and one on meta tensors: None where each call ran
    with its own keyset, else the diagnosis. A keyset kept anywhere but in the call (on the class, in a global) is
    another thread's by the time forward reads it, if the thread is switched between the two. CPython's lock rarely
    switches threads there; a Python without it (3.13t) runs both at once: the check makes the switch, yielding at
    each `function.apply`."""
    import time

    other_keyset = ("the call ran with the other thread's keyset. A keyset kept where another call finds it (on the "
                    "class, in a global) is overwritten by that call; hand it to forward as an argument of apply")

    def calls(device: str) -> str | None:
        for _ in range(300):
            try:
                out = call(device)
            except _StateLeft as left:  # the thread's own state, left changed: said as it is
                return str(left)
            except Exception as error:  # noqa: BLE001 - a kernel of the other device raises anything
                first_line = str(error).splitlines()[0][:150]
                return f"a call on {device} tensors raised {type(error).__name__}: {first_line}: {other_keyset}"
            if out.device.type != device or device == "cpu" and not torch.equal(out.detach(), expected):
                gave = out.detach().tolist() if device == "cpu" else out.device
                return f"a call on {device} tensors gave {gave}: {other_keyset}"
            if not out.requires_grad:
                return (f"a call on {device} tensors that require grad gave an output that does not: the call went "
                        "past autograd (a registration another thread's call made for the process, while it ran?). "
                        "What a call changes for the process (a registration, even one it removes again) changes "
                        "every other thread's calls while it lasts")
        return None

    apply = function.apply

    def apply_after_a_switch(*args):
        time.sleep(0)  # the other thread runs now
        return apply(*args)

    function.apply = apply_after_a_switch
    try:
        wrong = _first_wrong_in_threads(calls, ("cpu", "meta"))
    finally:
        function.apply = apply
    if wrong:
        return f"called from two threads at once, one on CPU tensors and one on meta tensors, {what}: {wrong}"
    return None


@exercise("03.inplace_autograd", "hard")
def inplace_autograd(path: Path) -> Result:
    ran, lazy, excluded_at_view = [], [], []

    given = []

    def cpu_kernel(x, other):  # a plain backend kernel: it writes, and bumps no version
        _switch_threads_below_autograd()  # another thread may run now (_keyset_kept_apart)
        ran.append("CPU")
        given.append(type(x).__name__)
        lazy.append(other.is_conj() or other.is_neg())  # a kernel that reads memory needs their fallbacks first
        with torch._C._AutoDispatchBelowADInplaceOrView():
            return x.add_(other)

    def meta_kernel(x, other):
        _switch_threads_below_autograd()
        ran.append("Meta")
        return x

    def backend_kernel(backend):  # a plain backend kernel for nested or mkldnn tensors: it writes, and records
        def kernel(x, other):
            ran.append(backend)
            with torch._C._AutoDispatchBelowADInplaceOrView():
                return x.add_(other)
        return kernel

    def ad_inplace_or_view_kernel(keyset, x, other):  # records, and hands the call on
        ran.append("ADInplaceOrView")
        excluded_at_view.append(torch._C._dispatch_tls_local_exclude_set())  # what a call of its own would skip
        with torch._C._AutoDispatchBelowADInplaceOrView():
            return torch.ops.exercise.add_.default.redispatch(keyset & torch._C._after_ADInplaceOrView_keyset, x, other)

    with operator("add_(Tensor(a!) x, Tensor other) -> Tensor(a!)", cpu_kernel, tags=(torch.Tag.inplace,)) as library:
        library.impl("add_", meta_kernel, "Meta")
        for backend in ("NestedTensorCPU", "MkldnnCPU"):
            library.impl("add_", backend_kernel(backend), backend)
        library.impl("add_", ad_inplace_or_view_kernel, "ADInplaceOrView", with_keyset=True)
        answer = load_python(path)
        autograd_runs = []

        def autograd_kernel(keyset, x, other):  # the reader's, counted
            autograd_runs.append(keyset)
            return answer.autograd_kernel(keyset, x, other)

        library.impl("add_", autograd_kernel, "Autograd", with_keyset=True)
        op = _watching_dispatch_state(torch.ops.exercise.add_.default)
        try:
            problems = _inplace_calls(op, ran, autograd_runs)
            with torch.no_grad():
                z = torch.zeros(3)
                op(z, torch.ones(3))
        except RecursionError:
            return Result(False, "the call came back to the Autograd kernel again and again (RecursionError): forward "
                                 "must reach the CPU kernel below autograd (lesson 03, section 3: redispatch)")
        except _StateLeft as left:
            return Result(False, str(left))
        except RuntimeError as error:
            if told := _redispatch_refused(error):
                return Result(False, told)
            raise
        if not torch.equal(z, torch.ones(3)):
            problems.append("under torch.no_grad() add_ no longer adds")
        elif z._version == 0:
            problems.append("under torch.no_grad() add_ wrote into z, and z's version counter did not move: the "
                            "ADInplaceOrView kernel given here hands the call on and bumps nothing, so every call's "
                            "bump is forward's own, a call that records no graph too")
        if not problems and (told := _exported(lambda x, other: op(x.clone(), other) * 2,
                                               torch.randn(3, requires_grad=True), torch.randn(3))):
            problems.append(told)
        def add_ones(device: str):  # y = zeros.clone(), recording a graph; add_(y, ones) is ones
            return op(torch.zeros(3, device=device, requires_grad=True).clone(), torch.ones(3, device=device))

        if not problems and (told := _keyset_kept_apart(add_ones, torch.ones(3), "add_", answer.AddInPlace)):
            problems.append(told)
        if not problems and (told := _leaf_refused(op) or _leaf_written_without_grad(op)):
            problems.append(told)
        if not problems and (told := _subclass_passed_on(lambda x: op(x.clone(), torch.ones(3)), given, "add_")):
            problems.append(told)
        if not problems:
            lazy.clear()
            op(torch.zeros(2, dtype=torch.complex64), torch.tensor([1 + 1j, 2 - 3j]).conj())
            if any(lazy):
                problems.append("add_(x, other) with x plain complex and other a conjugate (lazily: it carries the "
                                "Conjugate key, which x does not): the CPU kernel received other still conjugated "
                                "lazily, its Conjugate fallback skipped: the keyset handed on lacked other's keys. A "
                                "kernel that reads memory, as csrc's do, then adds c where conj(c) was given")
        if not problems and (told := _above_autograd_once(library, "add_", lambda: add_ones("cpu"),
                                                          "add_(zeros that require grad, cloned, ones)",
                                                          torch.ones(3))):
            problems.append(told)
        view_key = torch._C.DispatchKeySet(torch._C.DispatchKey.ADInplaceOrView)
        if not problems and any(excluded & view_key == view_key for excluded in excluded_at_view):
            problems.append("exercise::add_'s ADInplaceOrView kernel ran with ADInplaceOrView in the thread's exclude "
                            "set: forward's guard excluded it as well as autograd, so an in-place or view call that "
                            "kernel makes of its own, before a guard of its own, skips ADInplaceOrView: no version "
                            "bump, no view recorded. aten's own in-place operators (x.add_(y), x requiring grad) "
                            "reach their ADInplaceOrView kernel with the autograd keys excluded, ADInplaceOrView not")
    hint = "\nLook again at lesson 03, section 4 (in-place operators and gradients)." if problems else ""
    return Result(not problems, "\n".join(problems) + hint if problems else "both inputs get their gradients, and "
                                                                             "the version counter moves")


# ---------------------------------------------------------------------------------------------
# 04: backward formulas and redispatch


def _values(values: torch.Tensor) -> list[float]:
    """A tensor's values to 4 significant digits, as a diagnosis prints them (1e-110 stays 1e-110)."""
    return [float(f"{value:.4g}") for value in values.tolist()]


# 04.backward's samples: (what, x, the output's gradient). The first is the one a wrong formula fails first; zeros and
# the ends of each dtype's range (where x ** 3 under- or overflows) are where a formula that holds "almost
# everywhere" fails, and gradcheck never tries them; digits float32 cannot hold are where a float32 computation shows.
_CUBE_SAMPLES = [
    ("float64", [0.5, -1.0, 2.0], [1.0, -2.0, 0.5], torch.float64),
    ("float64, zeros", [0.0, 3.0, -0.0, -0.25], [1.0, 1.0, -2.0, 4.0], torch.float64),
    ("float64, digits float32 cannot hold", [0.1, -1 / 3, 2**0.5], [1.0, -0.7, 0.3], torch.float64),
    ("float32, zeros", [0.5, -1.0, 0.0, 2.0], [1.0, -2.0, 3.0, 0.5], torch.float32),
    ("float64, the ends of its range", [1e-110, -1e105, 3.0], [1.0, 2.0, 1.0], torch.float64),
    ("float32, the ends of its range", [1e-15, -1e13, 3.0], [1.0, 2.0, 1.0], torch.float32),
    ("float32, a gradient past its range (inf), and a NaN from above", [2e19, 1.0, 3.0], [1.0, float("nan"), -1.0],
     torch.float32),
    ("float64, a NaN from above at 0", [0.0, 2.0], [float("nan"), 1.0], torch.float64),
    # x already NaN or infinite where nothing flows back (a masked loss): the gradient is NaN, as torch's own pow gives
    ("float32, a NaN and an infinite x under a zero gradient", [float("nan"), float("inf"), 2.0], [0.0, 0.0, 1.0],
     torch.float32),
    # A loss scaled for float16 (GradScaler): grad * 3 overflows where grad * 3x^2, the order torch's pow_backward
    # takes, holds.
    # (grad * x) * 3 overflows too at x = 0.7 under 2**15, GradScaler's scale in its first steps.
    ("float16, a large gradient from above (a loss scaled for float16, as GradScaler scales it)",
     [0.1, -0.5, 2.0, -0.7], [30000.0, 30000.0, 1.0, 32768.0], torch.float16),
    ("bfloat16, beyond float16's range (3x^2 is 270000 at x = 300)", [300.0, -2.0], [1.0, 0.5], torch.bfloat16),
    # A scaled loss whose gradient overflows: inf is what GradScaler looks for, to skip the step and lower its scale.
    ("float16, a scaled gradient from above that overflows (inf), and an infinite x", [40.0, float("inf"), 0.5],
     [16384.0, 1.0, 16384.0], torch.float16),
    ("bfloat16, a gradient past its range (inf)", [1e19, -2.0], [1000.0, 1.0], torch.bfloat16),
    # The same order in every dtype: a gradient from above near each one's largest value, under a small x.
    ("float32, a large gradient from above (near float32's largest, under a small x)", [1e-3, -0.5, 2.0],
     [2e38, 2e38, 1.0], torch.float32),
    ("bfloat16, a large gradient from above (near bfloat16's largest, under a small x)", [1e-3, -0.5, 2.0],
     [2e38, 2e38, 1.0], torch.bfloat16),
    ("float64, a large gradient from above (near float64's largest, under a small x)", [1e-3, -0.5, 2.0],
     [1.5e308, 1.5e308, 1.0], torch.float64),
]
# Each dtype's own precision, with room for rounding order.
_CUBE_RTOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
_CUBE_DIFFERENTIABLE = "lesson 04, section 1: a backward that calls operators through the dispatcher"


def _real_cube(x):
    # Real floating-point x only: the task's gradients are real ones (a complex x would need the conjugate: torch's
    # convention for complex gradients, which lesson 04 does not teach).
    torch._check(x.is_floating_point(), lambda: f"exercise::cube: a real floating-point x, not {x.dtype}")
    return x**3


@contextmanager
def _cube_operator(answer, name: str = "cube"):
    """exercise::<name>: x ** 3, with CPU and Meta kernels and the answer's setup_context and backward; gone after."""
    with operator(f"{name}(Tensor x) -> Tensor", _real_cube) as library:
        library.impl(name, _real_cube, "Meta")
        torch.library.register_autograd(f"exercise::{name}", answer.backward, setup_context=answer.setup_context,
                                        lib=library)
        try:
            yield getattr(torch.ops.exercise, name)
        finally:
            library._destroy()


def _cube_samples(cube, alive: list) -> str | None:
    """04.backward's samples, one by one: None when backward gives the right gradient on each, else why not."""
    # Each sample's x kept in alive, with the x's before it: none lands in an earlier one's memory or gets its id()
    # (_cube_beyond_the_samples does, on purpose).
    for i, (what, values, grad_values, dtype) in enumerate(_CUBE_SAMPLES):
        what = f"{what}: " if i else ""  # the first sample's diagnosis, as lesson 04 stores it for the skeleton
        x = torch.tensor(values, dtype=dtype, requires_grad=True)
        alive.append(x)
        grad_output = torch.tensor(grad_values, dtype=dtype)
        given, before = grad_output.clone(), x.detach().clone()  # what the check hands over, kept apart
        (grad,) = torch.autograd.grad(cube(x), x, grad_output)
        if grad.requires_grad:
            return (f"{what}a plain backward (no create_graph) returned a gradient that requires grad, with a graph of "
                    "its own: your backward records what it computes even when autograd does not ask (an "
                    "enable_grad() inside?), so each gradient holds a graph alive, and .numpy() refuses it. With "
                    "create_graph=True autograd records backward's operations by itself (lesson 04, section 2).")
        if not torch.allclose(grad_output, given, rtol=0, atol=0, equal_nan=True):  # unchanged, NaN included
            return (f"{what}your backward wrote into the gradient it received (the output's gradient {_values(given)} "
                    f"became {_values(grad_output)}). That tensor is autograd's: add's backward hands the same one to "
                    "both its inputs, and after .sum() it is an expanded view that an in-place write refuses (lesson "
                    "04, section 3: what a backward receives).")
        if not torch.allclose(x.detach(), before, rtol=0, atol=0, equal_nan=True):  # unchanged, NaN included
            return (f"{what}your backward changed x itself (from {_values(before)} to {_values(x.detach())}): a saved "
                    "input is the caller's tensor, not a copy")
        expected = (given.double() * (3 * before.double() ** 2)).to(dtype)  # torch's order: 3x^2 first, as in float64
        if torch.allclose(grad, expected, rtol=_CUBE_RTOL[dtype], atol=0, equal_nan=True):
            continue
        diagnosis = (f"{what}d/dx at {_values(before)} for the output gradient {_values(given)}: yours "
                     f"{_values(grad)}, right {_values(expected)}")
        if dtype == torch.float64 and torch.allclose(grad, expected, rtol=_CUBE_RTOL[torch.float32], atol=0):
            error = ((grad - expected).abs() / expected.abs()).max().item()
            return (f"{what}d/dx at {_values(before)}: yours is off by {error:.1e} of the right value: the precision "
                    "of float32, not of x's float64. gradcheck's tolerance lets that pass; a gradient computed in "
                    "another dtype than x's loses what float64 is for (lesson 04, section 2: why float64).")
        if (expected.isinf() & grad.isfinite()).any():
            return diagnosis + ("\nA gradient past the dtype's range is infinite, as torch's own x ** 3 gives it: a "
                                "GradScaler (torch.amp) looks for inf to skip that step and lower its scale, and a "
                                "finite stand-in makes the optimizer step on a wrong gradient.")
        if (grad.isinf() & expected.isfinite()).any():
            return diagnosis + ("\nInfinite where torch's own x ** 3 gives a finite gradient: a value computed on the "
                                "way passed the dtype's range, where torch's computation of the same gradient stays "
                                "within it (lesson 04, section 2).")
        if i > 0:
            return diagnosis + ("\nRight on the first sample, wrong on this one: a formula must hold at every x, 0 and "
                                "the ends of the dtype's range included, and gradcheck only tries the inputs it is "
                                "given (lesson 04, section 2).")
        ones = torch.autograd.grad(cube(x), x, torch.ones_like(given))[0]
        right_for_ones = torch.allclose(ones, 3 * before**2)
        return diagnosis + ("\nRight when the output's gradient is all ones, wrong for others: what does backward "
                            "receive, and what must it do with it? (lesson 04, section 1)" if right_for_ones else "")
    return None


def _cube_beyond_the_samples(cube) -> str | None:
    """04.backward past its samples: None when backward holds through .sum(), on a transposed x, on an x in reused
    memory, on meta tensors, when x changes after forward, and under double backward; else why not."""
    import numpy
    matrix = torch.tensor([[0.5, -1.0, 2.0], [0.0, 1.5, -3.0]], dtype=torch.float64, requires_grad=True)
    try:  # .sum()'s backward hands on a gradient expanded from one number: strides (0, 0)
        cube(matrix).sum().backward()
    except RuntimeError as error:
        return (f"through .sum() of a 2 x 3 x, whose backward hands on an expanded gradient: RuntimeError: "
                f"{str(error).splitlines()[0][:200]}\n(lesson 04, section 3: what a backward receives)")
    if not torch.allclose(matrix.grad, 3 * matrix.detach() ** 2):
        return f"through .sum() of a 2 x 3 x: d/dx {matrix.grad.tolist()}, right {(3 * matrix.detach() ** 2).tolist()}"
    empty = torch.empty(0, 3, dtype=torch.float64, requires_grad=True)  # an empty batch
    try:
        (grad,) = torch.autograd.grad(cube(empty).sum(), empty)
    except (RuntimeError, IndexError) as error:
        return (f"through .sum() of an empty x (0 x 3: an empty batch): {type(error).__name__}: "
                f"{str(error).splitlines()[0][:200]}: backward takes every x forward takes, no element included")
    if grad.shape != empty.shape:
        return f"through .sum() of an empty x (0 x 3: an empty batch): a gradient of shape {list(grad.shape)}"
    transposed = torch.tensor([[0.5, 2.0], [-1.0, 3.0]], dtype=torch.float64).t().requires_grad_()
    try:
        (grad,) = torch.autograd.grad(cube(transposed), transposed, torch.ones(2, 2, dtype=torch.float64))
    except RuntimeError as error:
        message = str(error).splitlines()[0].split(". Use ")[0][:200]  # torch's advice is the answer
        return (f"on a transposed (non-contiguous) x: RuntimeError: {message}\n(lesson 04, section 3: a backward gets "
                "the tensors as they are, with their strides)")
    if not torch.allclose(grad, 3 * transposed.detach() ** 2):
        return f"on a transposed x: d/dx {grad.tolist()}, right {(3 * transposed.detach() ** 2).tolist()}"
    # Two x in the same memory, one after the other, as when a freed tensor's memory is reused: a backward that keeps
    # something by address (and version, which starts at 0 for each) uses the first x's for the second.
    memory = numpy.array([0.5, -1.0, 2.0])
    for values in ([0.5, -1.0, 2.0], [1.5, 4.0, -2.0]):
        memory[:] = values
        x = torch.from_numpy(memory).requires_grad_()
        (grad,) = torch.autograd.grad(cube(x), x, torch.ones(3, dtype=torch.float64))
    if not torch.allclose(grad, 3 * x.detach() ** 2):
        return (f"for an x in the memory an earlier x used (freed memory is reused), with other values: d/dx "
                f"{_values(grad)}, right {_values(3 * x.detach() ** 2)} for {_values(x.detach())}. Your backward used "
                "something computed for the earlier x: a tensor's address and version do not tell it from another "
                "(lesson 04, section 1: what forward saves, each time).")
    # Fresh tensors one after the other, each freed before the next (a training loop): Python reuses a freed object's
    # id(), so something kept by id() is found again for another x.
    for step in range(1, 21):
        x = torch.full((2,), 0.5 * step, dtype=torch.float64, requires_grad=True)
        (grad,) = torch.autograd.grad(cube(x), x, torch.ones(2, dtype=torch.float64))
        close = torch.allclose(grad, 3 * x.detach() ** 2)
        got, right, at = _values(grad), _values(3 * x.detach() ** 2), _values(x.detach())
        del grad, x  # x freed last, just before the next x is made: which then often gets its id()
        if not close:
            return (f"for fresh tensors x one after the other (a loop, each freed before the next), at step {step}: "
                    f"d/dx {got}, right {right} for {at}. Your backward used something computed for an earlier x: "
                    "Python gives a new tensor the id() of a freed one (lesson 04, section 1: what forward saves, "
                    "each time).")
    # Two forwards, then their backwards (two micro-batches, gradient accumulation): each backward reads what its own
    # forward saved.
    first = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    second = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    first_out, second_out = cube(first), cube(second)
    (grad,) = torch.autograd.grad(first_out, first, torch.ones(2, dtype=torch.float64))
    if not torch.allclose(grad, 3 * first.detach() ** 2):
        return (f"two forwards (x1 = {_values(first.detach())}, then x2 = {_values(second.detach())}), then x1's "
                f"backward: d/dx1 {_values(grad)}, right {_values(3 * first.detach() ** 2)}. Your backward read what "
                "the second forward kept: keep what backward needs in ctx, which is this call's (lesson 04, section 1: "
                "what forward saves).")
    del second_out
    on_meta = torch.empty(3, dtype=torch.float64, device="meta", requires_grad=True)
    try:
        (grad,) = torch.autograd.grad(cube(on_meta), on_meta, torch.empty_like(on_meta))
    except (RuntimeError, TypeError, NotImplementedError) as error:
        return (f"on meta tensors your backward raised {type(error).__name__}: {str(error).splitlines()[0][:160]}\n"
                "cube runs on meta tensors, and so must its backward: one built from torch operators on the tensors "
                f"it receives runs wherever the operator runs ({_CUBE_DIFFERENTIABLE}).")
    if grad.device.type != "meta":
        return f"on meta tensors your backward returned a gradient on {grad.device.type} ({_CUBE_DIFFERENTIABLE})"
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    out = cube(x)
    torch.autograd.grad(out, x, torch.ones_like(out), retain_graph=True)  # one backward before the change
    with torch.no_grad():
        x.mul_(2)  # x changed in place after forward, before backward: torch's own operators then refuse backward
    try:
        (grad,) = torch.autograd.grad(out, x, torch.ones_like(out))
        source = ("from a copy of x as forward saw it" if torch.allclose(grad, 3 * (x.detach() / 2) ** 2)
                  else "from the new x" if torch.allclose(grad, 3 * x.detach() ** 2) else "")
        return (f"a forward, a first backward (retain_graph=True), then x changed in place (x.mul_(2), under "
                f"no_grad), then a second backward on the same graph: yours gave "
                f"{_values(grad)}{', computed ' + source if source else ''}, with no error. Autograd refuses that "
                "for the tensors handed to it for backward, by their version counters (lesson 03, section 3); your x "
                "was kept some other way (lesson 04, section 1: what forward saves).")
    except RuntimeError as error:
        if "modified by an inplace operation" not in str(error):
            raise
    (grad,) = torch.autograd.grad(cube(x), x, torch.ones_like(out))  # a fresh forward on the changed x
    if not torch.allclose(grad, 3 * x.detach() ** 2, rtol=_CUBE_RTOL[torch.float64], atol=0):
        return (f"a backward, then x changed in place (x.mul_(2)), then a fresh forward and backward on it: d/dx "
                f"{_values(grad)}, right {_values(3 * x.detach() ** 2)} for the new x {_values(x.detach())}. Your "
                "backward used something computed before the change: what backward needs comes from what this "
                "forward saved, each time (lesson 04, section 1: what forward saves).")
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    out = cube(x)
    out.add_(1)  # the output written in place after forward: its gradient needs x alone, and torch's x ** 3 gives it
    try:
        (grad,) = torch.autograd.grad(out.sum(), x)
    except RuntimeError as error:
        return (f"cube's output written in place after forward (out.add_(1)), then backward: "
                f"{str(error).splitlines()[0][:160]}. d(x ** 3)/dx needs x, not the output: forward saves what "
                "backward reads, and a saved output that the caller writes into makes backward refuse (lesson 04, "
                "section 1: what forward saves).")
    x = torch.tensor([0.5, -1.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(cube(x).sum(), x, create_graph=True)  # double backward: d/dx of the gradient
    if not grad.requires_grad:
        return ("with create_graph=True (double backward: a Hessian, a gradient penalty, gradgradcheck) the gradient "
                "your backward returned has no history: it was computed where autograd does not see it (detached, "
                "outside torch, or under no_grad), so its own derivative is lost. A backward built from torch "
                f"operators on the tensors it receives is differentiable itself ({_CUBE_DIFFERENTIABLE}; section 2: "
                "gradgradcheck).")
    (second,) = torch.autograd.grad(grad.sum(), x)
    if not second.isfinite().all():
        return (f"double backward: d/dx of your gradient (summed) at {_values(x.detach())} is {_values(second)}, right "
                f"{_values(6 * x.detach())}: your backward's own derivative is not finite where x is 0, though 6x "
                "is. A formula that equals 3x^2 at 0 may still have no derivative there, and gradgradcheck only tries "
                "the inputs it is given (lesson 04, section 2).")
    if not torch.allclose(second, 6 * x.detach()):
        return (f"double backward: d/dx of your gradient (summed) at {_values(x.detach())} is {_values(second)}, right "
                f"{_values(6 * x.detach())}: part of your backward was computed where autograd does not see it "
                f"({_CUBE_DIFFERENTIABLE}; section 2: gradgradcheck).")
    return None


def _cube_saved_as_given(cube) -> str | None:
    """04.backward on x that forward could copy before saving (transposed, float16, bfloat16): a copy made in forward
    escapes the version check (a changed x is not refused) and carries no history (double backward loses x's term)."""
    variants = [("a transposed float64 x", lambda: torch.tensor([[0.5, 2.0], [-1.0, 3.0]], dtype=torch.float64).t()),
                ("a float16 x", lambda: torch.tensor([0.5, -1.0, 2.0], dtype=torch.float16)),
                ("a bfloat16 x", lambda: torch.tensor([0.5, -1.0, 2.0], dtype=torch.bfloat16))]
    for what, make in variants:
        x = make().requires_grad_()
        out = cube(x)
        with torch.no_grad():
            x.mul_(2)
        try:
            torch.autograd.grad(out, x, torch.ones_like(out))
        except RuntimeError as error:
            if "modified by an inplace operation" not in str(error):
                raise
        else:
            return (f"on {what}, changed in place after forward (x.mul_(2), under no_grad), backward gave a gradient, "
                    "with no error, where torch's own operators refuse it: what your forward saved is not x itself "
                    "but a tensor made from it (.contiguous(), .float() and .to() copy such an x), which the version "
                    "check does not follow (lesson 04, section 1: what forward saves).")
        x = make().requires_grad_()
        (grad,) = torch.autograd.grad(cube(x).sum(), x, create_graph=True)
        (second,) = torch.autograd.grad(grad.float().sum(), x, allow_unused=True)
        if second is None or not torch.allclose(second.float(), 6 * x.detach().float(), rtol=0.02):
            got = "nothing (no path to x)" if second is None else _values(second)
            return (f"double backward on {what}: d/dx of your gradient (summed) is {got}, right "
                    f"{_values(6 * x.detach().float())}: what your forward saved is not x itself but a tensor made "
                    "from it (.contiguous(), .float() and .to() copy such an x) with no history, so the gradient's "
                    f"own derivative loses x ({_CUBE_DIFFERENTIABLE}; section 2).")
    return None


def _cube_first_on_meta(path: Path) -> str | None:
    """Your file loaded afresh, its backward first run on fake tensors (torch.compile's and torch.export's tracing),
    then on meta tensors (shape inference, a model built on the meta device), then on CPU ones; and loaded afresh
    again, on CPU tensors first (an eager warm-up, then torch.compile), then fake, then meta: whatever backward makes,
    it makes for the tensors of each call."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    orders = [(("fake", "meta", "CPU"), "cube_again", "a backward on fake tensors first (as torch.compile traces it), "
               "then one on meta tensors, then one on CPU tensors", "a backward on fake tensors first, then on meta "
               "ones, then on CPU ones"),
              (("CPU", "fake", "meta"), "cube_warmed_up", "a backward on CPU tensors first (an eager warm-up, before "
               "torch.compile traces it), then one on fake tensors, then one on meta tensors", "")]
    for order, name, calls, calls_briefly in orders:
        with _cube_operator(load_python(path), name) as cube:
            for tensors in order:
                with FakeTensorMode() if tensors == "fake" else nullcontext():
                    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64,
                                     device="meta" if tensors == "meta" else "cpu", requires_grad=True)
                    try:
                        (grad,) = torch.autograd.grad(cube(x).sum(), x)
                    except Exception as error:  # noqa: BLE001 - the reader's backward may raise anything
                        # torch's advice (allow_non_fake_inputs) is for code that means to mix them, which backward
                        # is not
                        said = str(error).splitlines()[0].split(" or instantiate FakeTensorMode with")[0][:160]
                        return (f"your file loaded afresh, {calls}: the {tensors} one raised {type(error).__name__}: "
                                f"{said}. Something backward made at an earlier call was used again: what backward "
                                f"computes, it computes from the tensors of each call ({_CUBE_DIFFERENTIABLE})")
                if tensors == "CPU" and calls_briefly and not torch.allclose(grad, 3 * x.detach() ** 2):
                    return f"your file loaded afresh, {calls_briefly}: d/dx {grad.tolist()}"
    return None


def _cube_batched_backward(cube) -> str | None:
    """Backward under vmap: autograd.grad(..., is_grads_batched=True), as jacobian(vectorize=True) and hessian run it.
    A backward built of torch operations on the tensors it receives batches; one that writes into a tensor it made
    does not (copy_ into an unbatched tensor)."""
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    try:
        (rows,) = torch.autograd.grad(cube(x), x, torch.eye(3, dtype=torch.float64), is_grads_batched=True)
    except RuntimeError as error:
        return (f"a batched backward (torch.autograd.grad(cube(x), x, torch.eye(3), is_grads_batched=True), as "
                f"jacobian(vectorize=True) runs it: your backward under vmap): RuntimeError: "
                f"{str(error).splitlines()[0][:200]}. A backward made of torch operations on the tensors it receives "
                f"runs under vmap ({_CUBE_DIFFERENTIABLE})")
    if not torch.allclose(rows, torch.diag(3 * x.detach() ** 2)):
        return f"a batched backward (is_grads_batched=True): the Jacobian's rows are {rows.tolist()}, right diag(3x^2)"
    return None


def _cube_third_derivative(cube) -> str | None:
    """d3/dx3 of x ** 3 is 6 everywhere: a backward built from torch operators is differentiable as often as they
    are; one whose own pieces stop the graph (a detach, a Function without a differentiable backward) is not. And a
    plain backward first (retain_graph=True, a logging pass), then one with create_graph=True on the same graph."""
    x = torch.tensor([0.5, -1.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    out = cube(x).sum()
    torch.autograd.grad(out, x, retain_graph=True)
    (first,) = torch.autograd.grad(out, x, create_graph=True)
    if not first.requires_grad:
        return ("a backward (retain_graph=True), then another on the same graph with create_graph=True (a gradient "
                "penalty after a logging pass): the second gradient has no history, so its derivative is lost: "
                "something the first backward computed was kept and handed out again (on ctx?). A backward computes "
                f"from what forward saved, each time ({_CUBE_DIFFERENTIABLE}).")
    (first,) = torch.autograd.grad(cube(x).sum(), x, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), x, create_graph=True)
    try:
        (third,) = torch.autograd.grad(second.sum(), x)
    except RuntimeError as error:
        return (f"a third derivative (d/dx of the second, create_graph=True twice): {str(error).splitlines()[0][:160]}"
                f", where d3(x ** 3)/dx3 is 6: your backward is differentiable once, not as often as the torch "
                f"operators it could be built from ({_CUBE_DIFFERENTIABLE}).")
    if not torch.allclose(third, torch.full((4,), 6.0, dtype=torch.float64)):
        return (f"a third derivative at x = {_values(x.detach())}: {_values(third)}, where d3(x ** 3)/dx3 is 6 "
                f"everywhere, 0 included ({_CUBE_DIFFERENTIABLE}).")
    return None


def _cube_saves_through_autograd(cube) -> str | None:
    """What forward keeps for backward, kept with ctx.save_for_backward and nothing else: torch.autograd.graph.
    saved_tensors_hooks (what save_on_cpu and activation checkpointing use) must see x, and what they keep must be all
    that is kept: an activation the caller drops is freed, its copy packed by the hook standing for it."""
    import weakref

    packed = []

    def pack(tensor):  # as save_on_cpu packs: a copy of its own stands for the saved tensor
        packed.append(tensor.shape)
        return tensor.detach().clone()

    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        activation = x * 2  # a layer's output, which the caller drops once cube has it
        out = cube(activation)
    alive = weakref.ref(activation)
    del activation
    if not packed:
        return ("under torch.autograd.graph.saved_tensors_hooks (what torch.autograd.graph.save_on_cpu and activation "
                "checkpointing use to move or drop saved tensors), your forward saved nothing through them: x was "
                "kept another way (an attribute of ctx?), so those tools cannot free its memory, and autograd cannot "
                "tell when x changes. ctx.save_for_backward keeps it as autograd expects (lesson 04, section 1).")
    if alive() is not None:
        return ("under torch.autograd.graph.saved_tensors_hooks whose pack hook keeps a copy of its own (as "
                "save_on_cpu keeps one on the CPU), an activation the caller dropped after cube's forward is "
                "still alive: something besides ctx.save_for_backward holds x (an attribute of ctx?), so those tools "
                "free nothing. "
                "Backward reads x from ctx.saved_tensors, and nowhere else (lesson 04, section 1).")
    (grad,) = torch.autograd.grad(out.sum(), x)
    if not torch.allclose(grad, 2 * 3 * (2 * x.detach()) ** 2):
        return (f"under saved_tensors_hooks whose pack hook keeps a copy: the gradient is {_values(grad)}, right "
                f"{_values(24 * x.detach() ** 2)}: backward computed from something other than what ctx.saved_tensors "
                "returned (lesson 04, section 1)")
    return None


def _cube_outputs_freed(cube) -> str | None:
    """An output the caller drops is freed at once, by reference counting, as torch's own operators' are: nothing in
    the graph points back at it (ctx.output = output makes a cycle, freed only when the cycle collector runs)."""
    x = torch.randn(1000, dtype=torch.float64, requires_grad=True)
    if _outlives_its_last_reference(lambda: cube(x)):
        return ("an output of cube, dropped by the caller, is still alive until Python's cycle collector runs: the "
                "graph refers back to it (ctx.output = output, say: output -> grad_fn -> ctx -> output), so each "
                "step's outputs, and their memory, outlive the step. What backward needs of the output is saved with "
                "ctx.save_for_backward, which makes no cycle (lesson 04, section 1).")
    return None


def _cube_ctx_holds_no_tensor(cube) -> str | None:
    """What backward needs is saved with ctx.save_for_backward, all of it: no tensor on the graph's node (ctx) beside
    it, where saved-tensor hooks would not see it; after forward, and after a backward that keeps the graph."""
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    out = cube(x)
    for when in ("after cube(x)", "after cube(x) and a backward that keeps the graph (retain_graph=True, as a "
                 "second backward or a double backward needs)"):
        if when != "after cube(x)":
            torch.autograd.grad(out.sum(), x, retain_graph=True)
        held = [f"ctx.{name}" for name, value in vars(out.grad_fn).items() if _holds_a_tensor(value)]  # ctx: the node
        if held:
            return (f"{when}, the graph's node keeps a tensor in {', '.join(held)}, beside what "
                    "ctx.save_for_backward saved: saved-tensor hooks never see it (save_on_cpu, activation "
                    "checkpointing and offloading cannot move or free it), it lives as long as the graph, and "
                    "autograd cannot tell when it goes stale. What backward needs is saved with "
                    "ctx.save_for_backward, all of it, and what it computes it returns (lesson 04, section 1).")
    return None


def _cube_compiled(cube) -> str | None:
    """cube(x).sum() under torch.compile, backward included (AOTAutograd traces backward, then runs what it traced):
    the gradient eager gives, at negative x too."""
    import torch._dynamo

    x = torch.tensor([-2.0, -1.0, 0.5, 2.0], requires_grad=True)
    try:
        (grad,) = torch.autograd.grad(torch.compile(lambda x: cube(x).sum(), backend="aot_eager", fullgraph=True)(x),
                                      x)
    except Exception as error:  # noqa: BLE001 - the reader's backward may raise anything; that is the diagnosis
        return (f"under torch.compile (backend aot_eager: AOTAutograd traces your backward, then runs what it "
                f"traced), cube(x).sum() and its backward raised {type(error).__name__}: "
                f"{str(_innermost(error)).strip().splitlines()[0][:200]} (lesson 04, section 3)")
    finally:
        torch._dynamo.reset()  # the compiled code, and its cache, are this call's
    if not torch.allclose(grad, want := 3 * x.detach() ** 2):
        return (f"under torch.compile (backend aot_eager: AOTAutograd traces your backward, then runs what it "
                f"traced), cube(x).sum() at x = [-2, -1, 0.5, 2]: the gradient is {grad.tolist()}, where eager's is "
                f"{want.tolist()}: your backward computes otherwise when it is traced. What is compiled is what runs "
                "eagerly, one backward for both (lesson 04, section 3)")
    return None


def _cube_after_a_data_write(cube) -> str | None:
    """x written through .data between two steps (an old optimizer's step, an EMA update), which leaves its version
    counter as it was: the second step's backward reads x's new values, as torch's x ** 3 does."""
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    torch.autograd.grad(cube(x).sum(), x)
    x.data.add_(1)
    (grad,) = torch.autograd.grad(cube(x).sum(), x)
    if not torch.allclose(grad, want := 3 * x.detach() ** 2):
        return (f"cube(x) and backward, x = [1, 2, 3]; then x.data.add_(1) (a step written through .data, which leaves "
                f"x's version counter as it was); then cube(x) and backward again: the gradient is {grad.tolist()}, "
                f"where 3x^2 of x's new values is {want.tolist()}: something computed for the first call was used "
                "again. Each backward computes from what its own call saved (lesson 04, section 1).")
    return None


def _cube_gradients_owned(cube) -> str | None:
    """Each backward's gradient is the caller's: a second backward (the next example's, in a per-example loop) leaves
    the first one's as it was. (.grad hides a gradient written again: AccumulateGrad copies what backward returns.)"""
    a, b = torch.tensor([1.0, 2.0, 3.0], requires_grad=True), torch.tensor([5.0, 5.0, 5.0], requires_grad=True)
    (first,) = torch.autograd.grad(cube(a).sum(), a)
    kept = first.clone()
    torch.autograd.grad(cube(b).sum(), b)
    if not torch.equal(first, kept):
        return (f"torch.autograd.grad(cube(a).sum(), a), a = [1, 2, 3], gave {kept.tolist()}; after a second backward, "
                f"of cube(b).sum() with b = [5, 5, 5], that first gradient, still the caller's, reads "
                f"{first.tolist()}: your backward hands back a tensor it keeps, and writes it again at the next call "
                "(per-example gradients, a GradScaler's unscaling, threads: each gets another's). What backward "
                "returns is the caller's alone: nothing keeps it to write again (lesson 04, section 1).")
    return None


def _cube_keeps_nothing(cube) -> str | None:
    """A backward keeps no tensor between calls: a scratch buffer kept per shape grows a server's memory with every
    new shape, and two threads running backward at once share it."""
    import gc

    def alive() -> int:
        gc.collect()
        return sum(isinstance(thing, torch.Tensor) for thing in gc.get_objects())

    def step(rows: int) -> None:  # the caller drops everything: x, the output, the gradient
        x = torch.randn(rows, 3, dtype=torch.float64, requires_grad=True)
        torch.autograd.grad(cube(x).sum(), x)

    step(1)
    before = alive()
    for rows in range(2, 8):
        step(rows)
    if (kept := alive() - before) >= 3:
        return (f"cube(x) and its backward on x of 6 new shapes ([2, 3] to [7, 3]), each dropped by the caller: "
                f"{kept} more tensors alive afterwards than before: your code keeps tensors between calls (a buffer "
                "per shape?), so memory grows with every new shape, and two threads running backward at once write "
                "into one. A backward computes its result from what its own call saved (lesson 04, section 1).")
    return None


def _holds_a_tensor(value, depth: int = 3) -> bool:
    """Whether `value` is a tensor, or holds one in a dict, list, tuple or set, three deep (a list of pairs of tensors,
    a dict of lists)."""
    if isinstance(value, torch.Tensor):
        return True
    if depth == 0 or not isinstance(value, (dict, list, tuple, set)):
        return False
    return any(_holds_a_tensor(item, depth - 1) for item in (value.values() if isinstance(value, dict) else value))


def _variable_holding_a_tensor(module) -> str | None:
    """The name of a variable of the reader's module that holds a tensor (_holds_a_tensor)."""
    return next((name for name, value in vars(module).items()
                 if not name.startswith("__") and not isinstance(value, type(module)) and _holds_a_tensor(value)), None)


def _module_keeps_no_tensor(module) -> str | None:
    """After the check's calls, no tensor in the reader's module: in a variable of its own, or in a dict, list, tuple or
    set there (a cache of constants made at a real call, say, which a later trace on fake tensors meets)."""
    if name := _variable_holding_a_tensor(module):
        return (f"after the check's calls, your file keeps a tensor in its variable `{name}`: it outlives every "
                "call, its memory with it, and a trace on fake tensors after a real call (an eager warm-up, then "
                "torch.compile) that meets it meets a real tensor beside its fake ones. A backward computes from "
                "what its own call saved, and keeps nothing between calls (lesson 04, section 1).")
    return None


def _cube_module_state_while_running(cube, module) -> str | None:
    """Not even while it runs does backward keep a tensor in a variable of the module: autograd runs a CPU backward on
    the thread that calls backward, so two threads (a server's requests, a data-parallel step) run it at once, and a
    module's variable is both calls'. Seen at each operation backward calls, by a TorchDispatchMode around it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    held, filters, filtered = [], warnings.filters, list(warnings.filters)

    class Watching(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not held and (name := _variable_holding_a_tensor(module)):
                held.append(name)
            if not held and (warnings.filters is not filters or warnings.filters != filtered):
                held.append(None)
            return func(*args, **(kwargs or {}))

    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    out = cube(x).sum()
    with Watching():
        torch.autograd.grad(out, x)
    if held and held[0] is None:
        return ("while backward ran, Python's warning filters were not the caller's (warnings.catch_warnings and a "
                "filter of yours?): they are the process's, not the call's, so meanwhile every thread's warnings "
                "went through yours, and two threads run backward at once (a server's requests, a data-parallel "
                "step). catch_warnings sets them back when it ends, but is not thread-safe (Python's documentation "
                "of warnings.catch_warnings): two overlapping backwards can leave yours in place for good.")
    if held:
        return (f"while backward ran, your file held a tensor in its variable `{held[0]}`: autograd runs a CPU "
                "backward on the thread that calls backward, so two threads (a server's requests, a data-parallel "
                "step) run yours at once, and each reads what the other put there. A backward's tensors are its "
                "call's own (lesson 04, section 1).")
    return None


def _cube_shared_gradient(cube) -> str | None:
    """Two calls' outputs summed: add's backward hands both cube nodes one gradient tensor, which the caller never
    holds. A backward that writes into what it receives (where nothing else seems to hold it) changes the other's."""
    x1, x2 = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0, -1.0], requires_grad=True)
    ((cube(x1) + cube(x2)) * 2).sum().backward()
    want = [6 * x.detach() ** 2 for x in (x1, x2)]
    if not all(torch.allclose(x.grad, right) for x, right in zip((x1, x2), want)):
        return (f"((cube(x1) + cube(x2)) * 2).sum().backward(), x1 = [1, 2] and x2 = [3, -1]: the gradients are "
                f"{x1.grad.tolist()} and {x2.grad.tolist()}, where 6x^2 gives {want[0].tolist()} and "
                f"{want[1].tolist()}: add's backward hands both cube nodes one gradient tensor, and one backward "
                "wrote into it before the other read it. Backward leaves the tensors it receives as they are, whoever "
                "else holds them (lesson 04, section 3: what a backward receives).")
    return None


def _cube_large_grad_output_untouched(cube) -> str | None:
    """_cube_samples' check that backward leaves the gradient it receives as it is, on a large one (4M elements): a
    write into it only past some size (to save memory) shows there alone."""
    x = (torch.rand(1 << 22) + 0.5).requires_grad_()
    grad_output = torch.full_like(x, 0.5)
    torch.autograd.grad(cube(x), x, grad_output)
    if torch.all(grad_output == 0.5):
        # And past any size: on meta tensors of 2**40 elements (no memory), where a write shows by the gradient's
        # version counter (a meta tensor has no values to read).
        x = torch.empty(1 << 40, device="meta", requires_grad=True)
        grad_output = torch.empty(1 << 40, device="meta")
        before = grad_output._version
        torch.autograd.grad(cube(x), x, grad_output)
        if grad_output._version == before:
            return None
        return ("torch.autograd.grad(cube(x), x, grad_output) on meta tensors of 2**40 elements: grad_output's "
                "version counter moved: your backward wrote into the gradient it received, on a large one. autograd "
                "hands one gradient tensor to several backwards (the two inputs of an add share it), and the caller's "
                "grad_output comes in as it is: the next backward to read it reads your result. A backward returns a "
                "new tensor (lesson 04, section 3: what a backward receives)")
    return ("torch.autograd.grad(cube(x), x, grad_output), x of 4194304 elements and grad_output all 0.5: afterwards, "
            "grad_output holds other values: your backward wrote into the gradient it received, on a large one. "
            "autograd hands one gradient tensor to several backwards (the two inputs of an add share it), and the "
            "caller's grad_output comes in as it is: the next backward to read it reads your result. A backward "
            "returns a new tensor (lesson 04, section 3: what a backward receives)")


def _cube_process_state(cube, alive: list) -> str | None:
    """cube and its backward leave the process's settings as they found them, the random numbers of a caller that
    seeded its own (a backward that seeds 0 leaves the check's seed as it was) and Python's warning filters too."""
    generator = torch.random.get_rng_state()
    torch.manual_seed(20261129)
    try:
        return _cube_settings_kept(cube, alive)
    finally:
        torch.random.set_rng_state(generator)


def _cube_settings_kept(cube, alive: list) -> str | None:
    """_cube_process_state's steps."""
    x = torch.tensor([1e-20, 0.5, -2.0], requires_grad=True)
    alive.append(x)  # kept, as _cube_samples keeps its own: a sample's x never gets this one's id()
    gradient = torch.ones(3)  # float32, as x: made before a caller below changes the default dtype
    # Three callers: the process as it starts; one that flushes denormal numbers to zero (for speed), which a
    # backward that turns flushing off for itself must give back; one whose default dtype is float64, which a
    # backward that sets a dtype for its own constants must give back, not set to float32.
    callers = [("", lambda: True, ""),
               (" for a caller that flushes denormal numbers to zero (torch.set_flush_denormal(True))",
                lambda: torch.set_flush_denormal(True),  # False on a CPU without the flag: not tried there
                " (a gradient of float32 x = 1e-20 is 3e-40, which flushing makes 0)"),
               (" for a caller whose default dtype is float64 (torch.set_default_dtype(torch.float64))",
                lambda: torch.set_default_dtype(torch.float64) or True,
                " (every torch.tensor(0.1) the caller makes after it comes out float32)")]
    for caller, set_up, example in callers:
        try:
            if not set_up():
                continue
            before, python = _process_state(), process_settings()
            torch.autograd.grad(cube(x), x, gradient)
            changed, python_changed = _process_state_changed(before), process_settings_changes(python)
        finally:
            torch.set_flush_denormal(False)
            torch.set_default_dtype(torch.float32)
        if changed:
            return (f"after cube(x) and its backward{caller}, {changed} was not as before: a setting that outlives "
                    f"the call, so everything that runs after it runs changed{example}. What a kernel or a backward "
                    "changes, it sets back (lesson 00, section 2)")
        if python_changed:
            return (f"cube(x) and its backward{caller} {python_changed}. What a kernel or a backward changes, it sets "
                    "back (lesson 00, section 2)")
    # And after a backward autograd refuses (x changed in place after forward): it sets back what it set there too.
    changed_x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    alive.append(changed_x)
    out = cube(changed_x)
    with torch.no_grad():
        changed_x.mul_(2)
    before = _process_state()
    with suppress(RuntimeError):  # refused, as torch refuses its own x ** 3's backward then
        torch.autograd.grad(out, changed_x, torch.ones(3))
    if changed := _process_state_changed(before):
        return (f"after a backward autograd refused (x changed in place after forward: x.mul_(2)), {changed} was "
                "not as before: a setting your backward changed and sets back only when it returns stays changed "
                "when it raises. What a backward changes, it sets back whatever happens (try/finally; lesson 00, "
                "section 2)")
    return None


@exercise("04.backward", "medium")
def backward(path: Path) -> Result:
    answer = load_python(path)
    with _cube_operator(answer) as cube:
        alive = []  # every x of the steps below, until the check ends
        # The process's settings first: a backward that changes one, and never sets it back, leaves it changed for
        # the checks after it too.
        if problem := (_cube_process_state(cube, alive) or _cube_samples(cube, alive)
                       or _gradient_undefined(cube, "cube") or _cube_beyond_the_samples(cube)):
            return Result(False, problem)
        x = torch.tensor(_CUBE_SAMPLES[0][1], dtype=torch.float64, requires_grad=True)
        if not torch.autograd.gradcheck(cube, (x,), raise_exception=False):
            return Result(False, "gradcheck failed")
        if not torch.autograd.gradgradcheck(cube, (x,), raise_exception=False):
            return Result(False, f"gradgradcheck failed ({_CUBE_DIFFERENTIABLE}; section 2)")
        if problem := (_cube_third_derivative(cube) or _cube_saves_through_autograd(cube)
                       or _cube_outputs_freed(cube) or _cube_ctx_holds_no_tensor(cube)
                       or _cube_gradients_owned(cube) or _cube_after_a_data_write(cube)
                       or _cube_saved_as_given(cube) or _cube_batched_backward(cube) or _cube_first_on_meta(path)
                       or _cube_large_grad_output_untouched(cube) or _cube_keeps_nothing(cube)
                       or _module_keeps_no_tensor(answer) or _cube_compiled(cube)
                       or _cube_shared_gradient(cube) or _cube_module_state_while_running(cube, answer)):
            return Result(False, problem)
        return Result(True, "right at every sample, to each dtype's precision, through .sum() and on meta tensors; "
                            "a changed x refused; gradcheck and gradgradcheck passed, a third derivative too; x saved "
                            "where saved-tensor hooks see it")


_PASSING_ON = "lesson 03, section 3: passing the call on, in C++ and in Python."


def _nested(values: torch.Tensor) -> torch.Tensor:
    """A strided nested tensor of values and its first two, without torch's warning that the layout is a prototype."""
    import warnings  # here: only this check needs it

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([values, values[:2]])


def _redispatch_crash(path: Path) -> str:
    """Why 04.redispatch's process died: a call handed on by hand, past what the dispatcher checks."""
    return ("Your forward crashed the process (a segmentation fault is torch reading memory that is not what it "
            "expects): a call made with torch._C's unchecked entry points (op._op_dk, a dispatch key picked by hand, "
            "a keyset the dispatcher never computes) can run a kernel on a tensor it cannot take.\nLook again at "
            "lesson 03, section 3: how a kernel hands a call on, and what the dispatcher checks on the way")


def _scale2_saves_nothing(op) -> str | None:
    """scale2's backward needs none of x's values: after the call, x changed in place (as torch's own x * 2 allows)
    must not stop backward; and an output the caller drops is freed at once, by reference counting."""
    y = torch.ones(3, requires_grad=True).clone()
    out = op(y)
    with torch.no_grad():
        y.add_(1)  # a later step writes y: x * 2's backward never reads it
    try:
        (grad,) = torch.autograd.grad(out.sum(), y)
    except RuntimeError as error:
        return (f"scale2(y), then y.add_(1), then backward: {str(error).splitlines()[0][:160]}: torch's own y * 2 "
                "lets y change after the call, since its backward reads none of y's values; yours kept y (saved for "
                "backward?), which it does not need (lesson 04, section 1: what forward saves)")
    x = torch.ones(3, requires_grad=True)
    out = op(x)
    out.mul_(3)  # the caller's output, written in place (as torch's own x * 2 allows: its backward reads no output)
    try:
        (grad,) = torch.autograd.grad(out.sum(), x)
    except RuntimeError as error:
        return (f"scale2(x), then out.mul_(3) on its output, then backward: {str(error).splitlines()[0][:160]}: "
                "torch's own x * 2 lets its output change after the call, since its backward reads none of its "
                "values; yours kept the output (saved for backward?), which it does not need (lesson 04, section 1: "
                "what forward saves)")
    if not torch.equal(grad, torch.full((3,), 6.0)):
        return f"scale2(x), then out.mul_(3) on its output, then backward: x's gradient is {grad.tolist()}, not 6s"
    from torch.multiprocessing.reductions import StorageWeakRef

    w = torch.ones(1000, requires_grad=True)
    h = w * 3  # an activation: what the caller frees once nothing needs it
    freed, out = StorageWeakRef(h.untyped_storage()), op(h)
    del h
    if not freed.expired():
        return ("scale2(h), then the caller dropped h while the output lives on (its graph kept for a backward): h's "
                "memory is still held, where torch's own h * 2 frees it: its backward needs none of h. Yours keeps "
                "h, or a view or alias of it (saved for backward, or kept on ctx), which it does not need (lesson 04, "
                "section 1: what forward saves)")
    del out
    if _outlives_its_last_reference(lambda: op(torch.ones(1000, requires_grad=True))):
        return ("an output of scale2, dropped by the caller, is still alive: something keeps it (the graph, through "
                "ctx.out = out: out -> grad_fn -> ctx -> out, a cycle only the collector frees; or a cache of "
                "outputs), so each step's outputs, and their memory, outlive the step (lesson 04, section 1)")
    out = op(w * 3)
    loss = out.sum()  # noqa: F841 - the graph lives on (sum's backward keeps no tensor); the caller drops the output
    freed = StorageWeakRef(out.untyped_storage())
    del out
    if not freed.expired():
        return ("scale2(h), then loss = out.sum(), then the caller dropped the output while the graph lives on (until "
                "backward): the output's memory is still held, where torch's own h * 2 frees it: its backward needs "
                "none of it. Yours keeps the output, or a view or alias of it (saved for backward, or kept on ctx: a "
                "detached one too), which it does not need (lesson 04, section 1: what forward saves)")
    return None


def _gradient_undefined(op, name: str) -> str | None:
    """A node below that gives no gradient (lesson 04, section 3: DropsItsGradient): autograd hands `op`'s backward an
    undefined gradient, zeros unless the Function asked for None (set_materialize_grads(False)); x's gradient is
    zeros, on CPU tensors and on meta ones (a gradient made for the undefined one is made like x)."""
    class DropsItsGradient(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.clone()

        @staticmethod
        def backward(ctx, grad):
            return None

    for device in ("cpu", "meta"):
        x = torch.ones(3, device=device, requires_grad=True)
        call = f"DropsItsGradient.apply({name}(x)).sum().backward()" + (" on meta tensors" if device == "meta" else "")
        try:
            DropsItsGradient.apply(op(x)).sum().backward()
        except (TypeError, RuntimeError) as error:
            said = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
            if device == "meta":
                return (f"{call}, a node below that gives no gradient (lesson 04, section 3), after the same call on "
                        f"CPU tensors passed: {said}. What your backward gives where the gradient arrives undefined "
                        "is x's gradient, on x's device, in x's dtype")
            return (f"{call}, a node below that gives no gradient (lesson 04, section 3): {said}. Your backward "
                    "received an undefined gradient (None), which it could not take: autograd hands over zeros "
                    "unless a Function asks for None")
        if device == "cpu" and x.grad is not None and not torch.equal(x.grad, torch.zeros(3)):
            return f"{call}: x.grad is {x.grad.tolist()}, where no gradient came down to {name}: zeros"
    return None


def _scale2_gradient_left_alone(op) -> str | None:
    """Backward leaves the gradient it receives as it is: the caller's grad_outputs, and what autograd hands another
    edge of the same node (here x's own + x), are that tensor."""
    x, given = torch.ones(3, requires_grad=True), torch.ones(3)
    (op(x) + x).backward(given)
    if not torch.equal(x.grad, torch.full((3,), 3.0)) or not torch.equal(given, torch.ones(3)):
        return (f"(scale2(x) + x).backward(g), g all 1s: x.grad is {x.grad.tolist()}, where 2 + 1 is 3, and g became "
                f"{given.tolist()}: your backward wrote into the gradient it received, which the caller's g and "
                "autograd's other edges (+ x's, here) share. A backward leaves its inputs as they are (lesson 04, "
                "section 1)")
    return None


def _above_autograd_once(library, name: str, call, what: str, expected: torch.Tensor) -> str | None:
    """A kernel above Autograd that hands the call on by its keyset alone (lesson 03, section 3), as a reader's own
    autocast or tracing kernel in Python does: it must run once a call of exercise::`name`, `call()`, which must give
    `expected`. Registered last: it stays to the check's end."""
    above = []
    after_autocast = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.AutocastCPU)
    overload = getattr(torch.ops.exercise, name).default

    def autocast_kernel(keyset, *args):
        above.append(keyset)
        return overload.redispatch(keyset & after_autocast, *args)

    library.impl(name, autocast_kernel, "AutocastCPU", with_keyset=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = call()
    if len(above) != 1:
        return (f"in an autocast region, where an AutocastCPU kernel of {name}'s (in Python, handing the call on by "
                f"redispatch with its keyset, as lesson 03, section 3 does) sits above autograd: that kernel ran "
                f"{len(above)} times for one call. The call in forward started again at the top of the keyset, so "
                "every kernel above Autograd that passed the call on by its keyset ran again; the call in forward "
                "must start below autograd")
    if not torch.equal(out.detach(), expected):
        return f"in an autocast region, under an AutocastCPU kernel of {name}'s: {what} gave {out.tolist()}"
    return None


# The autograd functionalities torch's below-autograd guards exclude (c10's autograd_dispatch_keyset): the per-backend
# Autograd keys' functionality, and the two keys with no backend of their own.
_AUTOGRAD_FUNCTIONALITIES = ("AutogradFunctionality", "AutogradOther", "AutogradNestedTensor")


@exercise("04.redispatch", "hard", on_crash=_redispatch_crash)
def redispatch(path: Path) -> Result:
    import time

    ran, conjugate_bit, given, guarded, autograd_on = [], [], [], [], []

    def kernel(key: str):  # the kernels below autograd, each recording that it ran, and what it was given
        def run(x):
            _switch_threads_below_autograd()  # another thread may run now (_keyset_kept_apart)
            ran.append(key)
            given.append(type(x).__name__)
            # Whether the aten calls a kernel makes inside (a view, a write) would skip ADInplaceOrView, as they do
            # under torch's own autograd kernels' guard.
            guarded.append(torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.ADInplaceOrView))
            # And every autograd key: the per-backend ones (their functionality), AutogradOther (mkldnn, and other
            # backends with no autograd key of their own) and AutogradNestedTensor, as torch's guard excludes them.
            autograd_on.append([name for name in _AUTOGRAD_FUNCTIONALITIES if not
                                torch._C._dispatch_tls_is_dispatch_key_excluded(getattr(torch._C.DispatchKey, name))])
            # A kernel that reads memory needs their fallbacks first: conjugate and negative views, a ZeroTensor.
            conjugate_bit.append(x.is_conj() or x.is_neg() or x._is_zerotensor())
            with torch._C._AutoDispatchBelowAutograd():  # as a C++ kernel computes: no autograd inside, no tangent
                return torch.empty_like(x) if key == "Meta" else x * 2
        return run

    with operator("scale2(Tensor x) -> Tensor", kernel("CPU")) as library:
        library.impl("scale2", kernel("Meta"), "Meta")
        library.impl("scale2", kernel("SparseCPU"), "SparseCPU")
        library.impl("scale2", kernel("NestedTensorCPU"), "NestedTensorCPU")
        library.impl("scale2", kernel("MkldnnCPU"), "MkldnnCPU")
        answer = load_python(path)
        autograd_runs = []

        def autograd_kernel(keyset, x):  # the reader's, counted: once a call
            autograd_runs.append(keyset)
            return answer.autograd_kernel(keyset, x)

        library.impl("scale2", autograd_kernel, "Autograd", with_keyset=True)
        op = _watching_dispatch_state(torch.ops.exercise.scale2.default)
        values = torch.tensor([1.0, -2.0, 3.0])
        # (what, the input, the context the call runs in, the kernel below autograd that must run)
        cases = [("a CPU tensor that requires grad", lambda: values.clone().requires_grad_(), nullcontext, "CPU"),
                 ("a CPU tensor that requires grad, a second time", lambda: values.clone().requires_grad_(),
                  nullcontext, "CPU"),
                 ("a CPU tensor that does not require grad", values.clone, nullcontext, "CPU"),
                 ("a meta tensor", lambda: torch.empty(3, device="meta", requires_grad=True), nullcontext, "Meta"),
                 ("a sparse CPU tensor", lambda: values.to_sparse().requires_grad_(), nullcontext, "SparseCPU"),
                 ("a CPU tensor, inside a TorchDispatchMode", lambda: values.clone().requires_grad_(), _recording_mode,
                  "CPU"),
                 ("an empty CPU tensor (an empty batch), inside a TorchDispatchMode",
                  lambda: torch.empty(0, requires_grad=True), _recording_mode, "CPU"),
                 # Their keysets hold AutogradNestedTensor and AutogradOther (torch._C._dispatch_keys(x) prints
                 # them); without requires_grad, since torch.autograd.Function takes no nested tensor that requires it.
                 ("a nested tensor that does not require grad", lambda: _nested(values), nullcontext,
                  "NestedTensorCPU")]
        if torch.backends.mkldnn.is_available():
            cases.append(("an mkldnn tensor that does not require grad", values.to_mkldnn, nullcontext, "MkldnnCPU"))
        complex_values = torch.tensor([1 + 2j, -3j, 0.5])
        cases += [("a complex CPU tensor", complex_values.clone, nullcontext, "CPU"),
                  ("a conjugated complex CPU tensor (lazily: it carries the Conjugate key)",
                   lambda: complex_values.clone().conj(), nullcontext, "CPU"),
                  ("the imaginary part of a conjugate, a float32 view that carries the Negative key",
                   lambda: (values * 1j).conj().imag, nullcontext, "CPU"),
                  ("a ZeroTensor (torch._efficientzerotensor: what autograd hands on for a gradient or tangent known "
                   "to be zero; it carries the ZeroTensor key, and has no memory of its own)",
                   lambda: torch._efficientzerotensor(3), nullcontext, "CPU"),
                  ("a 0-dim CPU tensor that requires grad (a learnable scale), inside a TorchDispatchMode",
                   lambda: torch.tensor(1.5, requires_grad=True), _recording_mode, "CPU")]
        more_seen = None  # (the case, what the mode saw) where it saw more than the call
        unguarded = None  # (the first case, its kernel) that ran with ADInplaceOrView on the thread
        autograd_left = None  # (the first case, its kernel, the autograd keys) that ran with an autograd key on
        alive = []  # every case's x, until the check ends: none lands in an earlier one's memory, or gets its id()
        for what, make, context, key in cases:
            x = make()
            alive.append(x)
            ran.clear()
            guarded.clear()
            autograd_on.clear()
            conjugate_bit.clear()
            autograd_runs.clear()
            try:
                with context() as mode:
                    out = op(x)
            except RecursionError:
                extra = (" torch.no_grad() turns off recording, not the Autograd key (lesson 00, section 2)."
                         if mentions(path, r"no_grad") else "")
                if key in ("NestedTensorCPU", "MkldnnCPU"):
                    autograd_key = "AutogradNestedTensor" if key == "NestedTensorCPU" else "AutogradOther"
                    return Result(False, f"on {what}: the call came back to your Autograd kernel again and again "
                                         f"(RecursionError): this tensor's keyset holds {autograd_key}, an autograd "
                                         "key the Autograd alias stands for too, and the call below your kernel still "
                                         "held it (torch._C._dispatch_keys(x) prints a tensor's keys).\nLook again "
                                         f"at {_PASSING_ON}")
                return Result(False, f"on {what}: the call came back to your Autograd kernel again and again "
                                     "(RecursionError): it calls the operator from the top of the keyset, where "
                                     f"Autograd is still the first key.{extra}\nLook again at {_PASSING_ON}")
            except _StateLeft as left:
                return Result(False, f"on {what}: {left}")
            except (RuntimeError, NotImplementedError) as error:
                if _redispatch_refused(error) and mentions(path, r"_DisableTorchDispatch|_DisablePythonDispatcher"):
                    return Result(False, f"on {what}: torch stopped at an internal check of its own (which it reports "
                                         "as a bug in torch): your guard turned the Python dispatch keys off for the "
                                         "call, while the keyset you handed on still held them, so the dispatcher "
                                         "went to the Python key, which found no mode to hand the call to. The "
                                         "keyset handed on and the thread's state must agree; a mode on the stack "
                                         "must see the call (lesson "
                                         f"00, section 2: thread-local state).\nLook again at {_PASSING_ON}")
                if told := _redispatch_refused(error):
                    return Result(False, f"on {what}: {told}")
                return Result(False, f"on {what}: {type(error).__name__}: {str(error).splitlines()[0][:200]}. On "
                                     f"such a tensor, forward must not read what it lacks (data, sizes, strides): "
                                     f"the call below autograd, on the call's own backend, is all it needs.\nLook "
                                     f"again at {_PASSING_ON}")
            if len(autograd_runs) > 1:
                return Result(False, f"on {what} your Autograd kernel ran {len(autograd_runs)} times for one call: the "
                                     "call in forward came back to it, with a keyset that still held an Autograd key "
                                     f"or from the top of the keyset.\nLook again at {_PASSING_ON}")
            if not ran:
                return Result(False, f"on {what} none of scale2's kernels below autograd ran: your forward computed "
                                     f"the result some other way than through the operator, where its {key} kernel "
                                     f"must run once.\nLook again at {_PASSING_ON}")
            if ran != [key]:
                kernels = f"{' kernel, then its '.join(ran)} kernel"
                return Result(False, f"on {what} your call ran scale2's {kernels} below autograd, not its {key} kernel "
                                     f"once: the call below autograd must run once, on the call's own backend.\nLook "
                                     f"again at {_PASSING_ON}")
            if mode is not None and "exercise.scale2.default" not in [name for name, _ in mode.calls]:
                return Result(False, f"on {what} the mode never saw scale2: the keyset your call below autograd was "
                                     "handed lacks the keys the thread-local include set adds to the call's (the "
                                     "mode's Python key).\nLook again at lesson 00, section 2 (thread-local state), "
                                     f"and {_PASSING_ON}")
            if mode is not None and (seen := [name for name, _ in mode.calls]) != ["exercise.scale2.default"]:
                more_seen = more_seen or (what, seen)  # said last: a diagnosis below may name the cause
            if guarded and not all(guarded):  # every backend's kernel: a meta one, a sparse one
                unguarded = unguarded or (what, key)
            if left_on := next(filter(None, autograd_on), None):
                autograd_left = autograd_left or (what, key, left_on)
            if any(conjugate_bit):
                bit, key_skipped = (("conjugate", "Conjugate") if x.is_conj() else ("zero", "ZeroTensor")
                                    if x._is_zerotensor() else ("negative", "Negative"))
                return Result(False, f"on {what}, scale2's {key} kernel received x with its {bit} bit set: the "
                                     f"call below autograd skipped the {key_skipped} key, which the call's keyset "
                                     "holds (its fallback hands a kernel that reads memory a tensor whose memory "
                                     f"holds the values). The keyset handed on must be this call's own.\nLook again at "
                                     f"{_PASSING_ON}")
            if out.device.type == "meta":
                continue
            dense = out.detach().unbind()[0] if out.is_nested else out.detach().to_dense()
            viewed = x.is_complex() or x.is_neg()  # conjugate and negative views: 2x as it reads, resolved
            want = (torch.zeros(3) if x._is_zerotensor() else 2 * x.detach().resolve_conj().resolve_neg() if viewed
                    else 2 * x.detach() if x.dim() == 0 else values * 2 if x.numel() else torch.empty(0))
            if not torch.equal(dense, want):
                return Result(False, f"on {what}: scale2(x) gave {dense.tolist()}")
            if x.requires_grad and out.grad_fn is None:
                return Result(False, f"on {what}: the output has no grad_fn: nothing was recorded")
            if x.requires_grad:
                try:
                    (grad,) = torch.autograd.grad(out.to_dense().sum(), x)
                except RuntimeError as error:
                    frames = traceback.extract_tb(error.__traceback__)
                    if any(frame.filename == str(path) for frame in frames):  # in the reader's file: in backward
                        advice = ("Backward wrote into the gradient it was handed (here an expanded tensor: one "
                                  "memory location for all its elements), which it does not own: other nodes of the "
                                  "graph may hold it too" if "written-to tensor" in str(error) else
                                  "On such a tensor, backward must not read what it lacks (sizes, strides, a layout's "
                                  "operators): torch operations on the gradient it receives are all it needs")
                        return Result(False, f"on {what}: backward from the output to x: your backward raised "
                                             f"{_raised(error, path).rstrip('.')}. {advice} (lesson 04, section 1)")
                    return Result(False, f"on {what}: backward from the output to x failed: "
                                         f"{str(error).splitlines()[0][:160]}. The output must be linked to x by "
                                         f"autograd (lesson 04, section 1).\nLook again at {_PASSING_ON}")
                if not torch.equal(grad.to_dense(), torch.full(x.shape, 2.0)):
                    return Result(False, f"on {what}: gradient {grad.to_dense().tolist()}, should be 2s")
        # A call no kernel below autograd takes (none for sparse CSR tensors): it raises inside forward, and must
        # leave the thread's dispatch state as it found it all the same.
        try:
            op(torch.ones(2, 2).to_sparse_csr())
        except _StateLeft as left:
            return Result(False, f"on a sparse CSR tensor, which no kernel of scale2's takes (the call raises): {left}")
        except (RuntimeError, NotImplementedError):
            pass
        # A tangent dropped is lesson 04's (records_graph: a tangent is a graph to record too); the rest, lesson 03's.
        tangents = "lesson 04, section 1 (records_graph) and section 3, 'Forward-mode AD'."
        for told, where in (  # in turn, each only once the ones before it pass
                (lambda: _tangent_kept(lambda make_dual: op(make_dual(torch.ones(3), torch.full((3,), 5.0))),
                                       "a dual tensor x of tangent [5, 5, 5], scale2(x)", 10.0, "Scale2"), tangents),
                (lambda: _scale2_saves_nothing(op) or _scale2_gradient_left_alone(op)
                 or _complex_gradients(op, lambda x: 2 * x, ("x",), "2 * x"),
                 "lesson 04, section 1: what backward is given, and what it keeps."),
                (lambda: _tangent_kept(_in_no_grad(lambda make_dual: op(make_dual(torch.ones(3),
                                                                                  torch.full((3,), 5.0)))),
                                       "a dual tensor x of tangent [5, 5, 5], "
                                       "scale2(x) inside torch.no_grad() (forward mode does not depend on grad mode)",
                                       10.0, "Scale2"), tangents),
                (lambda: _gradient_undefined(op, "scale2"),
                 "lesson 04, section 3: a gradient that arrives undefined (DropsItsGradient), and what a backward "
                 "gives for it."),
                (lambda: _tangent_kept(lambda make_dual: op(make_dual(torch.ones(3, dtype=torch.complex64),
                                                                      torch.full((3,), 1 + 2j))),
                                       "a complex dual tensor x of tangent [1+2j, 1+2j, 1+2j], scale2(x)", 2 + 4j,
                                       "Scale2"), tangents)):
            if told := told():
                return Result(False, f"{told}\nLook again at {where}")
        # Backward differentiated in its turn, with respect to the output's gradient v: what
        # torch.autograd.functional.jvp computes, by the double-backward trick.
        x, v = values.clone().requires_grad_(), torch.ones(3, requires_grad=True)
        (grad,) = torch.autograd.grad(op(x), x, v, create_graph=True)
        if not grad.requires_grad:
            return Result(False, "backward with create_graph=True and an output gradient v that requires grad (what "
                                 "torch.autograd.functional.jvp differentiates): the gradient Scale2's backward "
                                 "returned has no history, though it depends on v: it was computed where autograd does "
                                 "not see it (below autograd, or detached), so its own derivative is lost. A backward "
                                 "built of torch operations is differentiable by itself (lesson 04, section 1)")
        # Its derivative taken, not only its history looked at: once_differentiable gives a history that refuses it.
        try:
            (with_respect_to_v,) = torch.autograd.grad(grad.sum(), v, allow_unused=True)
        except RuntimeError as error:
            return Result(False, "backward with create_graph=True and an output gradient v that requires grad, then "
                                 "the derivative of x's gradient with respect to v (what "
                                 "torch.autograd.functional.jvp computes): RuntimeError: "
                                 f"{str(error).splitlines()[0][:200]}. Backward must stay differentiable: a backward "
                                 "built of torch operations is, by itself (lesson 04, section 1)")
        if with_respect_to_v is None or not torch.equal(with_respect_to_v, torch.full((3,), 2.0)):
            found = "none" if with_respect_to_v is None else with_respect_to_v.tolist()
            return Result(False, "backward with create_graph=True and an output gradient v that requires grad: the "
                                 f"derivative of x's gradient (2 * v) with respect to v is {found}, where it is "
                                 "[2.0, 2.0, 2.0]: backward's result does not record how it depends on v (lesson 04, "
                                 "section 1)")
        # A float64 gradient of values float32 cannot hold: torch's x * 2 gives 2 * g exactly.
        x = torch.tensor([1.0, 3.0], dtype=torch.float64, requires_grad=True)
        gradient = torch.tensor([1 + 1e-9, 1 / 3], dtype=torch.float64)
        op(x).backward(gradient)
        if not torch.equal(x.grad, 2 * gradient):
            return Result(False, "scale2(x).backward(g), x and g float64, g = [1 + 1e-9, 1/3]: x.grad is "
                                 f"{x.grad.tolist()}, where torch's x * 2 gives {(2 * gradient).tolist()}, exactly: "
                                 "your backward computed in another dtype than the gradient's (float32?), and "
                                 "autograd cast its result back to x's dtype without a word. A backward computes in "
                                 "the dtype of the gradient it receives (lesson 04, section 1)")
        # A gradient of another layout than x's (a sparse one for a dense x, as an embedding's arrives): whatever
        # backward runs, it runs on the gradient's own keys, never on x's.
        x = values.clone().requires_grad_()
        out = op(x)
        ran.clear()
        sparse_grad = torch.tensor([0.0, 3.0, 0.0]).to_sparse()
        doing = ("scale2(x) of a dense x, then backward given a sparse gradient (torch.autograd.grad(out, x, "
                 "grad.to_sparse()), which torch's own x * 2 takes)")
        try:
            (grad,) = torch.autograd.grad(out, x, sparse_grad)
        except Exception as error:  # noqa: BLE001 - the reader's backward may raise anything; that is the diagnosis
            return Result(False, f"{doing}: {_raised(error, path)}" + (
                f": scale2's {' and '.join(ran)} kernel ran on the gradient, a kernel for x's layout, not the "
                "gradient's: the keyset of forward's call is x's, not the gradient's" if "CPU" in ran else "")
                + f".\nLook again at {_PASSING_ON}")
        if "CPU" in ran:
            return Result(False, f"{doing}: scale2's dense CPU kernel ran on the sparse gradient: backward handed "
                                 "the gradient on with a keyset that is not the gradient's (forward's call's is x's)"
                                 f".\nLook again at {_PASSING_ON}")
        if not torch.equal(grad.to_dense(), torch.tensor([0.0, 6.0, 0.0])):
            return Result(False, f"{doing}: x's gradient is {grad.to_dense().tolist()}, where 2 * the gradient is "
                                 "[0, 6, 0]")
        if grad.layout != torch.sparse_coo:
            return Result(False, f"{doing}: x's gradient is {grad.layout}, where torch's own x * 2 hands a sparse one "
                                 "on as sparse (an embedding's gradient: torch.optim.SparseAdam refuses a dense one, "
                                 "and a dense one costs memory per element, not per value stored). The gradient's "
                                 f"layout is the gradient's.\nLook again at {_PASSING_ON}")
        # A caller that excluded an autograd key itself (its own guard): what forward excludes for its call, it
        # gives back as it found it, not as "not excluded".
        nested = torch._C.DispatchKey.AutogradNestedTensor
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(nested)):
            try:
                op(values.clone().requires_grad_())
            except _StateLeft as left:
                return Result(False, "a caller that had AutogradNestedTensor excluded on its thread (a guard of its "
                                     f"own) called scale2 on a dense x that requires grad: {left}")
        x = torch.ones(3)
        first = op(x)
        first.add_(1)  # the caller's to write into: a new tensor, as the schema promises
        if not torch.equal(second := op(x), torch.full((3,), 2.0)) or second is first:
            return Result(False, f"scale2(x), then the caller wrote into that output (out.add_(1)), then scale2(x) "
                                 f"again: {second.tolist()}, where 2x is [2, 2, 2]. Each call computes its own output; "
                                 "one kept from an earlier call is the caller's, to change")
        if told := _exported(lambda x: op(x) * 2, torch.randn(3, requires_grad=True)):
            return Result(False, f"{told}.\nLook again at {_PASSING_ON}")

        if told := _keyset_kept_apart(lambda device: op(values.to(device).requires_grad_()), values * 2, "scale2",
                                      answer.Scale2):
            return Result(False, f"{told.removesuffix('.')}.\nLook again at {_PASSING_ON}")
        given.clear()
        if told := _subclass_passed_on(lambda x: op(x), given, "scale2"):
            return Result(False, f"{told}.\nLook again at {_PASSING_ON}")
        try:
            told = _subclass_tangent_passed_on(op, given) or _tangent_recorded(op)
        except _StateLeft as left:
            told = f"on a dual tensor whose tangent is a tensor subclass (TwoTensor), or requires grad: {left}"
        if told:
            return Result(False, f"{told}.\nLook again at {tangents}")
        if told := _above_autograd_once(library, "scale2", lambda: op(values.clone().requires_grad_()), "scale2(x)",
                                        values * 2):
            return Result(False, f"{told}.\nLook again at {_PASSING_ON}")
        # A kernel at ADInplaceOrView as well, as an in-place or view operator has (it bumps the version counter, or
        # makes the output a view: lesson 03, sections 3 and 6): a key below autograd, whose kernel runs too.
        inplace_or_view_ran = []

        def inplace_or_view(keyset, x):
            inplace_or_view_ran.append(keyset)
            return torch.ops.exercise.scale2.default.redispatch(keyset & torch._C._after_ADInplaceOrView_keyset, x)

        below = torch.library.Library("exercise", "IMPL")
        try:
            below.impl("scale2", inplace_or_view, "ADInplaceOrView", with_keyset=True)
            ran.clear()
            op(values.clone().requires_grad_())
        finally:
            below._destroy()
        if len(inplace_or_view_ran) != 1 or ran != ["CPU"]:
            return Result(False, "with a kernel at ADInplaceOrView too (an in-place or view operator has one: it bumps "
                                 "the version counter, or makes the output a view), scale2(x) on a CPU tensor that "
                                 f"requires grad: that kernel ran {len(inplace_or_view_ran)} times, scale2's kernels "
                                 f"below it {ran}: the keyset your call handed on left out ADInplaceOrView, a key "
                                 "below autograd that the call's own keyset holds. Below autograd, every key of the "
                                 f"call's keyset has its say (lesson 03, sections 3 and 6).\nLook again at "
                                 f"{_PASSING_ON}")
        if more_seen:
            what, seen = more_seen
            return Result(False, f"on {what} the mode saw {', '.join(seen)}, where a call of torch's own operators "
                                 "shows it the call alone: every other call is work each call does, and what every "
                                 "trace of the program records (torch.compile's, a profiler's). Forward needs the call "
                                 f"below autograd, and nothing more.\nLook again at {_PASSING_ON}")
        if unguarded:
            return Result(False, f"on {unguarded[0]}, scale2's {unguarded[1]} kernel ran with ADInplaceOrView not "
                                 "excluded on the thread: the aten calls a backend kernel makes inside it (one built "
                                 "from aten ops) go through autograd's view and version tracking again, so a kernel "
                                 "whose last call returns a view (a .t(); a reshape where the strides allow one) hands "
                                 "back a view made inside your Function, which the caller may not write into in place "
                                 "while autograd records, and one that writes in place moves a version counter. "
                                 "torch's generated autograd kernels of functional operators (mm, mul) hand the call "
                                 "on under a guard that excludes ADInplaceOrView and every autograd key for the calls "
                                 "made below them (emit_call in torchgen/packaged/autograd/gen_variable_type.py)."
                                 "\nLook again at lesson 04, section "
                                 f"1 (why the guard), and {_PASSING_ON}")
        if autograd_left:
            what, key, left_on = autograd_left
            return Result(False, f"on {what}, scale2's {key} kernel ran with {' and '.join(left_on)} not excluded on "
                                 "the thread: the aten calls a backend kernel makes inside it go through autograd "
                                 "again wherever their tensors' keysets hold that key (an mkldnn tensor's holds "
                                 "AutogradOther, a nested one's AutogradNestedTensor), and record. A guard that names "
                                 "some autograd keys leaves the others on: torch's generated autograd kernels hand the "
                                 "call on under one that excludes every autograd key and ADInplaceOrView."
                                 f"\nLook again at lesson 04, section 1 (why the guard), and {_PASSING_ON}")
        return Result(True, "below autograd, once, on the call's own backend (CPU, meta, sparse, nested, mkldnn), the "
                            "mode's key and those of conjugate and negative views kept, with a gradient; the thread's "
                            "state as it was, after a refused call too")


# ---------------------------------------------------------------------------------------------
# 05: autocast


_MM2_RECURSION = ("your AutocastCPU kernel calls mm2 again while AutocastCPU is still in the call's keyset, so the "
                  "dispatcher sends the call back to the same kernel, again and again.\nLook again at lesson 05, "
                  "section 4 (why the guard) and section 7 (from Python).")


def _register_autocast_crash(path: Path) -> str:
    """Why 05.register_autocast's process died: a kernel of the reader's that calls mm2 again, most likely."""
    return f"A stack overflow, if {_MM2_RECURSION}"


def _dtype_names(dtypes, between: str = " and ") -> str:
    return between.join(str(dtype).removeprefix("torch.") for dtype in dtypes)


def _mm2_seen_by_a_mode(op, activation: torch.Tensor, weight: torch.Tensor) -> str | None:
    """mm2 in a region, under a TorchDispatchMode entered after the earlier calls (a logger, a profiler,
    FakeTensorMode): the mode sits below autocast, and sees the call on the cast inputs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Watching(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func._schema.name == "exercise::mm2":
                seen.append(tuple(arg.dtype for arg in args if isinstance(arg, torch.Tensor)))
            return func(*args, **(kwargs or {}))

    what = ("in a region, mm2(float32, float32) under a TorchDispatchMode entered after the earlier calls (a logger, a "
            "profiler, FakeTensorMode)")
    try:
        with torch.autocast("cpu"), Watching():
            op(activation, weight)
    except Exception as error:  # noqa: BLE001 - the reader's kernel may raise anything: said with its call
        return f"{what}: the call raised {type(error).__name__}: {str(error).splitlines()[0][:200]}"
    if not seen:
        return (f"{what}: the mode never saw mm2: the call went on below autocast with a keyset that is not its own "
                "(a set of keys written by hand, or one kept from an earlier call, made before the mode was "
                "entered?): the Python key, which the call's own keyset has inside a mode, is left out, so every mode, "
                "and FakeTensorMode tracing for torch.compile, is skipped (lesson 05, section 4)")
    if seen[0] != (torch.bfloat16, torch.bfloat16):
        return f"{what}: the mode saw mm2 on {_dtype_names(seen[0])}, where autocast hands it bfloat16 inputs"
    return None


@exercise("05.register_autocast", "easy", on_crash=_register_autocast_crash)
def register_autocast(path: Path) -> Result:
    import threading

    received = []  # the dtypes each call of mm2's CPU kernel received
    received_memory = []  # and where the last call's inputs' elements are
    copies = []  # the first call whose kernel received a copy of an input already of the dtype it needs
    seen = []  # and the tensors, as weak references
    # The two-thread step's: a thread's name -> (the event it sets in mm2's CPU kernel, the one it then waits for),
    # and, by name, whether AutocastCPU was excluded there once it went on.
    meetings, excluded_after = {}, {}
    refusals = []  # the error the CPU kernel raised last
    autocast_inside = []  # and whether autocast was on for the operations inside it, at its last call
    answers, held_while_running = [], []  # the reader's module; a variable of it that held a tensor during a call

    def mm2(a, b):
        if answers and not held_while_running and (name := _variable_holding_a_tensor(answers[0])):
            held_while_running.append(name)
        if (meeting := meetings.get(threading.current_thread().name)) is not None:
            meeting[0].set()
            if meeting[1] is not None:
                meeting[1].wait(10)
            excluded_after[threading.current_thread().name] = torch._C._dispatch_tls_is_dispatch_key_excluded(
                torch._C.DispatchKey.AutocastCPU)
        received.append((a.dtype, b.dtype))
        received_memory[:] = [a.data_ptr(), b.data_ptr()]
        seen.extend((weakref.ref(a), weakref.ref(b)))
        # Whether the torch operations inside this kernel would be autocast again (the region on, not excluded)
        autocast_inside[:] = [torch.is_autocast_enabled("cpu") and not torch._C._dispatch_tls_is_dispatch_key_excluded(
            torch._C.DispatchKey.AutocastCPU)]
        try:
            torch._check(a.dtype == b.dtype, lambda: f"exercise::mm2: dtypes {a.dtype} and {b.dtype} differ")
            # A ValueError, as TORCH_CHECK_VALUE raises in a C++ kernel: not every refusal is a RuntimeError.
            torch._check_value(a.dim() == b.dim() == 2, lambda: f"exercise::mm2: {a.dim()}-D and {b.dim()}-D, not 2-D")
        except (RuntimeError, ValueError) as refusal:
            refusals[:] = [refusal]  # the object itself: what reaches the caller must be it
            raise
        return a @ b

    with operator("mm2(Tensor a, Tensor b) -> Tensor", mm2):
        library = torch.library.Library("exercise", "IMPL")
        answer = load_python(path)  # kept: a Library the module holds lives as long as the module
        answers.append(answer)
        # Registered in a process whose CPU autocast dtype was set to float16 (torch.set_autocast_dtype): the task's
        # bfloat16 is the task's, whatever the process's default at registration.
        default = torch.get_autocast_dtype("cpu")
        torch.set_autocast_dtype("cpu", torch.float16)
        try:
            before = _autocast_settings()
            answer.register(library)
            changed = [f"{what} from {was} to {now}" for what, was, now in
                       zip(before, before.values(), _autocast_settings().values()) if was != now]
        finally:
            torch.set_autocast_dtype("cpu", default)
        if changed:
            return Result(False, f"register(lib) changed {'; '.join(changed)}: a setting of the thread's, for "
                                 "every later autocast region of the program (torch's own operators' too), not the "
                                 "operator's. A registration changes the operator's dispatch table, nothing else "
                                 "(lesson 05, section 7: register_autocast's arguments).")
        op = _watching_dispatch_state(torch.ops.exercise.mm2.default,
                                      "lesson 05, section 4: the guard, and how long what it changes lasts.")
        activation, weight = torch.randn(2, 3), torch.randn(3, 4).to(torch.bfloat16)

        def call(where: str, a, b, dtype: torch.dtype) -> str | None:
            """mm2(a, b): None when it ran the CPU kernel once, on inputs of `dtype`, and returned their product."""
            what = f"{where}, mm2({_dtype_names((a.dtype, b.dtype), ', ')})"
            received.clear()
            attributes = [set(vars(a)), set(vars(b))]  # the caller's tensors' Python attributes
            try:
                out = op(a, b)
            except RecursionError:
                return f"{what} raised RecursionError: {_MM2_RECURSION}"
            except _StateLeft as left:
                return f"{what}: {left}"
            except RuntimeError as error:
                if received and torch._C._dispatch_has_kernel_for_dispatch_key("exercise::mm2", "AutocastCPU"):
                    why = (f"Your AutocastCPU kernel ran, but mm2's CPU kernel received {_dtype_names(received[-1])}: "
                           "both inputs must reach it in bfloat16: every input autocast may cast (lesson 05, section "
                           "2: what cached_cast casts).")
                elif torch._C._dispatch_has_kernel_for_dispatch_key("exercise::mm2", "AutocastCPU"):
                    why = ("Your AutocastCPU kernel raised this before mm2's CPU kernel ran: the error is your "
                           "kernel's, or that of what it called.")
                else:
                    why = "Nothing cast the inputs: the call went past AutocastCPU to the CPU kernel as it was."
                return f"{what} raised: {str(error).splitlines()[0]}\n{why}"
            if not received:
                return (f"{what}: mm2's CPU kernel did not run: your kernel computed the product some other way than "
                        "through the operator (lesson 05, section 2: what an Autocast kernel hands on)")
            if added := [f"{name}.{attribute}" for name, tensor, had in zip("ab", (a, b), attributes)
                         for attribute in sorted(set(vars(tensor)) - had)]:
                return (f"{what}: the call set {', '.join(added)} on the caller's tensors: what autocast does for a "
                        "call stays out of its arguments (torch.save keeps such attributes, and the caller's code may "
                        "read them)")
            if out.dtype != dtype and (not dtype.is_floating_point or dtype == torch.float64):
                return (f"{what} returned {out.dtype}: autocast casts only eligible inputs, floating point and not "
                        "float64; the others run as they are (lesson 05, section 2: what cached_cast casts; section "
                        "7: register_autocast's casts)")
            if out.dtype != dtype and received[-1] == (dtype, dtype) and autocast_inside == [False]:
                return (f"{what} returned {out.dtype}, though mm2's CPU kernel received {_dtype_names(received[-1])} "
                        "and computed with autocast off inside it: your kernel changed the result it was handed back. "
                        "An Autocast kernel casts the inputs, and returns what the kernel below returns (lesson 05, "
                        "section 7)")
            if out.dtype != dtype and received[-1] == (dtype, dtype):
                return (f"{what} returned {out.dtype}, though mm2's CPU kernel received {_dtype_names(received[-1])}: "
                        "the torch operations inside that kernel were autocast again, to the region's dtype. Your "
                        "kernel handed the call on with AutocastCPU still on for the calls below it (lesson 05, "
                        "section 4: why the guard)")
            if out.dtype != dtype and "float16" in where:
                return (f"{what} returned {out.dtype}: the task's casts are to bfloat16, whatever the region's dtype "
                        "(lesson 05, section 7: the dtype register_autocast casts to)")
            if out.dtype != dtype and out.dtype in (torch.float16, torch.bfloat16):
                return (f"{what} returned {out.dtype}, where {dtype} is right: the task's casts are to bfloat16, "
                        "whatever autocast's dtype was when your registration ran, or is when the call runs (lesson "
                        "05, section 7: the dtype register_autocast casts to)")
            if out.dtype != dtype:
                return (f"{what} returned {out.dtype}, where {dtype} is right: inside autocast, the task casts mm2's "
                        "eligible inputs to bfloat16 (lesson 05, section 7: register_autocast)")
            if received != [(dtype, dtype)]:
                return (f"{what}: mm2's CPU kernel ran {len(received)} time(s), on {_dtype_names(received[0])}, though "
                        f"the result is {dtype}: the inputs must be cast before the kernel runs, once")
            with torch.autocast("cpu", enabled=False):  # the product in `dtype`, not in the region's
                right = a.to(dtype) @ b.to(dtype)
            if not torch.equal(out, right):
                stale = (": the result is the product of the weight as it was before the write. A cast kept from an "
                         "earlier call is stale once its source changes; torch's cached_cast keeps a parameter's cast "
                         "only until its region ends (lesson 05, section 5: what cached_cast keeps, and for how long)"
                         if "written into" in where else "")
                return f"{what} returned {dtype}, but not the product of the inputs cast to {dtype}{stale}"
            if not copies and (copied := [name for name, tensor, memory in zip("ab", (a, b), received_memory)
                                          if tensor.dtype == dtype and tensor.numel() and tensor.data_ptr() != memory]):
                copies.append(f"{what}: mm2's CPU kernel received a copy of {' and '.join(copied)}, already {dtype}: a "
                              "cast to the dtype a tensor has is the tensor itself (tensor.to(dtype) returns it; "
                              "copy=True or a clone copies it, a weight's every element at every call). "
                              "register_autocast's kernel casts with value.to(dtype) (torch/_library/custom_ops.py, "
                              "_cast; lesson 05, section 7)")
            return None

        def refused(where: str) -> str | None:
            """Calls mm2's CPU kernel refuses, with a RuntimeError and with a ValueError: each error passes through
            the reader's kernel, which must leave the thread's state as it found it."""
            for shapes, error in (([2, 3], [4, 5]), RuntimeError), (([3], [3, 2]), ValueError):
                try:
                    op(*(torch.randn(shape) for shape in shapes))
                except _StateLeft as left:
                    return (f"{where}, a call mm2's CPU kernel refuses (shapes {shapes[0]} and {shapes[1]}), its "
                            f"{error.__name__} raised through your kernel: what is set by hand and unset by hand "
                            f"stays set when an error skips the line that unsets it. {left}")
                except (RuntimeError, ValueError) as raised:
                    if not isinstance(raised, error):  # a caller's `except ValueError` must still catch it
                        return (f"{where}, a call mm2's CPU kernel refuses (shapes {shapes[0]} and {shapes[1]}) with "
                                f"a {error.__name__}: the caller got a {type(raised).__name__} instead, so its "
                                f"`except {error.__name__}` no longer catches it inside autocast. An Autocast kernel "
                                "casts; what the kernel below raises passes through it as it is (lesson 05, "
                                "section 7)")
                    if refusals and raised is not refusals[0]:
                        return (f"{where}, a call mm2's CPU kernel refuses (shapes {shapes[0]} and {shapes[1]}) with "
                                f"a {error.__name__}: the caller got a new {type(raised).__name__}, not the one the "
                                "kernel raised: what the kernel's error carried (its traceback down to the kernel, "
                                "notes, attributes of its own) is lost. What the kernel below raises passes through "
                                "an Autocast kernel as it is (lesson 05, section 7)")
            return None

        def mixed_refused(where: str, a, b) -> str | None:
            """A float32 and a float64 input, in either order: autocast casts the float32 one alone (float64 is not
            eligible), and the kernel refuses the two dtypes, as it does outside a region."""
            received.clear()
            call = f"mm2({_dtype_names((a.dtype, b.dtype), ', ')})"
            try:
                op(a, b)
            except _StateLeft as left:
                return f"{where}, {call}: {left}"
            except RuntimeError:
                return None
            kept = str(next(t.dtype for t in (a, b) if t.dtype != torch.float32)).removeprefix("torch.")
            return (f"{where}, {call} ran, its CPU kernel given {_dtype_names(received[-1])}: autocast casts each "
                    "eligible input (floating point, not float64) and leaves the others, so the kernel gets the "
                    f"{kept} one as it is beside a bfloat16 one, and refuses them, as it refuses float32 and {kept} "
                    f"outside a region. Deciding from one input casts a {kept} one to bfloat16 (lesson 05, section 2: "
                    "what cached_cast casts)")

        def gradient(a, b, out) -> str | None:  # after the region (lesson 05, section 6: backward outside it)
            if out.grad_fn is not None:
                out.float().sum().backward()
            if a.grad is None or b.grad is None:
                return ("inside autocast, mm2 on inputs that require grad: no gradient reached an input: the tensors "
                        "your kernel handed on were cut off the inputs' graph (lesson 05, section 2: what "
                        "an Autocast kernel hands on; section 6: gradients under autocast)")
            right = torch.ones(2, 4) @ b.detach().to(torch.bfloat16).float().t()
            if not torch.allclose(a.grad.float(), right, rtol=2e-2, atol=1e-2):
                return f"inside autocast, mm2 on inputs that require grad: the gradient of a is {a.grad.tolist()}"
            return None

        # Calls in one region, the first as the task's model makes it, and ones its kernel refuses; one after the
        # region; then one in a second region, after a write into a float32 weight the first region cast.
        weight32 = weight.float()
        parameter = weight.float().requires_grad_()  # a leaf that requires grad: what cached_cast keeps in a region
        with_grad = activation.clone().requires_grad_(), weight32.clone().requires_grad_()
        with torch.autocast("cpu"):
            problem = (call("inside autocast", activation, weight, torch.bfloat16)
                       or call("inside autocast", weight.t(), activation.t(), torch.bfloat16)
                       or call("inside autocast, a third call", activation, weight32, torch.bfloat16)
                       or call("inside autocast, a float32 parameter (a leaf that requires grad)", activation,
                               parameter, torch.bfloat16)
                       or call("inside autocast", activation, weight.to(torch.float16), torch.bfloat16)
                       or call("inside autocast", activation.half(), weight.half(), torch.bfloat16)
                       or call("inside autocast", activation.double(), weight.double(), torch.float64)
                       or call("inside autocast", activation.long(), weight.long(), torch.int64)
                       or call("inside autocast", activation.int(), weight.int(), torch.int32)
                       or call("inside autocast", activation.short(), weight.short(), torch.int16)
                       or call("inside autocast, a float8_e4m3fn weight (floating point, so eligible)", activation,
                               weight.to(torch.float8_e4m3fn), torch.bfloat16)
                       or call("inside autocast, a float8_e5m2fnuz weight (floating point, so eligible)", activation,
                               weight.to(torch.float8_e5m2fnuz), torch.bfloat16)
                       or call("inside autocast", activation.to(torch.complex64), weight.to(torch.complex64),
                               torch.complex64)
                       or refused("inside autocast")
                       or mixed_refused("inside autocast", activation, weight.double())
                       or call("inside autocast, an empty float32 activation (0 x 3: no proposals found, an empty "
                               "last batch)", torch.randn(0, 3), weight, torch.bfloat16)
                       or mixed_refused("inside autocast", activation.double(), weight32.detach())
                       or next(filter(None, (call(f"inside autocast, a {str(dtype).removeprefix('torch.')} weight "
                                                  "(floating point, so eligible)", activation, weight.to(dtype),
                                                  torch.bfloat16)
                                             for dtype in (torch.float8_e5m2, torch.float8_e4m3fnuz,
                                                           torch.float8_e8m0fnu))), None)
                       or next(filter(None, (call("inside autocast", activation.to(dtype), weight.to(dtype), dtype)
                                             for dtype in (torch.int8, torch.uint8, torch.complex128))), None)
                       # An eligible input beside an integer one, which autocast leaves: only the first is cast.
                       or mixed_refused("inside autocast", activation, weight.long()))
            with_grad_out = None if problem else op(*with_grad)
        problem = problem or gradient(*with_grad, with_grad_out)
        problem = problem or call("after the autocast region", activation, weight32, torch.float32)
        problem = problem or _mm2_cast_cache_kept(op)
        if not problem:
            weight32.mul_(10)
            with torch.no_grad():
                parameter.mul_(10)  # as an optimizer's step writes into a parameter between two steps' regions
            with torch.autocast("cpu"):
                problem = (call("in a second region, the float32 weight written into (w.mul_(10)) since the first",
                                activation, weight32, torch.bfloat16)
                           or call("in a second region, the float32 parameter written into under no_grad "
                                   "(p.mul_(10), as an optimizer step does) since the first", activation, parameter,
                                   torch.bfloat16))
        if not problem:
            # Through .data (old optimizers, weight loading): w's version counter stays. Its rows in reverse order:
            # its sum, too, stays as it was.
            weight32.data.copy_(weight32.data.flip(0))
            with torch.autocast("cpu"):
                problem = call("in a third region, the float32 weight written into through .data (its rows reversed: "
                               "w.data.copy_(w.data.flip(0)), which leaves its version counter, its sum and its "
                               "address as they were) since the second", activation, weight32, torch.bfloat16)
        if not problem:
            with torch.autocast("cpu"):
                # An output kept (gradient accumulation): its graph holds the parameter's cast, as mm saves its second
                # input when its first requires grad.
                kept = op(activation.clone().requires_grad_(), parameter)
            parameter.data.mul_(2)
            with torch.autocast("cpu"):
                problem = call("in a fourth region, the parameter written into through .data while an earlier "
                               "output's graph, still kept, holds its cast", activation, parameter, torch.bfloat16)
            del kept
        if not problem:
            with torch.autocast("cpu", dtype=torch.float16):
                problem = call("in a region of float16 (torch.autocast(\"cpu\", dtype=torch.float16))", activation,
                               weight32, torch.bfloat16)
        if not problem:
            with torch.autocast("cpu", cache_enabled=False):
                problem = call("in a region without autocast's cast cache (cache_enabled=False)", activation,
                               weight32, torch.bfloat16)
        if not problem:
            with torch.autocast("cpu"), torch.no_grad():  # an evaluation loop: no graph wanted
                evaluated = op(activation, parameter)
            if evaluated.requires_grad:
                problem = (f"in a region under torch.no_grad() (an evaluation loop), mm2 of a parameter that requires "
                           f"grad returned an output that requires grad (grad_fn "
                           f"{type(evaluated.grad_fn).__name__}): the call recorded a graph where the caller turned "
                           "recording off, and each step's graph keeps the parameter's cast and the activations "
                           "alive. An Autocast kernel hands the call on in the caller's grad mode (lesson 05, section "
                           "2: what an Autocast kernel hands on)")
        problem = problem or _mm2_seen_by_a_mode(op, activation, weight32)
        problem = problem or _mm2_saved_activations(op) or _mm2_parameters_freed(op) or _mm2_casts_freed(op, seen)
        problem = problem or _mm2_ineligible_untouched(op, received)
        if problem:
            return Result(False, problem)
        library._destroy()
        autocast_keys = [name for name in torch._C.DispatchKey.__members__ if name.startswith("Autocast")]
        if left := [key for key in autocast_keys
                    if torch._C._dispatch_has_kernel_for_dispatch_key("exercise::mm2", key)]:
            return Result(False, f"your {left[0]} kernel outlives the Library you were given: the registration is "
                                 "not in `lib`. Registered without lib=, it stays for the life of the process, and "
                                 "nothing can remove it; in a Library of your own, it stays as long as that object, "
                                 "out of the caller's reach (lesson 05, section 7)")
        # Registered again in a new Library, once the first is gone (a test's fixture, a plugin reloaded).
        second = torch.library.Library("exercise", "IMPL")
        try:
            answer.register(second)
            with torch.autocast("cpu"):
                problem = call("after the first Library was destroyed and register() given a new one (a test fixture, "
                               "a plugin reloaded), in a region", activation, weight, torch.bfloat16)
            # Two threads in autocast regions at once (a threaded server): thread B calls mm2 while thread A's call is
            # inside mm2's CPU kernel, which then goes on.
            a_inside, b_inside = threading.Event(), threading.Event()
            meetings.update({"mm2 A": (a_inside, b_inside), "mm2 B": (b_inside, None)})

            settings_around = {}  # a thread's name -> its autocast settings in its region, before and after its call

            def request(name: str) -> None:
                if name == "mm2 B":
                    a_inside.wait(10)
                # Two regions of their own: B's of float16 (its casts are to bfloat16 all the same).
                with torch.autocast("cpu", dtype=torch.bfloat16 if name == "mm2 A" else torch.float16):
                    before = _autocast_settings()
                    torch.ops.exercise.mm2.default(torch.randn(2, 3), torch.randn(3, 2, dtype=torch.bfloat16))
                    settings_around[name] = before, _autocast_settings()

            threads = [threading.Thread(target=request, args=(name,), name=name) for name in ("mm2 A", "mm2 B")]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            meetings.clear()
        finally:
            second._destroy()
        if problem:
            return Result(False, problem)
        if excluded_after.get("mm2 A") is False:
            return Result(False, "two threads in autocast regions at once (a threaded server): thread B called mm2 "
                                 "while thread A's call was inside mm2's CPU kernel, and there, once B's call had "
                                 "gone through your kernel, AutocastCPU was no longer excluded on thread A: every "
                                 "torch operation A's kernel makes after that is autocast again. What your kernel's "
                                 "guard holds is every call's at once (one object, made once?): a guard belongs to "
                                 "one call on one thread (lesson 05, section 4)")
        before, after = settings_around.get("mm2 A", ({}, {}))
        if changed := next((f"{what} from {was} to {after.get(what)}" for what, was in before.items()
                            if was != after.get(what)), None):
            return Result(False, "two threads in autocast regions at once (a threaded server), A's of bfloat16 and B's "
                                 "of float16: thread B called mm2 while thread A's call was inside mm2's CPU kernel, "
                                 f"and after A's call {changed} on thread A: what your kernel set back there was B's. "
                                 "What it keeps of the caller's settings is every call's at once (one object, entered "
                                 "by every call?): each call's are its own (lesson 05, section 4)")
        if name := _variable_holding_a_tensor(answer):
            return Result(False, f"after the check's calls, your file keeps a tensor in its variable `{name}`: the "
                                 "casts (or inputs, or outputs) of calls that are over, whose memory grows for the "
                                 "life of the process. What an Autocast kernel casts is for its call; torch's "
                                 "cached_cast keeps a parameter's cast only until its region ends (lesson 05, section "
                                 "5: what cached_cast keeps, and for how long)")
        if held_while_running:
            return Result(False, f"while mm2's CPU kernel ran, your file held a tensor in its variable "
                                 f"`{held_while_running[0]}`: a variable of the module is every thread's, so two "
                                 "threads' regions at once (a threaded server) hand each other's tensors on, or "
                                 "clear them under the other's call. A call's tensors live in the call's own "
                                 "variables (lesson 05, section 2: what an Autocast kernel hands on)")
        if copies:
            return Result(False, copies[0])
        return Result(True, "inside autocast mm2 ran in bfloat16 on float32, float16 and bfloat16 inputs, with "
                            "gradients, as it was on float64 and integer ones, in float32 after the region, on a "
                            "weight's and a parameter's new values in a second region, and in bfloat16 in a float16 "
                            "region and in one without the cast cache; the thread's state and autocast's settings as "
                            "they were after every call, a refused one too; the registration lives in your Library")


def _mm2_cast_cache_kept(op) -> str | None:
    """A call leaves autocast's cast cache as it found it: a parameter (a leaf that requires grad) that torch.mm cast
    in the region before the call is not cast again by torch.mm after it. The cache holds such a cast for the whole
    region, and the region's exit empties it (torch.clear_autocast_cache): a kernel that empties it has every weight
    of the model cast again, at each call."""
    from torch.utils._python_dispatch import TorchDispatchMode

    activation, parameter = torch.randn(2, 3), torch.randn(3, 4, requires_grad=True)
    casts = []

    class CountingCasts(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten._to_copy.default and args and args[0] is parameter:
                casts.append(None)
            return func(*args, **(kwargs or {}))

    with torch.autocast("cpu"):
        torch.mm(activation, parameter)  # cast once, and cached
        op(activation, parameter)
        with CountingCasts():
            torch.mm(activation, parameter)
    if not casts:
        return None
    return ("in a region, torch.mm(activation, parameter) (a parameter: a leaf that requires grad, whose cast autocast "
            "keeps for the region), then mm2, then torch.mm again: the second torch.mm cast the parameter again. "
            "Your kernel emptied autocast's cast cache (torch.clear_autocast_cache()?), which is the region's: every "
            "operator's casts of every weight are made again after each mm2 call (lesson 05, section 5: what "
            "cached_cast keeps, and for how long)")


def _mm2_ineligible_untouched(op, received: list) -> str | None:
    """Inside autocast, mm2 on two tensors that are not floating point, of dtypes the task does not list (a mask,
    unsigned integers, complex32): autocast leaves them as they are, so the CPU kernel receives them so, and its
    refusal (it has no product for them) reaches the caller."""
    for dtype in (torch.bool, torch.uint16, torch.uint32, torch.complex32):
        received.clear()
        name = str(dtype).removeprefix("torch.")
        try:
            with torch.autocast("cpu"):
                op(torch.ones(2, 3, dtype=dtype), torch.ones(3, 4, dtype=dtype))
        except _StateLeft as left:
            return f"inside autocast, mm2({name}, {name}): {left}"
        except RuntimeError:  # mm2's CPU kernel has no product for them: the caller's to see
            pass
        if received != [(dtype, dtype)]:
            given = f"received {_dtype_names(received[-1])}" if received else "never ran"
            return (f"inside autocast, mm2({name}, {name}): mm2's CPU kernel {given}: autocast casts only eligible "
                    f"inputs, floating point and not float64; a {name} tensor is not floating point, and reaches the "
                    "kernel as it is, which decides what to do with it (lesson 05, section 2: what cached_cast "
                    "casts)")
    return None


def _mm2_saved_activations(op) -> str | None:
    """Two calls in one region on two activations, then the first call's backward: it needs the first activation's
    cast, as the first call made it, whatever the second call did."""
    weight = torch.randn(3, 4, requires_grad=True)
    first, second = torch.randn(2, 3), torch.randn(2, 3)
    with torch.autocast("cpu"):
        out = op(first, weight)
        op(second, weight)
    (grad,) = torch.autograd.grad(out.float().sum(), weight)
    expected = first.bfloat16().float().t() @ torch.ones(2, 4)
    if not torch.allclose(grad.float(), expected, rtol=1e-2, atol=1e-2):
        return ("in one region, mm2(first, w) then mm2(second, w), then the first call's backward: the weight's "
                "gradient is not the first activation's (transposed, times the output's gradient): the first call's "
                "cast of its activation was changed by the second call. Each call's casts are its own, kept for its "
                "backward (lesson 05, section 5: which casts torch keeps, and for how long)")
    return None


def _kept_alive(calls: int, call) -> int:
    """How many of the tensors that `call()` makes, uses and returns, over `calls` calls, are still alive once dropped
    and collected: what an autocast kernel kept of its inputs (a cache of casts, say)."""
    import gc
    import weakref

    alive = [weakref.ref(tensor) for _ in range(calls) for tensor in call()]
    gc.collect()
    return sum(reference() is not None for reference in alive)


def _mm2_parameters_freed(op) -> str | None:
    """Parameters made, used in a region and dropped, twenty times (models built and thrown away, as in a sweep): none
    may stay alive through something the autocast kernel kept."""
    activation = torch.randn(2, 3)

    def a_model():
        parameter = torch.nn.Parameter(torch.randn(3, 4))
        with torch.autocast("cpu"):
            op(activation, parameter)
        return [parameter]

    if kept := _kept_alive(20, a_model):
        return (f"{kept} of 20 parameters, each used in a region and then dropped, are still alive: something the "
                "autocast kernel kept (a cache of casts?) holds them, and their memory, for the life of the process. "
                "torch's own cache of casts lives for one region (lesson 05, section 5)")
    return None


def _mm2_casts_freed(op, seen: list) -> str | None:
    """Twenty regions, each calling mm2 on a new float32 activation and weight that do not require grad (a model in
    inference, activations that change each call): once the caller drops them and the output, none of the casts mm2's
    CPU kernel received may be alive. torch's own cache keeps only casts of leaves that require grad, for one region
    (lesson 05, section 5)."""
    import gc

    seen.clear()
    for _ in range(20):
        with torch.autocast("cpu"):
            op(torch.randn(2, 3), torch.randn(3, 4))
    gc.collect()
    kept, received = sum(reference() is not None for reference in seen), len(seen)
    seen.clear()
    if kept:
        return (f"twenty regions, each calling mm2 on a new float32 activation and weight that do not require grad, "
                f"dropped since with the output: {kept} of the {received} bfloat16 tensors mm2's CPU kernel received "
                "are still alive: something your kernel keeps (a cache of casts?) holds them for the life of the "
                "process, and grows with every call. torch's own cache keeps casts of leaves that require grad only, "
                "for one region (lesson 05, section 5)")
    return None


def _autocast_guard_crash(path: Path) -> str:
    """Why 05.autocast_guard's process died: the mistakes lesson 05 warns about, found in the file."""
    if mentions(path, r"DispatchKey::Autocast\b"):
        return ("You exclude c10::DispatchKey::Autocast: in C++ that name is an alias kept for old code, and it "
                "means AutocastCUDA (lesson 05, section 2). Under torch.autocast(\"cpu\") the call comes back to your "
                "kernel.")
    if mentions(path, r"ExcludeDispatchKeyGuard\s*[({]"):
        return ("Your guard is a temporary: `ExcludeDispatchKeyGuard(...);` with no name is destroyed at the end of "
                "that statement, before the call it was meant to cover. A guard works while its variable lives.")
    if mentions(path, r"\bthread_local\b"):
        return ("Your kernel crashed the process, and it keeps something in a thread_local variable: tensors held "
                "there outlive the call, and are destroyed when their thread, or the process, ends, possibly after "
                "what they refer to is gone. What a call needs lives in the call: a local variable (lesson 05, section "
                "2). Other causes of such a crash: a kernel that calls the operator again with AutocastCPU still in "
                "the keyset (a stack overflow, lesson 05, section 4), memory read after it was freed.")
    return ("Your kernel crashed the process (the line above names the call the check was making, where it says "
            "one). What crashes such a kernel: a stack overflow (an AutocastCPU kernel that calls the operator again "
            "while AutocastCPU is still in the call's keyset, so the dispatcher sends the call back to the same "
            "kernel, forever: lesson 05, section 4), memory read after it was freed (a TensorList that refers to a "
            "vector that is gone), memory two threads write at once (a static variable shared by every call), or an "
            "element of xs read that is not there.")


_F32, _BF16, _F16, _F64 = torch.float32, torch.bfloat16, torch.float16, torch.float64
# 05.autocast_guard's calls: (where, the dtypes of xs, scale's or None, the dtype the layers below autocast must
# receive every input in). Two calls in one region: what the first leaves behind, the second meets.
_SUM_SQUARES_IN_REGION = [
    ("inside autocast, xs in float32, bfloat16 and float16, no scale", [_F32, _BF16, _F16], None, _F32),
    ("a second call in the same region, xs and scale in bfloat16", [_BF16, _BF16], _BF16, _F32),
    ("inside autocast, xs in float32 and scale alone in bfloat16", [_F32, _F32], _BF16, _F32),
    ("inside autocast, xs in float8_e5m2 (floating point, so eligible)", [torch.float8_e5m2] * 2, None, _F32),
    ("inside autocast, xs in float8_e5m2fnuz (floating point, so eligible)", [torch.float8_e5m2fnuz] * 2, None, _F32),
    ("inside autocast, float64 inputs", [_F64, _F64], _F64, _F64),
    ("inside autocast, xs in float8_e4m3fn (floating point, so eligible)", [torch.float8_e4m3fn] * 2, None, _F32),
    ("inside autocast, xs in float8_e4m3fnuz (floating point, so eligible)", [torch.float8_e4m3fnuz] * 2, None, _F32),
    ("inside autocast, xs in float8_e8m0fnu (floating point, so eligible)", [torch.float8_e8m0fnu] * 2, None, _F32),
    ("inside autocast, xs and scale in float16 (a bfloat16 region's other 16-bit dtype)", [_F16, _F16], _F16, _F32),
    ("inside autocast, xs and scale in float8_e4m3fn", [torch.float8_e4m3fn] * 2, torch.float8_e4m3fn, _F32),
]
_SUM_SQUARES_AFTER_REGION = ("after the region, bfloat16 inputs", [_BF16, _BF16], _BF16, _BF16)
_SUM_SQUARES = "exercise05.sum_squares.default"
_SUM_SQUARES_MORE_CALLS: list[str] = []  # calls besides the casts needed, seen below autocast (_sum_squares_call)
_SUM_SQUARES_VALUES = [[1.0, 3.0, 0.1, 250.0], [0.01, 2.0, -0.2, 300.0], [-1.5, 0.5, 7.0, 1.0]]  # xs[0], xs[1], ...
_SUM_SQUARES_SCALE = [0.5, -2.0, 3.0, 0.001]
_SUM_SQUARES_RTOL = {_F64: 1e-12, _F32: 1e-5, _BF16: 2e-2, _F16: 2e-2,  # each dtype's precision, with room to round
                     torch.float8_e5m2: 0.25, torch.float8_e5m2fnuz: 0.25, torch.float8_e4m3fn: 0.125,
                     torch.float8_e4m3fnuz: 0.125, torch.float8_e8m0fnu: 1.0}  # e8m0: powers of 2 only


# Per call of sum_squares's Autograd kernel (below autocast): whether AutocastCPU was excluded on the thread then, as
# a guard excludes it, so that a torch operation made below (here, by autograd's setup) is not autocast again.
_SUM_SQUARES_AUTOCAST_EXCLUDED: list[bool] = []
# And AutocastXPU, which an XPU region inside the CPU one turns on: a kernel's guard leaves it as the caller had it.
_SUM_SQUARES_XPU_EXCLUDED: list[bool] = []


def _sum_squares_setup(ctx, inputs, output):
    _SUM_SQUARES_AUTOCAST_EXCLUDED.append(
        torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.AutocastCPU))
    _SUM_SQUARES_XPU_EXCLUDED.append(torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.AutocastXPU))
    xs, scale = inputs
    ctx.save_for_backward(*xs, scale)


def _sum_squares_backward(ctx, grad):
    *xs, scale = ctx.saved_tensors
    if scale is None:  # no gradient for an absent scale: torch 2.13 refuses a None there, 2.14 on take either
        return ([2 * x * grad for x in xs],)
    return [2 * x * grad * scale for x in xs], grad * sum(x * x for x in xs)


def _sum_squares_inputs(dtypes: list[torch.dtype], scale_dtype: torch.dtype | None):
    """xs (and scale, or None) in those dtypes, leaves that require grad; values beyond a float8 dtype's range at its
    largest (float8_e4m3fnuz's is 240)."""
    def in_range(values: list[float], dtype: torch.dtype) -> torch.Tensor:
        if dtype.is_floating_point and dtype.itemsize == 1:
            return torch.tensor(values).clamp(-torch.finfo(dtype).max, torch.finfo(dtype).max).to(dtype)
        return torch.tensor(values).to(dtype)

    xs = [in_range(values, dtype).requires_grad_() for values, dtype in zip(_SUM_SQUARES_VALUES, dtypes)]
    scale = None if scale_dtype is None else torch.tensor(_SUM_SQUARES_SCALE).to(scale_dtype).requires_grad_()
    return xs, scale


def _sum_squares_dtypes(dtypes: list[torch.dtype], count: int) -> str:
    """The dtypes of a call's inputs, xs first (count of them), then scale's if there is one."""
    named = f"xs in {_dtype_names(dtypes[:count], ', ')}"
    return named + (f" and scale in {_dtype_names(dtypes[count:])}" if dtypes[count:] else "")


def _sum_squares_call(op, where: str, dtypes, scale_dtype, want: torch.dtype, inputs=None):
    """sum_squares on inputs of those dtypes (new ones, or `inputs`: (xs, scale)): why not, when the layers below
    autocast did not receive them all in `want`, once, or the result is wrong; else a function that says why not, when
    the gradients are wrong (None when they are right), to be called after the region (lesson 05, section 6: backward
    outside it)."""
    xs, scale = inputs or _sum_squares_inputs(dtypes, scale_dtype)
    inputs = dtypes + ([scale_dtype] if scale is not None else [])
    given = _sum_squares_dtypes(inputs, len(xs))
    with _recording_mode() as below:
        try:
            out = op(xs, scale)
        except _StateLeft as left:
            return f"{where}: {left}"
        except RuntimeError as error:
            if told := _redispatch_refused(error):
                return f"{where}: {told}".replace("lesson 03, section 3",
                                                  "lesson 05, section 4, and lesson 03, section 3")
            received = [_sum_squares_dtypes(d, len(xs)) for name, d in below.calls if name == _SUM_SQUARES]
            rule = ("autocast casts only eligible inputs (floating point, on the region's device, not float64): these "
                    "must reach them as they were" if want == _F64 else "every eligible input, each tensor of xs and "
                    f"scale, must reach them in {_dtype_names([want])}")
            return (f"{where}, sum_squares raised RuntimeError: {str(error).splitlines()[0][:200]}\nGiven {given}, the "
                    f"layers below autocast received {'; then '.join(received) or 'nothing'}: {rule} (lesson 05, "
                    "section 2).")
    received = [d for name, d in below.calls if name == _SUM_SQUARES]
    handed_on_grads = [grad for (name, _), grad in zip(below.calls, below.grads) if name == _SUM_SQUARES]
    if out.grad_fn is None and handed_on_grads and not any(handed_on_grads):
        return (f"{where}: the output has no grad_fn, and the inputs that reached the layers below autocast do not "
                "require grad, though xs do: the tensors your kernel handed on were cut off xs' graph (detached, or "
                "made where autograd does not record), so nothing links the output to xs (lesson 05, section 2: what "
                "an Autocast kernel hands on; section 6: gradients under autocast)")
    if out.grad_fn is None:
        return (f"{where}: the output has no grad_fn: the call skipped autograd. Casting is the Autocast kernel's job; "
                "the layers below it must still run (lesson 05, section 2). (The check's first call ran under "
                "torch.inference_mode(), which excludes autograd's keys on the thread: a thread state kept from an "
                "earlier call is that call's, not this one's.)")
    if received != [[want] * len(inputs)]:
        shown = "; then ".join(_sum_squares_dtypes(d, len(xs)) for d in received) or "nothing"
        problem = f"{where}: given {given}, the layers below autocast received {shown}"
        if not received:
            return problem + (": the call never reached the keys below autocast that it carried (this check records "
                              "at the Python key, as torch.compile's modes do). A keyset made by hand leaves out keys "
                              "the call had, and a call made on another thread runs without this thread's state "
                              "(its modes among it); the layers below must run sum_squares once, on the caller's "
                              "thread (lesson 05, section 4; lesson 03, section 3)")
        if len(received) != 1:
            return problem + ": they must run sum_squares once (lesson 05, section 2)"
        if want == _F64:
            return problem + (": autocast casts only eligible inputs: floating point, on the region's device, and not "
                              "float64 (lesson 05, section 2)")
        if received[0] == inputs:
            return problem + (": nothing was cast: this operator runs in float32, whatever dtype its inputs share "
                              "(lesson 05, section 7 and summary: the float32 policy)")
        if _BF16 in received[0] and _F16 not in received[0]:
            return problem + (": the region's lower precision, matmul's policy; this operator's is float32 (lesson "
                              "05, section 7 and summary)")
        return problem + f": every eligible input must reach them in {_dtype_names([want])} (lesson 05, section 2)"
    # torch's cached_cast casts an eligible input whose dtype differs from the target, and hands on any other as it is.
    # Said once the rest passed (autocast_guard's last step): a diagnosis of another step may name the cause.
    casts = [name for name, _ in below.calls if name != _SUM_SQUARES]
    if len(casts) > (needed := sum(dtype != want for dtype in inputs)):
        _SUM_SQUARES_MORE_CALLS.append(
            f"{where}: given {given}, the layers below autocast saw {', '.join(casts)} before sum_squares, where "
            f"{needed} input(s) differ from {_dtype_names([want])}: an input is cast once where its dtype differs "
            "from the target, and handed on as it is, the caller's own tensor, where it does not (every other call is "
            "memory and time for nothing, on every call; lesson 05, section 2: what cached_cast casts)")
    expected = torch.zeros(out.shape, dtype=want)
    for x in xs:  # the CPU kernel's sums, in its dtype
        expected = expected + x.detach().to(want) * x.detach().to(want)
    expected = expected if scale is None else expected * scale.detach().to(want)
    if out.dtype != want or not torch.allclose(out.detach(), expected, rtol=_SUM_SQUARES_RTOL[want], atol=0):
        why = (": the result is what the kernel below computes, in its dtype, handed back as it is (lesson 05, section "
               "7 and summary: the float32 policy)" if out.dtype != want else " (lesson 05, section 2)")
        return (f"{where}: given {given}, the result is {_values(out.detach())} in {_dtype_names([out.dtype])}, "
                f"right {_values(expected)} in {_dtype_names([want])}{why}")

    def gradients() -> str | None:
        try:
            out.float().sum().backward()
        except RuntimeError as error:
            first = str(error).splitlines()[0].split(". ")[0][:200]
            return (f"{where}: backward through sum_squares failed after the region: {first}.\nAutograd saw the call "
                    "your kernel made below autocast: every argument as the caller gave it, an absent scale absent "
                    "(std::nullopt), a present one present (lesson 05, sections 2 and 6).")
        factor = torch.ones(out.shape, dtype=_F64) if scale is None else scale.detach().double()
        rights = [(f"xs[{i}]", x, 2 * x.detach().double() * factor) for i, x in enumerate(xs)]
        if scale is not None:
            rights.append(("scale", scale, sum(x.detach().double() ** 2 for x in xs)))
        for name, tensor, right in rights:
            # As autograd casts a gradient: float8_e4m3fn's largest is 448, and beyond float8_e4m3fnuz's, 240, is NaN.
            right = right.to(tensor.dtype).double()
            if tensor.grad is None or not torch.allclose(tensor.grad.double(), right,
                                                         rtol=_SUM_SQUARES_RTOL[tensor.dtype], equal_nan=True):
                return (f"{where}: the gradient of {name} is {None if tensor.grad is None else _values(tensor.grad)}, "
                        f"right {_values(right)}")
        return None

    return gradients


def _sum_squares_below(op, xs, scale, what: str) -> tuple[list, torch.Tensor | None] | str:
    """op(xs, scale): the dtypes the layers below autocast received, call by call, and the output (None where the call
    was refused); or, where the call left the thread's dispatch state changed, what it left, said of `what`."""
    with _recording_mode() as below:
        try:
            out = op(xs, scale)
        except _StateLeft as left:
            return f"{what}: {left}"
        except (RuntimeError, NotImplementedError):
            out = None
    return [d for name, d in below.calls if name == _SUM_SQUARES], out


def _sum_squares_integers(op) -> str | None:
    """Inside a region, int64 xs, then complex64 ones, then ones of every other integer dtype and bool (some narrower
    than float32, and none floating point): not eligible, so they reach the CPU kernel as they are, which refuses
    them."""
    for xs in ([torch.tensor([1, 3, 5, 2]), torch.tensor([4, 2, 1, 3])],
               [torch.tensor([1 + 2j, 3j]), torch.tensor([2 - 1j, 1 + 1j])],
               *([torch.tensor([1, 0, 1]).to(dtype), torch.tensor([0, 1, 1]).to(dtype)]
                 for dtype in (torch.int8, torch.uint8, torch.bool, torch.int16, torch.int32, torch.uint16,
                               torch.uint32, torch.uint64))):
        dtype = _dtype_names([xs[0].dtype])
        if isinstance(got := _sum_squares_below(op, xs, None, f"inside autocast, xs in {dtype}"), str):
            return got
        received, out = [_sum_squares_dtypes(d, len(xs)) for d in got[0]], got[1]
        if received == [_sum_squares_dtypes([xs[0].dtype] * 2, 2)] and out is None:
            continue
        returned = "" if out is None else f", and the call returned a result in {_dtype_names([out.dtype])}"
        return (f"inside autocast, xs in {dtype} (which the CPU kernel refuses, outside a region as in one): the "
                f"layers below autocast received {'; then '.join(received) or 'nothing'}{returned}. Autocast casts "
                "only eligible inputs, floating point, on the region's device, and not float64; any other reaches "
                "the kernel as it is (lesson 05, section 2: which tensors autocast casts).")
    return None


def _sum_squares_first_call_below(op, xs, scale, what: str, want: list, why: str) -> str | None:
    """op(xs, scale): None where the layers below autocast received `want` (dtypes, xs' then scale's), or nothing (the
    call refused above them); else what they received, and `why` that is wrong."""
    if isinstance(got := _sum_squares_below(op, xs, scale, what), str):
        return got
    if got[0] and got[0][0] != want:
        return (f"{what}: the layers below autocast received {_sum_squares_dtypes(got[0][0], len(xs))}: {why} "
                "(lesson 05, section 2: which tensors autocast casts)")
    return None


def _sum_squares_float64_beside_bfloat16(op) -> str | None:
    """xs in float64 and scale in bfloat16, in a region: autocast casts scale alone (float64 is not eligible), so the
    layers below get float64 xs and a float32 scale, and the CPU kernel refuses the two dtypes, as without autocast."""
    return _sum_squares_first_call_below(
        op, *_sum_squares_inputs([_F64, _F64], _BF16), "inside autocast, xs in float64 and scale in bfloat16",
        [_F64, _F64, _F32], "autocast casts each eligible input (floating point, not float64) to float32 and leaves "
        "float64 as it is, so the CPU kernel refuses the two dtypes, as it does without autocast")


def _sum_squares_long_xs(op) -> str | None:
    """Nine bfloat16 tensors in xs, and a bfloat16 scale, in a region: every tensor of xs is cast, however many there
    are (a cast of the first few, a buffer of fixed size, passes on calls of two or three)."""
    xs = [torch.full((4,), float(n + 1)).to(_BF16) for n in range(9)]
    with torch.autocast("cpu"):
        return _sum_squares_first_call_below(
            op, xs, torch.ones(4, dtype=_BF16), "inside autocast, xs of nine bfloat16 tensors and a bfloat16 scale",
            [_F32] * 10, "every eligible tensor of xs is cast, however many xs holds")


def _sum_squares_mixed_xs(op) -> str | None:
    """xs of two dtypes in a region (a bfloat16 tensor beside a float64 one, beside an int64 one), which the CPU kernel
    refuses: autocast casts each eligible tensor on its own, and leaves the others as they are, so the kernel refuses
    the two dtypes, as without autocast."""
    for other in (_F64, torch.int64):
        xs = [torch.tensor([1.0, 2.0]).to(_BF16), torch.tensor([3.0, 4.0]).to(other)]
        if isinstance(got := _sum_squares_below(op, xs, None, f"inside autocast, xs in bfloat16 and "
                                                f"{_dtype_names([other])}, which the CPU kernel refuses"), str):
            return got
        received, out = got
        if (received and received[0] != [_F32, other]) or out is not None:
            got = _sum_squares_dtypes(received[0], 2) if received else "nothing"
            returned = "" if out is None else f", and the call returned a result in {_dtype_names([out.dtype])}"
            return (f"inside autocast, xs in bfloat16 and {_dtype_names([other])} (two dtypes, which the CPU kernel "
                    f"refuses outside a region): the layers below autocast received {got}{returned}. Autocast decides "
                    "for each tensor on its own: an eligible one (floating point, not float64) is cast, any other "
                    "reaches the kernel as it is (lesson 05, section 2: which tensors autocast casts)")
    return None


class _OnAGpu(torch.Tensor):
    """A tensor whose device is cuda (or another accelerator's), on any machine: it dispatches as a GPU's tensor does
    (its keys are CUDA's, AutocastCUDA among them, and is_cuda() is true), casts to one like itself, and has no kernel
    for anything else."""

    @staticmethod
    def __new__(cls, size, dtype, device="cuda"):
        return torch.Tensor._make_wrapper_subclass(cls, size, dtype=dtype, device=device)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._to_copy.default:
            return cls(args[0].shape, (kwargs or {}).get("dtype", args[0].dtype), args[0].device)
        raise NotImplementedError(f"{func}: no kernel here for a GPU's tensor (a stand-in for one)")


def _sum_squares_scale_on_another_device(op) -> str | None:
    """In a CPU region, CPU xs and a scale on another device (meta here; a GPU's alike): only tensors on the region's
    device are eligible, so the scale goes down as it is (and the call is refused below, two devices). Then xs on
    another device and a CPU scale, meta ones and a GPU's (_OnAGpu): the call goes below autocast, the xs as they are,
    the scale cast; the key the kernel excludes is the region's, AutocastCPU, whatever device xs are on."""
    rule = ("only a tensor on the region's device is eligible, whichever device xs[0] is on: xs on another device (a "
            "GPU's, beside a CPU scale) go down as they are, and the CPU scale is cast")
    with torch.autocast("cpu"):
        if wrong := _sum_squares_first_call_below(
                op, [torch.ones(4, dtype=_BF16), torch.ones(4, dtype=_BF16)], torch.ones(4, dtype=_BF16, device="meta"),
                "inside autocast on the CPU, bfloat16 xs on the CPU and a bfloat16 scale on the meta device",
                [_F32, _F32, _BF16], "only a tensor on the region's device is eligible, so a scale on another device "
                "(a GPU's, inside a CPU region) goes down as it is"):
            return wrong
        for where, make in (("on the meta device", lambda: torch.ones(4, dtype=_BF16, device="meta")),
                            ("of a GPU (a stand-in tensor whose device is cuda, no GPU needed)",
                             lambda: _OnAGpu((4,), _BF16)),
                            ("of an Intel GPU (a stand-in tensor whose device is xpu: neither CPU nor CUDA)",
                             lambda: _OnAGpu((4,), _BF16, "xpu")),
                            # and every other device with an Autocast key of its own: a rule that lists the devices
                            # not to cast, not the one to cast, misses some
                            *((f"of another device (a stand-in tensor whose device is {device})",
                               lambda device=device: _OnAGpu((4,), _BF16, device))
                              for device in ("mps", "hpu", "privateuseone", "mtia", "maia", "xla", "ipu"))):
            what = f"inside autocast on the CPU, bfloat16 xs {where} and a bfloat16 scale on the CPU"
            now_doing(f"calling sum_squares on xs {where} and a CPU scale (a crash here alone: the call came back to "
                      "your kernel, forever? The key it excludes is the region's)")
            with _recording_mode() as below:
                try:
                    op([make(), make()], torch.ones(4, dtype=_BF16))
                    raised = "nothing"
                except _StateLeft as left:
                    return f"{what}: {left}"
                except Exception as error:  # noqa: BLE001 - what the reader's kernel raised, said
                    raised = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
            received = [dtypes for name, dtypes in below.calls if name == _SUM_SQUARES]
            if not received:
                return (f"{what}: the call never reached the layers below autocast (it raised {raised}): your kernel "
                        "refused it, where autocast casts what is eligible, the CPU scale, and hands the call on, "
                        "the xs as they are, for the layers below to take or refuse (lesson 05, section 2: which "
                        "tensors autocast casts)")
            if received[0] != [_BF16, _BF16, _F32]:
                return (f"{what}: the layers below autocast received {_sum_squares_dtypes(received[0], 2)}: {rule} "
                        "(lesson 05, section 2: which tensors autocast casts)")
    return None


def _sum_squares_empty_batch(op) -> str | None:
    """An empty batch in a region (bfloat16 xs of no elements, the last batch of a data loader that drops none): an
    empty tensor is as eligible as any other (torch's is_eligible asks dtype and device, never the size), so the result
    is float32, as for a full batch; a result whose dtype follows the batch's size breaks whatever comes next."""
    what = "inside autocast, an empty batch (xs: two bfloat16 tensors of shape [0, 4])"
    with torch.autocast("cpu"):
        got = _sum_squares_below(op, [torch.empty(0, 4, dtype=_BF16), torch.empty(0, 4, dtype=_BF16)], None, what)
    if isinstance(got, str):
        return got
    received, out = [_sum_squares_dtypes(d, 2) for d in got[0]], got[1]
    if out is None or out.dtype != _F32 or received != [_sum_squares_dtypes([_F32, _F32], 2)]:
        result = "the call was refused" if out is None else f"the result is {_dtype_names([out.dtype])}"
        return (f"{what}: the layers below autocast received {'; then '.join(received) or 'nothing'}, and {result}, "
                "where a full batch's is float32: autocast casts a tensor by its dtype "
                "and device, whatever its size, so the dtype of a result never depends on how many rows a batch has "
                "(lesson 05, section 2: which tensors autocast casts)")
    return None


def _sum_squares_cast_cache_kept(op) -> str | None:
    """autocast's cast cache as the caller has it: off in a region opened with cache_enabled=False, and in a region
    with it on, the casts torch's own operators cached before the call (a weight's, cast once per region) still
    cached after it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    xs = [torch.ones(3, dtype=_BF16)]
    try:  # op compares autocast's settings before and after the call (_watching_dispatch_state)
        with torch.autocast("cpu", cache_enabled=False):
            op(xs, None)
    except _StateLeft as left:
        return f"in a region opened with torch.autocast(\"cpu\", cache_enabled=False): {left}"
    weight, rows, casts = torch.ones(4, 4, requires_grad=True), torch.ones(2, 4), []

    class CastsOfTheWeight(TorchDispatchMode):  # counts the casts of `weight` autocast makes
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten._to_copy.default and args and args[0] is weight:
                casts.append(func)
            return func(*args, **(kwargs or {}))

    with torch.autocast("cpu"), CastsOfTheWeight():
        torch.mm(rows, weight)  # a leaf that requires grad: its cast is cached for the region
        op(xs, None)
        torch.mm(rows, weight)
    if len(casts) != 1:
        return ("in a region, torch.mm(rows, weight), weight a leaf that requires grad (whose cast autocast caches "
                "for the region), then sum_squares, then torch.mm(rows, weight) again: the weight was cast "
                f"{len(casts)} times, where autocast casts it once per region: the call emptied the region's cast "
                "cache, which is the region's, not one call's (lesson 05, section 5)")
    return None

@exercise("05.autocast_guard", "hard", on_crash=_autocast_guard_crash)
def autocast_guard(path: Path) -> Result:
    library_file = load_cpp("exercise05_sum_squares", path, label="your 05_autocast_guard.cpp")
    if not hasattr(torch.ops.exercise05, "sum_squares"):
        return Result(False, "your file defines no exercise05::sum_squares, the operator the task gives you. A copy of "
                             "an earlier version of this exercise? start() keeps a copy it finds: delete yours from "
                             "my_exercises/ and start again.")
    _SUM_SQUARES_MORE_CALLS.clear()
    library = torch.library.Library("exercise05", "FRAGMENT")
    torch.library.register_autograd("exercise05::sum_squares", _sum_squares_backward,
                                    setup_context=_sum_squares_setup, lib=library)
    op = _watching_dispatch_state(torch.ops.exercise05.sum_squares.default,
                                  "lesson 05, section 4: the guard, and how long what it changes lasts.")
    # The process's first call under torch.inference_mode() (a warm-up, a validation pass before training): the thread's
    # state that call had is that call's, not the next one's. Its result, or error, is not checked here.
    now_doing("making its first call, sum_squares([bfloat16 ones]), in inference mode and autocast")
    try:
        with torch.inference_mode(), torch.autocast("cpu"):
            op([torch.ones(3, dtype=_BF16)], None)
    except _StateLeft as left:
        return Result(False, f"the check's first call, inside torch.inference_mode() and autocast (a warm-up): {left}")
    except RuntimeError:
        pass
    checks_of_gradients = []  # run after the region (lesson 05, section 6)
    with torch.autocast("cpu"):
        for call in _SUM_SQUARES_IN_REGION:
            _SUM_SQUARES_AUTOCAST_EXCLUDED.clear()
            checks_of_gradients.append(_sum_squares_call(op, *call))
            if isinstance(checks_of_gradients[-1], str):
                return Result(False, checks_of_gradients[-1])
            if not all(_SUM_SQUARES_AUTOCAST_EXCLUDED):
                return Result(False, f"{call[0]}: the layers below autocast ran with AutocastCPU not excluded on the "
                                     "thread: a torch operation they make (autograd's, or a CPU kernel built of torch "
                                     "operations) is autocast again, to the region's dtype. A redispatch skips "
                                     "AutocastCPU for this one call only (lesson 05, section 4: why the guard)")
        try:  # a call the CPU kernel refuses: the error passes through the reader's kernel
            op([torch.ones(4), torch.ones(3)], None)
        except _StateLeft as left:
            return Result(False, "inside autocast, a call the CPU kernel refuses (xs of shapes [4] and [3]), its "
                                 "error raised through your kernel: what is set by hand and unset by hand stays set "
                                 f"when an error skips the line that unsets it. {left}")
        except RuntimeError:
            pass
        if problem := (_sum_squares_float64_beside_bfloat16(op) or _sum_squares_integers(op)
                       or _sum_squares_mixed_xs(op)):
            return Result(False, problem)
        try:  # an empty xs, which the CPU kernel refuses too: an Autocast kernel still runs for it (scale's keys)
            now_doing("calling sum_squares([], scale): an empty xs, and a scale")
            op([], torch.ones(4))
        except _StateLeft as left:
            return Result(False, f"inside autocast, a call with an empty xs and a scale, which the CPU kernel refuses: "
                                 f"{left}")
        except RuntimeError:
            pass
    with torch.autocast("cpu", dtype=torch.float16):  # a region of another dtype: what the call found, it leaves
        if isinstance(problem := _sum_squares_call(op, "inside torch.autocast(\"cpu\", dtype=torch.float16), xs in "
                                                   "float16 and bfloat16", [_F16, _BF16], None, _F32), str):
            return Result(False, problem)
    checks_of_gradients.append(_sum_squares_call(op, *_SUM_SQUARES_AFTER_REGION))
    if isinstance(checks_of_gradients[-1], str):
        return Result(False, checks_of_gradients[-1])
    problem = next(filter(None, (gradients() for gradients in checks_of_gradients)), None)
    if problem:
        return Result(False, problem)
    # Regions on the same tensors, their values changed in between, as a training step changes its weights between two
    # steps' regions: a cast kept from an earlier region would be stale. (No backward: the change in place would refuse
    # it.)
    inputs = _sum_squares_inputs([_BF16, _F16], None)
    for change, where in (
            (None, "a first region, xs in bfloat16 and float16"),
            (lambda x: x.mul_(2), "a second region, the same xs, their values doubled in place (under no_grad) since "
                                  "the first"),
            (lambda x: x.data.mul_(2), "a third region, the same xs, their values doubled through .data "
                                       "(x.data.mul_(2), which leaves their version counters as they were) since "
                                       "the second")):
        with torch.no_grad():
            for x in inputs[0] if change else ():
                change(x)
        with torch.autocast("cpu"):
            if isinstance(problem := _sum_squares_call(op, where, [_BF16, _F16], None, _F32, inputs), str):
                return Result(False, problem)
    if problem := (_sum_squares_fresh_tensors(op) or _sum_squares_inputs_freed(op)
                   or _sum_squares_in_threads(op) or _sum_squares_empty_batch(op)
                   or _sum_squares_scale_on_another_device(op) or _sum_squares_cast_cache_kept(op)
                   or _sum_squares_long_xs(op)):
        return Result(False, problem)
    # An empty xs and a bfloat16 scale (the CPU kernel refuses an empty xs; a kernel below that takes one runs in the
    # dtype it receives): the scale is cast whatever xs holds. Last: what an answer does with an empty xs otherwise is
    # told above.
    with torch.autocast("cpu"), _recording_mode() as below:
        try:
            op([], torch.ones(4, dtype=_BF16))
        except (RuntimeError, _StateLeft):
            pass
    received = [dtypes for name, dtypes in below.calls if name == _SUM_SQUARES]
    if received and received[0] != [_F32]:
        return Result(False, "inside autocast, sum_squares([], scale), an empty xs and a scale in bfloat16: the layers "
                             f"below autocast received scale in {_dtype_names(received[0])}: the task casts scale "
                             "whenever there is one, whatever xs holds (a kernel below autocast that takes an empty xs "
                             "runs in the dtype it receives; lesson 05, section 2: what cached_cast casts)")
    if _SUM_SQUARES_MORE_CALLS:
        return Result(False, _SUM_SQUARES_MORE_CALLS[0])
    # Last: a kernel of the reader's at another device's Autocast key, which the task does not ask for (lesson 05's
    # registrations for two devices invite one), runs in that device's regions on its tensors.
    if others := [name for name in torch._C.DispatchKey.__members__ if name.startswith("Autocast")
                  and name != "AutocastCPU"
                  and torch._C._dispatch_has_kernel_for_dispatch_key("exercise05::sum_squares", name)]:
        device_type = others[0].removeprefix("Autocast").lower()
        return Result(False, f"sum_squares' dispatch table has a kernel of yours at {others[0]} too: it runs in "
                             f"every {device_type} autocast region, on that device's tensors, where a guard that "
                             "excludes AutocastCPU leaves the call's own key in, so the kernel calls itself until the "
                             "stack overflows, and a cast for the CPU casts none of them. The task's kernel is "
                             "AutocastCPU's, and nothing else (lesson 05, section 2).")
    # And the caller's other regions stay on below the kernel: an XPU region inside the CPU one (torch.autocast("xpu")
    # turns it on with no XPU here), which a guard excluding every Autocast key (c10's autocast_dispatch_keyset)
    # turns off for every layer below, as the autograd kernel's setup sees.
    _SUM_SQUARES_XPU_EXCLUDED.clear()
    with torch.autocast("cpu"), torch.autocast("xpu", dtype=torch.bfloat16):
        torch.ops.exercise05.sum_squares([torch.ones(3, dtype=torch.bfloat16, requires_grad=True)])
    if any(_SUM_SQUARES_XPU_EXCLUDED):
        return Result(False, "inside torch.autocast(\"cpu\") and torch.autocast(\"xpu\") at once, the layers below "
                             "your kernel ran with AutocastXPU excluded, where the caller had it on: your guard "
                             "excludes other devices' Autocast keys too (all of them at once?), so every call the "
                             "layers below make leaves the caller's XPU (or CUDA) region. A kernel excludes its own "
                             "key, AutocastCPU, and nothing else (lesson 05, section 2).")
    if wrong := (_sum_squares_under_functionalize(op)
                 or _sum_squares_first_call_of_a_process_elsewhere(library_file)):
        return Result(False, wrong)
    return Result(True, (
        "float32 below autocast for every eligible input, xs and scale, float8 too, in one region and again in a "
        "second one; float64 and int64 as they were; bfloat16 after the region; with gradients, and the thread's "
        "dispatch state as it was; on values changed in place and through .data; new tensors in freed memory, the "
        "tensors freed after their calls, and four threads at once"))


def _sum_squares_under_functionalize(op) -> str | None:
    """In a region, under torch.func.functionalize (what torch.compile's AOTAutograd runs): the call below autocast
    goes through the Functionalize key, which a guard must leave on, as every key but its own."""
    xs = [torch.tensor([1.0, 2.0, 3.0]).to(_BF16), torch.tensor([4.0, 5.0, 6.0]).to(_BF16)]
    what = "inside autocast, under torch.func.functionalize (what torch.compile's AOTAutograd runs), bfloat16 xs"
    try:
        with torch.autocast("cpu"):
            out = torch.func.functionalize(lambda tensors: op(tensors, None))(xs)
    except Exception as error:  # noqa: BLE001 - the reader's kernel may raise anything: said with its call
        return (f"{what}: the call raised {type(error).__name__}: {str(error).strip().splitlines()[0][:200]}: your "
                "guard excludes more than AutocastCPU (Functionalize?), so the call below autocast skips "
                "functionalization, which hands the layers below its own tensors. A kernel excludes its own key, and "
                "nothing else (lesson 05, section 2)")
    if out.dtype != _F32 or not torch.allclose(out, _sum_squares_expected(xs)):
        return f"{what}: the result is {out.tolist()} in {out.dtype}, not the float32 sum of squares"
    return None


def _sum_squares_first_call_of_a_process_elsewhere(library_file: Path) -> str | None:
    """In a process of its own whose first call of sum_squares, in a region, has xs on the meta device (a GPU's alike)
    beside a CPU scale: a later call on CPU bfloat16 xs is cast as ever. What the kernel decides, it decides per call,
    not once for the process (a static variable set at the first call)."""
    from helpers import isolated

    done = isolated.run(f"""
        import torch
        torch.ops.load_library({str(library_file)!r})
        op = torch.ops.exercise05.sum_squares
        with torch.autocast("cpu"):
            try:
                op([torch.ones(4, dtype=torch.bfloat16, device="meta")] * 2, torch.ones(4, dtype=torch.bfloat16))
            except Exception:  # two devices below autocast: refused there
                pass
            print(op([torch.ones(4, dtype=torch.bfloat16)] * 2, None).dtype)
    """)
    if done.returncode != 0 or done.stdout.strip() == "torch.float32":
        return None  # a crash there is the crash the cases above report
    return ("in a process of its own whose first call of sum_squares, in a region, had xs on the meta device beside "
            f"a CPU scale (as a GPU's xs would be), a later call on CPU bfloat16 xs returned {done.stdout.strip()}, not "
            "float32: something your kernel decided at its first call stayed for the process (a static variable: "
            "the device?). Which tensors are eligible is decided at each call, for that call's tensors (lesson 05, "
            "section 2)")


def _sum_squares_expected(xs) -> torch.Tensor:
    return sum(x.detach().float() * x.detach().float() for x in xs)


def _sum_squares_fresh_tensors(op) -> str | None:
    """Calls in a region on new bfloat16 tensors that take the memory of freed ones (a data loader's batches): each
    call must cast the tensors it is given."""
    generator = torch.Generator().manual_seed(0)
    for step in range(20):
        xs = [torch.randn(1000, generator=generator).bfloat16() for _ in range(3)]  # a new batch each step
        with torch.autocast("cpu"):
            out = op(xs, None)
        if not torch.allclose(out.float(), expected := _sum_squares_expected(xs)):
            worst = (out.float() - expected).abs().argmax()
            return (f"in a region, a new batch of bfloat16 tensors at step {step + 1} of 20, made where earlier ones "
                    f"were freed: {out[worst].item():g} where the sum of squares is {expected[worst].item():g}: a cast "
                    "kept from another tensor (a cache keyed on a TensorImpl*, a data pointer or a version is one) was "
                    "used for this one. Each call casts its own inputs (lesson 05, section 5: which casts torch keeps)")
        del xs, out
    return None


def _sum_squares_inputs_freed(op) -> str | None:
    """Tensors made, used in a region and dropped, twenty times (a data loader's batches): none may stay alive through
    something the Autocast kernel kept."""
    def a_batch():
        xs = [torch.randn(100).bfloat16(), torch.randn(100).half()]
        with torch.autocast("cpu"):
            op(xs, None)
        return xs

    def a_refused_batch():  # float32 xs of two lengths: autocast hands them on as they are, and the CPU kernel refuses
        xs = [torch.randn(100), torch.randn(99)]
        with torch.autocast("cpu"):
            try:
                op(xs, None)
            except RuntimeError:
                pass
        return xs

    if kept := _kept_alive(20, a_batch):
        return (f"{kept} of 40 tensors, each given to one call in a region and then dropped, are still alive: "
                "something your kernel kept (a cache of casts?) holds them, and their memory, for the life of the "
                "thread or process. torch's own cache of casts lives for one region (lesson 05, section 5)")
    if kept := _kept_alive(1, a_refused_batch):
        return (f"{kept} of 2 float32 tensors given to a call in a region that the CPU kernel refused (xs of lengths "
                "100 and 99), then dropped, are still alive: something your kernel keeps between calls (a buffer "
                "reused across calls?) holds them, and their memory, when an error skips the line that would let go "
                "of them: until the thread's next call, or forever in a thread that makes none")
    return None


def _sum_squares_in_threads(op) -> str | None:
    """Four threads, each in a region of its own (autocast is per thread), calling at once, as a server does."""
    def calls(value):  # long lists, and many calls: the more time two threads spend in the kernel at once
        xs = [torch.full((256,), value, dtype=(_BF16, _F16)[i % 2]) for i in range(8)]
        expected = _sum_squares_expected(xs)
        with torch.autocast("cpu"), torch.no_grad():
            for _ in range(2000):
                if not torch.allclose(out := op(xs, None).float(), expected):
                    return f"{out[0].item():g} where the sum of squares is {expected[0].item():g}"
        return None

    now_doing("calling sum_squares from four threads at once (a crash here alone: something every call shares, a "
              "static variable?)")
    if wrong := _first_wrong_in_threads(calls, (1.0, 2.0, 3.0, 4.0)):
        return (f"four threads, each in its own region, calling at once: {wrong}: something in your kernel is "
                "shared between calls (a static variable?), and two threads' calls overwrite it. Each call casts its "
                "own inputs (lesson 05, section 2)")
    return None


# ---------------------------------------------------------------------------------------------
# 06: composition


def _raised(error: Exception, path: Path) -> str:
    """'ValueError (line 12 of your file): its message', for an error the reader's code raised inside a check."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == str(path)]
    where = f" (line {frames[-1].lineno} of your file)" if frames else ""
    return f"{type(error).__name__}{where}: {str(error).splitlines()[0][:200] if str(error) else ''}"


TORCH_DIR = Path(torch.__file__).resolve().parent


def _symbolic_fakes(*tensors, shape_env=None) -> tuple:
    """Fakes of `tensors` whose every size is a symbol, in a FakeTensorMode of `shape_env` (a fresh ShapeEnv unless
    given): (the mode, its ShapeEnv, the fakes)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    shape_env = ShapeEnv() if shape_env is None else shape_env
    mode = FakeTensorMode(shape_env=shape_env)
    return mode, shape_env, [mode.from_tensor(tensor, symbolic_context=StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC] * tensor.dim())) for tensor in tensors]


def _specialized_sizes(op, cases: list, path: Path, lesson: str) -> Result | None:
    """None when the fake kernel of `op`, a binary operator, keeps symbolic sizes symbolic, as
    torch.compile(dynamic=True) and torch.export with a Dim need; else what it did. `cases` are (what, a, b's dtype or
    None for a's): each case's inputs get sizes of their own in a fresh ShapeEnv, every size >= 2 (0 and 1 are
    specialized by torch itself); b is made from a on fake tensors, so that both share their symbols."""
    for what, a, b_dtype in cases:
        mode, shape_env, (fake_a,) = _symbolic_fakes(a)
        symbols = [size.node.expr for size in fake_a.shape]  # read now: a specialized size prints as its number
        shown = f"[{', '.join(map(str, symbols))}]"
        with mode:
            fake_b = fake_a.clone() if b_dtype is None else fake_a.to(b_dtype)
            try:
                op(fake_a, fake_b)
            except Exception as error:  # noqa: BLE001 - the reader's fake may raise anything; that is the diagnosis
                return Result(False, f"for {what} of symbolic shape {shown} (torch.compile(dynamic=True) and "
                                     f"torch.export with a Dim pass such sizes): your fake kernel raised "
                                     f"{_raised(error, path)}\nLook again at {lesson}.")
        if turned := _sizes_fixed(shape_env, symbols, path):
            return Result(False, f"for {what} of symbolic shape {shown} (as torch.compile(dynamic=True) and "
                                 f"torch.export with a Dim pass them), your fake kernel turned {turned}: the "
                                 "traced code then holds for this size only, torch.compile compiles again for every "
                                 f"other size, and export with a Dim refuses it ({lesson})")
    return None


def _sizes_fixed(shape_env, symbols: list, path: Path) -> str | None:
    """'s0 into 3 (at line 12 of your file)' where tracing turned symbolic sizes into numbers, else None."""
    fixed = {symbol: shape_env.replace(symbol) for symbol in symbols}
    fixed = {symbol: value for symbol, value in fixed.items() if value.is_number}
    if not fixed:
        return None
    made = ", ".join(f"{symbol} into {value}" for symbol, value in fixed.items())
    # Where it happened: the line of the reader's file, or the torch function that did it for them.
    frame = getattr(shape_env.replacements_slocs.get(next(iter(fixed))), "framework_loc", None)
    file = Path(frame.filename).resolve() if isinstance(frame, traceback.FrameSummary) else None
    if file == path.resolve():
        return f"{made} (at line {frame.lineno} of your file)"
    if file and file.is_relative_to(TORCH_DIR):
        return f"{made} (inside a torch function it calls: {frame.name}, torch/{file.relative_to(TORCH_DIR)}, line " \
               f"{frame.lineno})"
    return made


def _sizes_compared(op, path: Path, lesson: str) -> Result | None:
    """A binary operator whose inputs must be of one shape (stack2, workbook_stable::add) on fake tensors whose sizes
    are symbols of their own, a's and b's (torch.export with a Dim for each): the fake kernel must compare them as the
    real kernel does, so that a guard (or a refusal) says they are equal; a comparison made only where sizes are plain
    numbers, or only where they are known to differ, lets through a call the real kernel refuses."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    # A symbol for each size, even where two sizes start equal.
    mode, shape_env, (a, b) = _symbolic_fakes(torch.randn(3, 4), torch.randn(3, 4),
                                              shape_env=ShapeEnv(duck_shape=False))
    shown = f"a of shape [{', '.join(str(size) for size in a.shape)}] and b of [{', '.join(str(s) for s in b.shape)}]"
    try:
        with mode:
            op(a, b)
    except Exception:  # noqa: BLE001 - refused: the sizes could differ
        return None
    apart = [i for i in range(2) if shape_env.replace(a.shape[i].node.expr) != shape_env.replace(b.shape[i].node.expr)]
    if apart:
        return Result(False, f"for {shown}, sizes of their own (torch.export with a Dim for each input), your fake "
                             f"kernel returned a tensor and left dimension {apart[0]}'s sizes free to differ: it "
                             "compared no symbolic size (a comparison made only where sizes are plain numbers?). The "
                             "traced program then takes inputs the real kernel refuses, and fails inside it. "
                             f"torch._check compares symbolic sizes too ({lesson})")
    return None


def _runtime_asserts(mode) -> int:
    """How many conditions on sizes a fake mode's ShapeEnv has put off to run time (torch._check on what a trace
    cannot decide): a count that grows when a fake kernel records one."""
    return sum(len(checks) for checks in mode.shape_env.deferred_runtime_asserts.values())


def _stack_unbacked(op, path: Path) -> Result | None:
    """stack2 on fake tensors whose first size is unknown while tracing (the count of x[x > 0], as torch.export meets
    after .item() or nonzero()), contiguous and channels_last: a fake kernel that decides on a size's value (== 0,
    > 1) cannot be traced there; one that computes with sizes, and decides on strides' order, can."""
    from helpers import shapes

    mode, (count, other) = shapes.unbacked(2)  # two counts: x[x > 0] and y[y > 0], say
    layout_names = {torch.contiguous_format: "contiguous", torch.channels_last: "channels_last",
                    torch.channels_last_3d: "channels_last_3d"}
    with mode:
        # An unknown first size, the same or two; then an unknown inner size (a feature map cropped to x[:, :, :k],
        # k an .item()), where a channels_last layout's strides depend on it.
        for layout, a_shape, b_shape, sizes in (
                (torch.contiguous_format, (count, 3, 4, 5), (count, 3, 4, 5), "the same unknown first size"),
                (torch.channels_last, (count, 3, 4, 5), (count, 3, 4, 5), "the same unknown first size"),
                (torch.contiguous_format, (count, 3, 4, 5), (other, 3, 4, 5), "two unknown first sizes"),
                (torch.channels_last, (2, 3, count, 5), (2, 3, count, 5), "the same unknown height"),
                (torch.channels_last_3d, (2, 3, count, 4, 5), (2, 3, count, 4, 5), "the same unknown depth")):
            a = torch.empty(a_shape, memory_format=layout)
            b = torch.empty(b_shape, memory_format=layout)
            try:
                op(a, b)
            except Exception as error:  # noqa: BLE001 - the reader's fake may raise anything; that is the diagnosis
                return Result(False, f"for two {layout_names[layout]} "
                                     f"tensors of {sizes} (unknown while tracing: the count of x[x > 0], as "
                                     f"torch.export meets after .item()), your fake kernel raised "
                                     f"{_raised(error, path)}\nA fake kernel that decides on a size's value (== 0, "
                                     "> 1, equal to another size) cannot be traced where no value exists: compute "
                                     "with the sizes, compare them one by one with torch._check (which records for "
                                     "run time what it cannot decide), and decide the layout from what the trace "
                                     "knows (lesson 06, sections 3 and 5)")
    return None


def _stack_unbacked_layout(op) -> Result | None:
    """The layout of stack2's fake output where a size of a channels_last input is unknown while tracing: the real
    kernel's at the sizes a program runs with. At 5 it is channels_last (at 0 and 1 some strides differ, of
    dimensions whose size makes them not matter): a compiled program checks a custom operator's output against the
    fake's strides (Inductor's assert_size_stride), and fails where they differ."""
    from helpers import shapes

    mode, (count,) = shapes.unbacked(1)
    for layout, shape, what in ((torch.channels_last, (count, 3, 4, 5), "first size"),
                                (torch.channels_last, (2, 3, count, 5), "height"),
                                (torch.channels_last_3d, (2, 3, count, 4, 5), "depth")):
        with mode:
            fake = op(torch.empty(shape, memory_format=layout), torch.empty(shape, memory_format=layout))
        at_five = [size if isinstance(size, int) else 5 for size in shape]
        real = torch.stack([torch.empty(at_five, memory_format=layout)] * 2)
        strides = [stride if isinstance(stride, int) else int(stride.node.expr.xreplace({count.node.expr: 5}))
                   for stride in fake.stride()]
        if strides != list(real.stride()):
            name = "channels_last" if layout == torch.channels_last else "channels_last_3d"
            return Result(False, f"for two {name} tensors of shape {[str(size) for size in shape]} (the same unknown "
                                 f"{what}: the count of x[x > 0], as torch.export meets after .item()), your fake "
                                 f"kernel returned strides {[str(stride) for stride in fake.stride()]}: at {count} = "
                                 f"5, {strides}, where the real kernel's are {list(real.stride())}. A compiled program "
                                 "that runs with that count checks the output of a custom operator against the fake's "
                                 "strides (Inductor's assert_size_stride), and fails. Where a size is unknown, the "
                                 "layout is the real kernel's at the sizes a program runs with: those where a layout "
                                 "matters are above 1 (lesson 06, sections 3 and 5)")
    return None


def _stack_unbacked_beside_known(op) -> Result | None:
    """stack2 of a tensor of an unknown first size (the count of x[x > 0]) beside one of first size 3: where it cannot
    refuse while tracing, a fake kernel records, for the traced program, that the sizes must agree."""
    from helpers import shapes

    mode, (count,) = shapes.unbacked()
    with mode:
        asserts = _runtime_asserts(mode)
        try:
            op(torch.empty(count, 3, 4, 5), torch.empty(3, 3, 4, 5))
        except Exception:  # noqa: BLE001 - refused while tracing, as the real kernel refuses when the sizes differ
            return None
        if _runtime_asserts(mode) == asserts and not mode.shape_env.replace(count.node.expr).is_number:
            return Result(False, "for a contiguous tensor of an unknown first size (the count of x[x > 0]) beside one "
                                 "of first size 3, your fake kernel returned a tensor and recorded nothing that makes "
                                 "the two sizes agree: the traced program makes the call whatever the count, where the "
                                 "real kernel refuses two sizes. Where it cannot refuse while tracing, a fake kernel "
                                 "records what must hold when the program runs (lesson 06, section 5)")
    return None


def _checks_with_asserts(path: Path, as_what: str) -> Result | None:
    """A fake kernel's refusals as statements, not words: an assert, or code under __debug__ (`if __debug__:`), which
    python -O drops alike."""
    if any(isinstance(node, ast.Assert) or isinstance(node, ast.Name) and node.id == "__debug__"
           for node in ast.walk(ast.parse(path.read_bytes()))):
        return Result(False, "your file checks with assert statements, or under __debug__: `python -O` removes both, "
                             "and a fake kernel that refuses only with assertions on then traces the calls eager "
                             f"refuses. Refuse with an error that always runs (torch._check, or raise), as {as_what}")
    return None


def _accepted_under_python_o(path: Path, refused: list[tuple[str, str]], as_what: str) -> Result | None:
    """The answer's fake(a, b), in a new `python -O` process, on meta tensors it must refuse (what, the code that makes
    a and b): python -O drops assert statements and code under __debug__, and code that asks sys.flags.optimize (or
    anything else) whether it runs so may skip itself; only running it so shows every spelling."""
    import subprocess

    driver = f"""
import importlib.util, torch
spec = importlib.util.spec_from_file_location("answer", {str(path)!r})
answer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(answer)
for what, make in {refused!r}:
    a, b = eval(make)
    try:
        answer.fake(a, b)
    except Exception:
        continue
    print(what)
    break
"""
    done = subprocess.run([sys.executable, "-O", "-c", driver], capture_output=True, text=True, timeout=300,
                          cwd=path.parent)
    if done.returncode != 0 or not (accepted := done.stdout.strip()):
        return None  # refused every one; a file that fails to load under -O fails elsewhere first
    return Result(False, f"under `python -O`, your fake kernel accepted {accepted}, which it refuses otherwise: "
                         "python -O removes assert statements and code under __debug__, and code that asks whether "
                         "Python runs optimized may skip itself. A fake kernel that refuses only when not optimized "
                         "traces calls eager refuses. Refuse with an error that always runs (torch._check, or raise), "
                         f"as {as_what}")


def _fake_refused_otherwise(what: str, error: Exception) -> str:
    said = f" ({str(error).strip().splitlines()[0][:120]})" if str(error).strip() else ""
    return (f"{what}, which the real kernel, torch.stack, refuses with a RuntimeError: your fake kernel raised "
            f"{type(error).__name__}{said}, so a caller that catches what the operator raises (except RuntimeError) "
            "catches the eager refusal and not the traced one. A fake kernel refuses what the real one refuses, as it "
            "refuses it (lesson 06, sections 1 and 3)")


@exercise("06.fake_kernel", "hard")
def fake_kernel(path: Path) -> Result:
    if problem := _checks_with_asserts(path, "torch.stack's own checks do"):
        return problem

    def pair(a, b=None):
        return a, a.clone() if b is None else b  # clone keeps a dense layout (channels_last), and makes a view dense

    channels_last = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    cases = [pair(torch.randn(3, 4)), pair(torch.randn(4, 3, dtype=torch.float64).t()),
             pair(torch.arange(6, dtype=torch.int32)),
             pair(channels_last), pair(channels_last, torch.randn(2, 3, 4, 5)),
             pair(torch.randn(3, 4, 5).permute(1, 2, 0)), pair(torch.randn(4, 1).expand(4, 5)),
             pair(torch.arange(6, dtype=torch.int32), torch.randn(6)),
             pair(torch.randn(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d)),
             pair(torch.randn(3, 4, dtype=torch.float16), torch.randn(3, 4)),
             pair(torch.arange(6), torch.arange(6, dtype=torch.int32)), pair(torch.tensor(1.5)),
             # An integer beside a narrow float: the float's dtype, whatever the default dtype is.
             pair(torch.arange(6), torch.randn(6, dtype=torch.float16)),
             # Of the same size, neither wider: float16 and bfloat16 promote to float32, uint8 and int8 to int16.
             pair(torch.randn(3, 4, dtype=torch.float16), torch.randn(3, 4, dtype=torch.bfloat16)),
             pair(torch.arange(6, dtype=torch.uint8), torch.arange(6, dtype=torch.int8)),
             # A complex tensor beside a wider real one: complex64 with float64 is complex128.
             pair(torch.randn(3, 4, dtype=torch.complex64), torch.randn(3, 4, dtype=torch.float64)),
             # Sliced channels_last tensors: not dense, yet their strides' order is channels_last's.
             pair(channels_last[..., ::2], channels_last.clone()[..., ::2]),
             pair(channels_last[:, :2], channels_last.clone()[:, :2]),
             # Both sliced, and of two dtypes that promote to a third: a cast of each first makes dense copies.
             pair(channels_last.half()[..., ::2], channels_last.bfloat16()[..., ::2]),
             # One sliced channels_last tensor beside a contiguous one, in either order: the two layouts disagree.
             pair(channels_last[:, :2], torch.randn(2, 2, 4, 5)), pair(torch.randn(2, 2, 4, 5), channels_last[:, :2]),
             # Broadcast along the channels (a per-pixel mask, expanded): a stride of 0 there, which no channels_last
             # tensor has.
             pair(*[torch.randn(2, 1, 4, 5).expand(2, 3, 4, 5)] * 2),
             pair(*[torch.randn(2, 1, 3, 4, 5).expand(2, 3, 3, 4, 5)] * 2),
             # Two scalars of two dtypes (a float16 loss beside a float32 one): promoted, as any two inputs are.
             pair(torch.tensor(1.5, dtype=torch.float16), torch.tensor(2.0)),
             # Empty inputs (an empty batch): a stride is the product of the sizes after it, each counted as 1 at
             # least (torch's contiguous strides), never 0 for a size of 0.
             pair(torch.randn(0, 4)), pair(torch.randn(3, 0))]
    with operator("stack2(Tensor a, Tensor b) -> Tensor", lambda a, b: torch.stack([a, b])) as library:
        torch.library.register_fake("exercise::stack2", load_python(path).fake, lib=library)
        op = torch.ops.exercise.stack2.default
        for a, b in cases:
            inputs = (f"for two {a.dtype} tensors" if a.dtype == b.dtype else f"for a {a.dtype} and a {b.dtype} tensor"
                      ) + f" of shape {list(a.shape)}" + (" (0-d: two scalars)" if a.dim() == 0 else "")
            strides = (f"strides {list(a.stride())}" if b.stride() == a.stride() else
                       f"strides {list(a.stride())} and {list(b.stride())}")
            real = op(a, b)
            on_meta = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta") for t in (a, b)]
            try:
                fake_out = op(*on_meta)
            except Exception as error:  # noqa: BLE001 - the reader's fake may raise anything; that is the diagnosis
                return Result(False, f"{inputs}: your fake kernel raised {_raised(error, path)}\nThe real kernel "
                                     "takes these inputs: a fake kernel must work for every input the real one takes "
                                     "(lesson 06, sections 1 and 3)")
            # What differs, never the real kernel's values: those are the answer.
            differ = [what for what, ours, theirs in [("shape", fake_out.shape, real.shape),
                                                      ("dtype", fake_out.dtype, real.dtype),
                                                      ("device", fake_out.device.type, "meta")] if ours != theirs]
            if differ:
                where = " (a fake kernel's output lives where its inputs do)" if "device" in differ else ""
                return Result(False, f"{inputs}: your fake kernel gives shape {list(fake_out.shape)}, {fake_out.dtype} "
                                     f"on {fake_out.device}; the real kernel's output has another "
                                     f"{' and '.join(differ)}{where}.\nLook again at lesson 06, sections 1 and 3.")
            wrong = [i for i, (size, ours, theirs) in enumerate(zip(real.shape, fake_out.stride(), real.stride()))
                     if size > 1 and ours != theirs]
            if wrong:
                # torch's own meta kernel for stack disagrees with its CPU kernel for some inputs that are not
                # contiguous (sliced channels_last ones, of one dtype or two: CPU contiguous, meta the inputs' order
                # of strides): a fake kernel that calls torch.stack inherits it.
                own_meta = not a.is_contiguous() and torch.stack(on_meta).stride() == fake_out.stride()
                return Result(False, f"{inputs} ({strides}): your fake kernel's output has strides "
                                     f"{list(fake_out.stride())}, the real kernel's differ in dimension(s) "
                                     f"{', '.join(map(str, wrong))}: compiled code lays out memory by the fake's "
                                     "strides (lesson 06, sections 1 and 3)" + (
                                         ". These are the strides of torch.stack on meta tensors: for some inputs "
                                         "that are not contiguous (these among them), torch's own meta kernel for "
                                         "stack (and for cat, which stack calls) lays out its output otherwise than "
                                         "its CPU kernel does; a fake kernel follows the real kernel"
                                         if own_meta else ""))
        for a, b in [(torch.randn(3, 4), torch.randn(5, 4)), (torch.randn(2, 3), torch.randn(3, 2)),
                     (torch.randn(4), torch.randn(5)), (torch.randn(3), torch.randn(3, 4)),
                     (torch.randn(3, 4), torch.randn(3)),
                     (torch.randn(3, 1), torch.randn(3, 4)),  # shapes the real kernel refuses (the last broadcast)
                     # and a 0-dim tensor (a loss, x.sum()) beside one of a single element, or more
                     (torch.randn(()), torch.randn(1)), (torch.randn(1), torch.randn(())),
                     (torch.randn(()), torch.randn(2, 2))]:
            try:
                op(a.to("meta"), b.to("meta"))
            except Exception as error:  # noqa: BLE001 - refused: as the real kernel refuses, said below
                if not isinstance(error, RuntimeError):
                    return Result(False, _fake_refused_otherwise(f"for shapes {list(a.shape)} and {list(b.shape)}",
                                                                 error))
                continue
            return Result(False, f"for shapes {list(a.shape)} and {list(b.shape)}, which the real kernel refuses (it "
                                 "stacks tensors of one shape), your fake kernel returns a tensor: torch.export and "
                                 "torch.compile would trace a call that fails only when it runs. A fake kernel "
                                 "refuses what the real one refuses (lesson 06, sections 1 and 3)")
        from torch._subclasses.fake_tensor import FakeTensorMode

        # Two devices, which torch.stack refuses: a meta and a CPU tensor (the call reaches the fake kernel at Meta),
        # and fake tensors on two GPUs of one machine (no GPU needed: they are fake).
        def meta_and_cpu():
            return op(torch.randn(3, 4, device="meta"), torch.randn(3, 4))

        def two_gpus():
            with FakeTensorMode():
                return op(torch.empty(3, 4, device="cuda:0"), torch.empty(3, 4, device="cuda:1"))

        def zero_dim_beside_cpu(device: str, cpu_first: bool):
            """A 0-dim tensor on `device` (fake on cuda) and a 0-dim CPU one, in either order: fake tensors let a
            0-dim CPU tensor join another device's; torch.stack does not."""
            def call():
                with FakeTensorMode() if device == "cuda" else nullcontext():
                    other, cpu = torch.empty((), device=device), torch.empty(())
                    return op(cpu, other) if cpu_first else op(other, cpu)
            return call

        for what, call in (("a meta and a CPU tensor", meta_and_cpu), ("fake tensors on cuda:0 and cuda:1", two_gpus),
                           ("a 0-dim meta and a 0-dim CPU tensor", zero_dim_beside_cpu("meta", False)),
                           ("a 0-dim fake tensor on cuda and a 0-dim one on the CPU",
                            zero_dim_beside_cpu("cuda", False)),
                           ("a 0-dim CPU tensor and a 0-dim meta one", zero_dim_beside_cpu("meta", True)),
                           ("a 0-dim fake tensor on the CPU and a 0-dim one on cuda",
                            zero_dim_beside_cpu("cuda", True))):
            try:
                call()
            except Exception as error:  # noqa: BLE001 - refused: as the real kernel refuses, said below
                if not isinstance(error, RuntimeError):
                    return Result(False, _fake_refused_otherwise(f"for {what} of one shape (two devices)", error))
                continue
            return Result(False, f"for {what} of one shape (two devices, which the real kernel, torch.stack, refuses: "
                                 "a CPU tensor beside a CUDA one in a traced model, or two GPUs' tensors), your fake "
                                 "kernel returns a tensor: torch.export and torch.compile would trace a call that "
                                 "fails only when it runs. A fake kernel refuses what the real one refuses (lesson 06, "
                                 "sections 1 and 3)")
        with FakeTensorMode():  # two calls in one trace, on inputs of one shape: a tracer tells tensors by object
            first, second = (op(torch.empty(3, 4), torch.empty(3, 4)) for _ in range(2))
        if first is second or first.untyped_storage()._cdata == second.untyped_storage()._cdata:
            return Result(False, "two calls on fake tensors of one shape, in one fake mode (two calls in one traced "
                                 "function), returned the same tensor (or two views of one): a tracer tells tensors by "
                                 "object, so the second call's node stands for the first's too (stack2(a, b) - "
                                 "stack2(c, d) traces as x - x, all zeros). Each call's output is its own (something "
                                 "kept between calls?) (lesson 06, sections 1 and 3)")
        symbolic = [("two float32 tensors", torch.randn(3, 4), None),
                    ("two channels_last float32 tensors", channels_last, None),
                    ("a transposed float64 tensor and its copy", torch.randn(4, 3, dtype=torch.float64).t(), None),
                    ("an int32 and a float32 tensor", torch.arange(6, dtype=torch.int32), torch.float32)]
        if told := (_specialized_sizes(op, symbolic, path, "lesson 06, section 5") or _stack_unbacked(op, path)
                    or _sizes_compared(op, path, "lesson 06, section 5") or _stack_unbacked_beside_known(op)):
            return told
        for a, b in cases:  # last, as the slowest: torch's own tests of the operator, compiled ones included
            results = torch.library.opcheck(op, (a, b), raise_exception=False)
            if failed := [test for test, outcome in results.items() if outcome != "SUCCESS"]:
                inputs = (f"for two {a.dtype} tensors" if a.dtype == b.dtype else
                          f"for a {a.dtype} and a {b.dtype} tensor") + f" of shape {list(a.shape)}"
                return Result(False, f"{inputs} (strides {list(a.stride())}): opcheck's {', '.join(failed)} failed: "
                                     "the fake output must match the real one's shape, dtype, device and strides")
        if told := _accepted_under_python_o(path, [
                ("two tensors of shapes [3, 4] and [4, 3]",
                 "torch.ones(3, 4, device='meta'), torch.ones(4, 3, device='meta')"),
                ("a meta and a CPU tensor of shape [3, 4]", "torch.ones(3, 4, device='meta'), torch.ones(3, 4)")],
                "torch.stack's own checks do"):
            return told
        if told := _stack_unbacked_layout(op):
            return told
        return Result(True, "shape, dtype, device and strides match the real kernel's, for every input, and symbolic "
                            "sizes stay symbolic, an unknown one too")


def _vmap_rule_cases() -> list[tuple]:
    """06.vmap_rule's calls: (what, x, y, in_dims, x's B matrices, y's B matrices), each (B, n, m)."""
    xs, ys = torch.randn(4, 5, 6), torch.randn(4, 5, 6)
    single = torch.randn(5, 6)  # an input with no batch: the same matrix for every example
    stored = torch.randn(5, 4, 6)  # a batch in dimension 1 of a contiguous tensor: not outermost in memory
    exact = 1 + torch.rand(4, 5, 6, dtype=torch.float64) * 1e-6  # float32 keeps about 7 digits of these
    large = torch.randint(2**26, 2**26 + 1000, (4, 5, 6))  # products near 2**52: float64 keeps them, not their sums
    empty = torch.randn(0, 5, 6)
    return [
        ("x and y batched in dimension 0", xs, ys, (0, 0), xs, ys),
        ("x batched in dimension 2, y in dimension 1", xs.movedim(0, 2), ys.movedim(0, 1), (2, 1), xs, ys),
        ("x batched in dimension 1 of a contiguous tensor (the batch is not outermost in memory), y with no batch",
         stored, single, (1, None), stored.movedim(1, 0), single.expand(4, 5, 6)),
        ("x with no batch, y batched in dimension 0", single, ys, (None, 0), single.expand(4, 5, 6), ys),
        ("x and y batched in dimension 0, y's matrices transposed in memory", xs, ys.mT.contiguous().mT, (0, 0),
         xs, ys),
        ("an empty batch (B = 0) of y, x with no batch", single, empty, (None, 0), single.expand(0, 5, 6), empty),
        ("empty rows (m = 0), x and y batched in dimension 0", torch.randn(4, 5, 0), torch.randn(4, 5, 0), (0, 0),
         torch.randn(4, 5, 0), torch.randn(4, 5, 0)),
        ("matrices with no rows (n = 0), x and y batched in dimension 0", torch.randn(4, 0, 6), torch.randn(4, 0, 6),
         (0, 0), torch.randn(4, 0, 6), torch.randn(4, 0, 6)),
        ("float64 matrices, x batched in dimension 0, y with no batch", exact, exact[0], (0, None), exact,
         exact[0].expand(4, 5, 6)),
        ("int64 matrices with values near 2**26, x and y batched in dimension 0", large, large.flip(0), (0, 0), large,
         large.flip(0)),
        ("uint8 matrices (sums past 255: the kernel's are int64), x and y batched in dimension 0",
         small := torch.randint(10, 20, (4, 5, 6), dtype=torch.uint8), small.flip(0), (0, 0), small, small.flip(0)),
        ("complex64 matrices, x and y batched in dimension 0", wave := torch.randn(4, 5, 6, dtype=torch.complex64),
         wave.flip(0), (0, 0), wave, wave.flip(0)),
        ("float16 matrices, x and y batched in dimension 0", half := torch.randn(4, 5, 6, dtype=torch.float16),
         half.flip(0), (0, 0), half, half.flip(0)),
        ("bfloat16 matrices, x batched in dimension 0, y with no batch", brain := torch.randn(4, 5, 6).bfloat16(),
         brain[0], (0, None), brain, brain[0].expand(4, 5, 6)),
        ("a large batch (B = 1000 matrices of 10 rows: 10,000 rows in all), x and y batched in dimension 0",
         many := torch.randn(1000, 10, 4), many.flip(0), (0, 0), many, many.flip(0)),
    ]


def _vmap_rule_hint(raised: str, x, y, in_dims, xs, returned) -> str:
    """Where to look, for a rule that raised."""
    if returned and isinstance(returned[-1], tuple) and len(returned[-1]) == 2:
        out, out_dim = returned[-1]
        if isinstance(out, torch.Tensor) and not (isinstance(out_dim, int) and -out.dim() <= out_dim < out.dim()):
            return (f"Your rule returned a result of shape {list(out.shape)} with batch dimension {out_dim!r}, which "
                    "it does not have: the second value says which dimension of the result holds the batch (lesson 06, "
                    "section 6).")
    if "stride" in raised or "contiguous" in raised:
        return ("A rule gets its inputs with the caller's strides: their memory need not be laid out as the shape "
                "your rule views it as (lesson 06, section 6).")
    if "ambiguous" in raised:  # a -1 among the sizes, with 0 elements to share out
        return ("A size of -1 is worked out from the number of elements; with none (an empty batch, or empty rows) "
                "every size fits, so torch cannot tell which: each size must fit every batch, an empty one included "
                "(lesson 06, section 6).")
    if "reshape" in raised or "is invalid for input of size" in raised or "shape" in raised:
        batches = [f"{name} has shape {list(t.shape)}, "
                   + ("no batch" if dim is None else f"the batch in dimension {dim}")
                   for name, t, dim in (("x", x, in_dims[0]), ("y", y, in_dims[1]))]
        return (f"A size your rule reshapes with, or a shape it calls the kernel with, does not fit: here B, n, m = "
                f"{', '.join(map(str, xs.shape))}; {'; '.join(batches)}. The kernel takes two (n, m)-shaped tensors "
                "alike, and each size must fit every batch, an empty one (a size 0) included (lesson 06, section 6).")
    return ("A rule gets each input with its batch in the dimension in_dims gives (None: no batch, the same tensor for "
            "every example), calls the kernel on 2-D tensors, and returns the result with the dimension that holds "
            "the batch (lesson 06, section 6).")


def _vmap_rule_on_meta() -> str | None:
    """On meta tensors, a device other than the CPU (as a GPU's, or the fake tensors torch.compile traces with), one
    input batched and the other shared: whatever the rule makes is on the inputs' device."""
    for in_dims, batched, shared in (((0, None), "x", "y"), ((None, 0), "y", "x"), ((1, 0), "x", None)):
        x, y = (torch.empty(*((4, 5, 6) if dim == 0 else (5, 4, 6) if dim == 1 else (5, 6)), device="meta")
                for dim in in_dims)
        case = (f"on meta tensors (a device other than the CPU, as a GPU's, or the fake tensors torch.compile traces "
                f"with), {batched} batched" + (f" and {shared} shared by every example" if shared else " in dimension "
                                               "1 and y in dimension 0"))
        try:
            out = torch.vmap(torch.ops.exercise.rowdot, in_dims=in_dims)(x, y)
        except Exception as error:  # noqa: BLE001 - the reader's rule may raise anything; that is the diagnosis
            return (f"{case}: your rule raised {type(error).__name__}: {str(error).splitlines()[0][:200]}: a tensor "
                    "the rule makes is made on the inputs' device, in their dtype (lesson 06, section 6)")
        if (out.shape, out.device.type) != ((4, 5), "meta"):
            return f"{case}: the result has shape {list(out.shape)} on {out.device}, where [4, 5] on meta is wanted"
    return None


def _vmap_rule_gradients() -> str | None:
    """Both inputs requiring grad, one batched and the other not (per-example losses against a weight every example
    shares): the kernel's result keeps its graph to both, as the fallback loop's does (rowdot's Python kernel is made of
    torch operations, which record)."""
    for in_dims, batched, shared, size in (((0, None), "x", "y", 4), ((None, 0), "y", "x", 4),
                                           ((0, None), "x", "y", 0), ((None, 0), "y", "x", 0)):
        x = torch.randn(*((size, 5, 6) if in_dims[0] == 0 else (5, 6)), requires_grad=True)
        y = torch.randn(*((size, 5, 6) if in_dims[1] == 0 else (5, 6)), requires_grad=True)
        case = (f"with {batched} batched and {shared} not (a weight every example shares), both requiring grad "
                "(per-example losses)" + (", in an empty batch (B = 0: the last batch of a loader, say)" if not size
                                          else ""))
        fallback_mode = torch._C._get_autograd_fallback_mode()
        torch._C._set_autograd_fallback_mode("nothing")  # no warning for a kernel with no autograd formula
        try:
            out = torch.vmap(torch.ops.exercise.rowdot, in_dims=in_dims)(x, y)
        finally:
            torch._C._set_autograd_fallback_mode(fallback_mode)
        if not out.requires_grad:
            return (f"{case}: the result does not require grad, where the loop of calls vmap's fallback makes keeps "
                    "its graph: the rule ran the kernel where autograd does not record, so backward through the "
                    "vmapped call stops there (lesson 06, section 6)")
        grads = torch.autograd.grad(out.sum(), (x, y), allow_unused=True)
        wanted = ((y if in_dims[1] == 0 else y.expand(size, 5, 6)) if in_dims[0] == 0 else y.sum(0),
                  (x if in_dims[0] == 0 else x.expand(size, 5, 6)) if in_dims[1] == 0 else x.sum(0))
        for name, grad, want in zip("xy", grads, wanted):
            if grad is None:
                return (f"{case}: {name} gets no gradient from the result's sum: the rule cut {name} off the graph "
                        f"(detached, or made a copy where autograd does not record), so training never updates it "
                        "(lesson 06, section 6)")
            if not torch.allclose(grad, want, rtol=1e-5, atol=1e-5):
                return f"{case}: the gradient of the result's sum with respect to {name} is wrong"
    return None


def _vmap_fallback_warns(unbatched) -> bool:
    """Whether vmap over `unbatched`, an operator with no batching rule, warns of the fallback's cost, as functorch
    does unless torch._C._functorch._set_vmap_fallback_warning_enabled(False) switched it off (for the process; torch
    has no getter: the warning is the way to ask)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.vmap(unbatched)(torch.ones(2, 3))
    return any("performance drop" in str(warning.message) for warning in caught)


@exercise("06.vmap_rule", "hard")
def vmap_rule(path: Path) -> Result:
    calls, returned, altered = [], [], []

    def rowdot(x, y):
        torch._check(x.dim() == 2 and x.shape == y.shape and x.dtype == y.dtype,
                     lambda: f"exercise::rowdot: two 2-D tensors of the same shape and dtype, got shapes "
                             f"{list(x.shape)} and {list(y.shape)}, {x.dtype} and {y.dtype}")
        calls.append((x.shape[0], x.dtype))  # the rows, and their dtype
        return (x * y).sum(1)

    with operator("unbatched(Tensor x) -> Tensor", lambda x: x * 2):  # an operator with no rule: vmap's fallback
        fallback_warned, filters = _vmap_fallback_warns(torch.ops.exercise.unbatched.default), list(warnings.filters)
        module = load_python(path)
        import_silenced = fallback_warned and not _vmap_fallback_warns(torch.ops.exercise.unbatched.default)
        filtered_at_import = list(warnings.filters) != filters
    yours, set_by_a_call = module.rowdot_rule, []

    def rule(info, in_dims, x, y):  # the reader's rule, and what it returned: vmap may raise on it after it returns
        plain = not any(torch._C._functorch.is_batchedtensor(t) for t in (x, y))  # inside vmap(vmap(...)): batched
        given = [(t.shape, t.stride(), None if t.is_meta or not plain else t.clone()) for t in (x, y)]  # meta: no data
        variables = {name: id(value) for name, value in vars(module).items()}
        try:
            out = yours(info, in_dims, x, y)
        finally:
            # Set anew by a call, not set once (a cache of an operator, filled at the first call, is the same after)
            if not set_by_a_call and (names := [name for name, value in vars(module).items()
                                                if name in variables and variables[name] != id(value)]):
                set_by_a_call.append(names)
        returned.append(out)
        for name, t, (shape, stride, values) in zip("xy", (x, y), given):
            if (t.shape, t.stride()) != (shape, stride):
                how = f"shape {list(shape)} before, {list(t.shape)} after; strides {list(stride)}, {list(t.stride())}"
            elif values is not None and not torch.equal(t, values):
                how = "its values"
            else:
                continue
            altered.append(f"your rule changed `{name}`, the caller's tensor, in place ({how}): a rule makes new "
                           "tensors or views of its inputs (movedim, expand, reshape), and leaves the inputs as the "
                           "caller has them for its next call (lesson 06, section 6)")
        return out

    with operator("rowdot(Tensor x, Tensor y) -> Tensor", rowdot) as library:
        library.impl("rowdot", rowdot, "Meta")  # the same kernel on meta tensors: a device other than the CPU
        torch.library.register_vmap("exercise::rowdot", rule, lib=library)
        thread = thread_state()  # the caller's: grad mode on, say, for the training step that follows
        converted = None  # the first case whose kernel call took another dtype than the inputs'
        for case, x, y, in_dims, xs, ys in _vmap_rule_cases():
            calls.clear()
            returned.clear()
            expected = (xs * ys).sum(2)
            try:
                out = torch.vmap(torch.ops.exercise.rowdot, in_dims=in_dims)(x, y)
            except Exception as error:  # noqa: BLE001 - the reader's rule may raise anything; that is the diagnosis
                if altered:
                    return Result(False, f"with {case}: {altered[0]}")
                raised = str(error).splitlines()[0].split(". Use ")[0][:200]  # torch's own advice is the answer
                return Result(False, f"with {case} (strides {list(x.stride())} and {list(y.stride())}): your rule "
                                     f"raised {type(error).__name__}: {raised}\n"
                                     + _vmap_rule_hint(raised, x, y, in_dims, xs, returned))
            if altered:
                return Result(False, f"with {case}: {altered[0]}")
            if out.shape != expected.shape or out.dtype != expected.dtype:
                dtypes = f", {out.dtype}" if out.dtype != expected.dtype else "", f", {expected.dtype}"
                return Result(False, f"with {case}: wrong result, shape {list(out.shape)}{dtypes[0]}, wanted "
                                     f"{list(expected.shape)}{dtypes[1] if dtypes[0] else ''}")
            # float32: sums of six products of size about 1, in any order (the rows' sums may cancel to near 0).
            equal = {"rtol": 0, "atol": 0}
            tolerance = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, torch.float64: {"rtol": 1e-12, "atol": 0},
                         torch.float16: {"rtol": 1e-3, "atol": 1e-2},
                         torch.bfloat16: {"rtol": 1e-2, "atol": 1e-1}}.get(x.dtype, equal)
            if not torch.allclose(out, expected, **tolerance):
                error = (out - expected).abs().max().item()
                return Result(False, f"with {case}: wrong result" + (
                    f", off by up to {error:.3g}: {x.dtype} matrices summed with less precision than their dtype has "
                    "(lesson 06, section 6)" if x.dtype != torch.float32 and error < expected.abs().max() * 1e-3
                    else "\nLook again at lesson 06, section 6: where each input's batch is, and which rows of x and "
                         "y the kernel gets together"))
            if len(calls) != 1:
                return Result(False, f"right result, but the kernel ran {len(calls)} times for a batch of "
                                     f"{expected.shape[0]}, {case}: a rule should call it once for the whole batch "
                                     "(lesson 06, section 6)")
            if calls[0][0] != expected.numel():
                return Result(False, f"right result, but the kernel's one call took {calls[0][0]} rows, where the "
                                     f"batch has {expected.numel()} ({case}): the rows were computed elsewhere (a "
                                     "torch formula beside the kernel?), where the kernel is what computes them: "
                                     "another kernel (a CUDA one, one that accumulates otherwise) would give other "
                                     "numbers (lesson 06, section 6)")
            if calls[0][1] != x.dtype and converted is None:  # said once every case has run: a result may be wrong
                converted = (case, calls[0][1], x.dtype)
            if changed := thread_state_changes(thread):
                return Result(False, f"with {case}: right result, but after the call {changed}: your rule changed "
                                     "the caller's thread, and every later call on it (the training step after the "
                                     "vmap) runs so. A rule leaves the thread as it found it (lesson 06, section 6)")
        if converted:
            case, took, given = converted
            return Result(False, f"right result, but the kernel's one call took {took} tensors, where the inputs are "
                                 f"{given} ({case}): the rule converted them, and the kernel is what computes the "
                                 "rows, in the inputs' dtype: another kernel (a CUDA one written for float16, one for "
                                 "float32 only) would refuse them or give other numbers, and the copies cost memory "
                                 "the batch may not have (lesson 06, section 6)")
        if problem := _vmap_rule_gradients():
            return Result(False, problem)
        # vmap of vmap (examples of examples: per-sample gradients of a batch of models, say): the rule runs at each
        # level, the inner one's result batched at the outer level.
        xs, ys = torch.randn(3, 4, 5, 6), torch.randn(3, 4, 5, 6)
        try:
            out = torch.vmap(torch.vmap(torch.ops.exercise.rowdot))(xs, ys)
        except Exception as error:  # noqa: BLE001 - the reader's rule may raise anything; that is the diagnosis
            return Result(False, f"with vmap(vmap(rowdot)) on x and y of shape [3, 4, 5, 6] (a batch of batches): your "
                                 f"rule raised {type(error).__name__}: {str(error).splitlines()[0][:200]}: at the "
                                 f"inner "
                                 "level, the tensors your rule is given, and what it makes of them, are batched at the "
                                 "outer one (lesson 06, section 6)")
        if not torch.allclose(out, (xs * ys).sum(3), rtol=1e-5, atol=1e-5):
            return Result(False, "with vmap(vmap(rowdot)) on x and y of shape [3, 4, 5, 6]: wrong result")
        # Two calls, the first one's result kept (as a model keeps its activations): each call's result is its own.
        xs, y = torch.randn(4, 5, 6), torch.randn(5, 6)
        first = torch.vmap(torch.ops.exercise.rowdot, in_dims=(0, None))(xs, y)
        kept = first.clone()
        torch.vmap(torch.ops.exercise.rowdot, in_dims=(0, None))(xs * 2, y)
        if not torch.equal(first, kept):
            return Result(False, "two vmap calls, the first one's result kept: the second call changed it (off by up "
                                 f"to {(first - kept).abs().max():.3g}): your rule's results share memory between "
                                 "calls (a buffer reused?). Each call's result is a tensor of its own (lesson 06, "
                                 "section 6)")
        # The same unbatched y twice, written into in between: whatever a rule keeps of an input must not outlive it.
        xs, y = torch.randn(4, 5, 6), torch.randn(5, 6)
        batched = torch.vmap(torch.ops.exercise.rowdot, in_dims=(0, None))
        batched(xs, y)
        y.mul_(2)
        if not torch.allclose(out := batched(xs, y), expected := (xs * y).sum(2), rtol=1e-5, atol=1e-5):
            return Result(False, "with x batched in dimension 0 and y with no batch, called a second time after a "
                                 f"write into y (y.mul_(2)): wrong result, off by up to "
                                 f"{(out - expected).abs().max():.3g}: the rule used y as it was before the write")
        # New unbatched ys, each made where the last was freed (the id of one may be the id of the next).
        for step in range(20):
            y = torch.full((5, 6), float(step))
            if not torch.allclose(out := batched(xs, y), expected := (xs * y).sum(2), rtol=1e-5, atol=1e-5):
                return Result(False, f"with x batched in dimension 0 and a new unbatched y at step {step + 1} of 20, "
                                     f"made where an earlier y was freed: wrong result, off by up to "
                                     f"{(out - expected).abs().max():.3g}: the rule used something kept from another "
                                     "tensor (a cache keyed on id() or a data pointer is one). A rule computes from "
                                     "the inputs it is given")
            del y
        y = torch.randn(5, 6)
        batched(xs, y)
        y.data.mul_(2)  # a write its version counter does not see (an EMA of weights, code that writes through .data)
        if not torch.allclose(out := batched(xs, y), expected := (xs * y).sum(2), rtol=1e-5, atol=1e-5):
            return Result(False, "with x batched in dimension 0 and y with no batch, called again after a write "
                                 "into y through y.data (y.data.mul_(2), which y's version counter does not count, "
                                 "as a write through numpy's view of it does not): wrong result, off by up to "
                                 f"{(out - expected).abs().max():.3g}: the rule used y as it was before the write. "
                                 "A rule computes from the inputs it is given")
        if problem := _vmap_rule_on_meta():
            return Result(False, problem)
        # Inputs the kernel refuses for each example (the loop of the skeleton's rule refuses them): so must a rule.
        for what, x, y, in_dims in [
                ("x of shape [4, 1, 6] batched in dimension 0 and y [5, 6] with no batch: rows of 1 and of 5",
                 torch.randn(4, 1, 6), torch.randn(5, 6), (0, None)),
                ("x [4, 5, 6] batched in dimension 0 and y [1, 6] with no batch: one row, which broadcasts",
                 torch.randn(4, 5, 6), torch.randn(1, 6), (0, None)),
                ("x [5, 1] with no batch and y [4, 5, 6] batched in dimension 0: rows of one element, which broadcast",
                 torch.randn(5, 1), torch.randn(4, 5, 6), (None, 0)),
                ("x [4, 5, 6] and y [4, 5, 1], both batched in dimension 0: rows of 6 and of 1 elements",
                 torch.randn(4, 5, 6), torch.randn(4, 5, 1), (0, 0)),
                ("x in float32 and y in float64, both [4, 5, 6] batched in dimension 0",
                 torch.randn(4, 5, 6), torch.randn(4, 5, 6, dtype=torch.float64), (0, 0)),
                ("x [4, 2, 3] and y [4, 3, 2], both batched in dimension 0: as many elements, other shapes",
                 torch.randn(4, 2, 3), torch.randn(4, 3, 2), (0, 0)),
                ("x and y [4, 2, 5, 6], both batched in dimension 0: examples of three dimensions",
                 torch.randn(4, 2, 5, 6), torch.randn(4, 2, 5, 6), (0, 0)),
                ("x and y [4, 2, 1, 3], both batched in dimension 0: examples of three dimensions, one of them 1",
                 torch.randn(4, 2, 1, 3), torch.randn(4, 2, 1, 3), (0, 0)),
                ("x [3, 7, 4] with no batch (three dimensions) and y [5, 3, 4] batched in dimension 0",
                 torch.randn(3, 7, 4), torch.randn(5, 3, 4), (None, 0)),
                ("x [4, 5, 6] batched in dimension 0 and y [1, 5, 6] with no batch: three dimensions, one matrix in "
                 "a batch of one", torch.randn(4, 5, 6), torch.randn(1, 5, 6), (0, None)),
                ("x [4, 5, 6] batched in dimension 0 and y [4, 5, 6] with no batch: three dimensions, as many "
                 "matrices as the batch has examples", torch.randn(4, 5, 6), torch.randn(4, 5, 6), (0, None)),
                ("x and y [4, 6], both batched in dimension 0: examples of one dimension",
                 torch.randn(4, 6), torch.randn(4, 6), (0, 0)),
                ("an empty batch, x [0, 2, 3] and y [0, 4, 3], both batched in dimension 0: examples of 2 and of 4 "
                 "rows, though there is none (torch's own (x * y).sum(1) refuses them under vmap)",
                 torch.randn(0, 2, 3), torch.randn(0, 4, 3), (0, 0)),
                ("x and y [4], both batched in dimension 0: examples of no dimension (0-dim)",
                 torch.randn(4), torch.randn(4), (0, 0)),
                ("x [4, 1, 6] batched in dimension 0 and y [6] with no batch: examples of one row against a vector",
                 torch.randn(4, 1, 6), torch.randn(6), (0, None)),
                ("x [6] with no batch and y [4, 1, 6] batched in dimension 0: a vector against examples of one row",
                 torch.randn(6), torch.randn(4, 1, 6), (None, 0)),
                # Examples of three dimensions that a reshape to rows of the second size folds without complaint.
                ("x and y [4, 2, 3, 1], both batched in dimension 0: examples of three dimensions, the last of them 1",
                 torch.randn(4, 2, 3, 1), torch.randn(4, 2, 3, 1), (0, 0)),
                ("an empty batch, x and y [0, 2, 3, 4], both batched in dimension 0: examples of three dimensions, "
                 "though there is none", torch.randn(0, 2, 3, 4), torch.randn(0, 2, 3, 4), (0, 0))]:
            try:
                out = torch.vmap(torch.ops.exercise.rowdot, in_dims=in_dims)(x, y)
            except Exception as error:  # noqa: BLE001 - refused, as each example's call is
                if not isinstance(error, RuntimeError):
                    said = f" ({str(error).splitlines()[0][:120]})" if str(error) else ""
                    return Result(False, f"with {what}, which the kernel refuses for each example: your rule raised "
                                         f"{type(error).__name__}{said}, "
                                         "where the kernel, the unbatched call and vmap's own loop raise RuntimeError: "
                                         "a caller that catches what the operator raises (except RuntimeError) no "
                                         "longer does under vmap. A rule refuses what the kernel refuses, as the "
                                         "kernel does (lesson 06, section 6)")
                if changed := thread_state_changes(thread):
                    return Result(False, f"with {what}, which the kernel refuses: refused, but after the call "
                                         f"{changed}: an error raised inside your rule skipped the line that set it "
                                         "back, and every later call on this thread (the next batch of a training loop "
                                         "that catches the error) runs so. A rule leaves the thread as it found it, "
                                         "when an error goes through it too (lesson 06, section 6)")
                continue
            folded = (" (folded into the rows, an empty batch's [0, 2, 3] and [0, 4, 3] are both [0, 3])"
                      if x.numel() == 0 else "")
            return Result(False, f"with {what}, which the kernel refuses for each example (two shapes, two dtypes, or "
                                 f"examples that are not 2-D), vmap with your rule returned a result of shape "
                                 f"{list(out.shape)}, so a batched model computes what the unbatched one refuses. A "
                                 "rule that broadcasts or casts the inputs, or one whose call shows the kernel other "
                                 f"shapes than an example's{folded}, gets past the kernel's own checks (lesson 06, "
                                 "section 6)")
        # Inside torch.no_grad() (an evaluation loop): grad mode, off, stays off, after a refused call too.
        with torch.no_grad():
            inside = thread_state()
            for what, x, y in (("x [4, 5, 6] batched in dimension 0 and y [5, 6] with no batch",
                                torch.randn(4, 5, 6), torch.randn(5, 6)),
                               ("x [4, 5, 6] batched in dimension 0 and y [5, 5] with no batch, which the kernel "
                                "refuses", torch.randn(4, 5, 6), torch.randn(5, 5))):
                try:
                    torch.vmap(torch.ops.exercise.rowdot, in_dims=(0, None))(x, y)
                except Exception:  # noqa: BLE001 - refused or not, the state after it is what this step checks
                    pass
                if changed := thread_state_changes(inside):
                    return Result(False, f"called inside torch.no_grad() (an evaluation loop), with {what}: after "
                                         f"the call {changed}: your rule set what it changed to a value of its own, "
                                         "not back to what it found, and the rest of the caller's no_grad block "
                                         "runs so. A rule leaves the thread as it found it (lesson 06, section 6)")
            # An x that requires grad (a model's weight, evaluated): no graph, as the fallback's loop records none.
            out = torch.vmap(torch.ops.exercise.rowdot, in_dims=(0, None))(torch.randn(4, 5, 6, requires_grad=True),
                                                                           torch.randn(5, 6))
            if out.requires_grad:
                return Result(False, "called inside torch.no_grad() (an evaluation loop), with x [4, 5, 6] that "
                                     "requires grad batched in dimension 0: the result requires grad, so the call "
                                     "recorded what the caller switched off (its memory held through the loop, and "
                                     ".numpy() on the result refused): your rule turned grad mode on for its kernel's "
                                     "call. A rule runs in the caller's grad mode (lesson 06, section 6)")
        if import_silenced:
            return Result(False, "once your file was imported, vmap's fallback no longer warns of an operator with no "
                                 "batching rule (\"There is a performance drop...\"), for every operator of the "
                                 "process: a switch of the whole process "
                                 "(torch._C._functorch._set_vmap_fallback_warning_enabled), which tells every other "
                                 "user of vmap where a rule is missing. A rule changes nothing outside its call "
                                 "(lesson 06, section 6)")
        if filtered_at_import or list(warnings.filters) != filters:
            by = "importing your file" if filtered_at_import else "a call of your rule"
            return Result(False, f"{by} changed Python's warning filters (warnings.filters): a setting of "
                                 "the whole process, so a filter that hides vmap's \"There is a performance "
                                 "drop...\" hides it for every operator and every other user of vmap, where it "
                                 "tells them a rule is missing. A rule changes nothing outside its call "
                                 "(lesson 06, section 6)")
        if set_by_a_call:
            return Result(False, f"a call of your rule set your file's variable(s) {', '.join(set_by_a_call[0])} "
                                 "anew: a module's variables are shared by every thread and outlive the call, so two "
                                 "threads that vmap rowdot at once (a data loader's workers, a server's requests) "
                                 "read each other's, and what one holds (a batch, its graph) stays alive after the "
                                 "call. What a call needs stays in its own variables (lesson 06, section 6)")
        return Result(True, "one call, whichever inputs are batched and wherever their batch is, for empty batches, "
                            "float64 and int64 too, on an input's new values, and on new inputs in freed memory; "
                            "what the kernel refuses, refused; the caller's grad mode kept, inside no_grad too")


# ---------------------------------------------------------------------------------------------
# 07: the cost of a call


@exercise("07.records_graph", "medium")
def records_graph(path: Path) -> Result:
    import torch.autograd.forward_ad as forward_ad

    answer = load_python(path).records_graph
    lesson = "lesson 04, section 1 (csrc/autograd.cpp's records_graph)"

    def leaf(dtype=torch.float32, grad=False):
        return torch.ones(2, dtype=dtype, requires_grad=grad)

    def dual(tangent, dtype=torch.float32):
        return forward_ad.make_dual(leaf(dtype), tangent.to(dtype))

    # (what, inside forward_ad.dual_level(), the inputs): built under grad mode, so that a non-leaf input gets its
    # grad_fn, and asked about in both contexts: the same tensors, a different answer.
    cases = [(f"requires_grad {needs}", False, lambda needs=needs: [leaf(grad=flag) for flag in needs])
             for needs in ((False, False), (True, False), (False, True), (True, True))]
    cases += [
        ("a non-leaf input that requires grad (x * 2, x a leaf that requires grad)", False,
         lambda: [leaf(grad=True) * 2, leaf()]),
        ("a complex input that requires grad", False,
         lambda: [leaf(torch.complex64, grad=True), leaf(torch.complex64)]),
        ("complex inputs, neither requiring grad nor with a tangent", False,
         lambda: [leaf(torch.complex64), leaf(torch.complex64)]),
        ("a forward-mode tangent on the first input (torch.autograd.forward_ad)", True,
         lambda: [dual(torch.ones(2)), leaf()]),
        ("a forward-mode tangent on the second input", True, lambda: [leaf(), dual(torch.ones(2))]),
        ("a forward-mode tangent on an operator's output (make_dual(x, t) * 2: not a view)", True,
         lambda: [dual(torch.ones(2)) * 2, leaf()]),
        ("a forward-mode tangent of all zeros on the first input", True, lambda: [dual(torch.zeros(2)), leaf()]),
        ("a complex forward-mode tangent on the first input", True,
         lambda: [dual(torch.ones(2) * 1j, torch.complex64), leaf(torch.complex64)]),
        ("inside forward_ad.dual_level(), but no tangent on either input", True, lambda: [leaf(), leaf()]),
        ("a forward-mode tangent on a non-leaf input (make_dual(x * 2, t), x a leaf that requires grad)", True,
         lambda: [forward_ad.make_dual(leaf(grad=True) * 2, torch.ones(2)), leaf()]),
        # One tensor and three: csrc/autograd.cpp's records_graph takes any number (sum, add_out).
        ("one input, not requiring grad", False, lambda: [leaf()]),
        ("one input that requires grad", False, lambda: [leaf(grad=True)]),
        ("one input with a forward-mode tangent", True, lambda: [dual(torch.ones(2))]),
        ("three inputs, the third requiring grad", False, lambda: [leaf(), leaf(), leaf(grad=True)]),
        ("three inputs, a forward-mode tangent on the third", True, lambda: [leaf(), leaf(), dual(torch.ones(2))]),
        ("three inputs, none requiring grad", False, lambda: [leaf(), leaf(), leaf()]),
        ("three inputs, the middle one alone requiring grad", False, lambda: [leaf(), leaf(grad=True), leaf()]),
        ("three inputs, a forward-mode tangent on the middle one", True, lambda: [leaf(), dual(torch.ones(2)), leaf()]),
        ("four inputs, the third requiring grad", False, lambda: [leaf(), leaf(), leaf(grad=True), leaf()]),
        ("four inputs, the first alone requiring grad", False, lambda: [leaf(grad=True), leaf(), leaf(), leaf()]),
        ("four inputs, the fourth alone requiring grad", False, lambda: [leaf(), leaf(), leaf(), leaf(grad=True)]),
        # Any tensor autograd differentiates: empty (a last, empty batch), 0-dim (a learnable scale), meta, sparse.
        ("an empty input (shape [0]) that requires grad", False,
         lambda: [torch.ones(0, requires_grad=True), torch.ones(0)]),
        ("an empty input (shape [0]) with a forward-mode tangent (an empty batch)", True,
         lambda: [forward_ad.make_dual(torch.ones(0), torch.ones(0)), torch.ones(0)]),
        ("a 0-dim input (a scalar tensor) that requires grad", False,
         lambda: [torch.tensor(2.0, requires_grad=True), leaf()]),
        ("a 0-dim input (a scalar tensor) with a forward-mode tangent", True,
         lambda: [forward_ad.make_dual(torch.tensor(2.0), torch.tensor(1.0)), leaf()]),
        ("a meta input that requires grad", False,
         lambda: [torch.ones(2, device="meta", requires_grad=True), torch.ones(2, device="meta")]),
        ("a meta input with a forward-mode tangent", True,
         lambda: [forward_ad.make_dual(torch.ones(2, device="meta"), torch.ones(2, device="meta")),
                  torch.ones(2, device="meta")]),
        ("a sparse COO input that requires grad", False,
         lambda: [torch.ones(2).to_sparse().requires_grad_(), torch.ones(2).to_sparse()]),
        ("a forward-mode tangent on a tensor subclass that prints itself its own way (as DTensor and many wrapper "
         "subclasses do)", True, lambda: [forward_ad.make_dual(leaf().as_subclass(_PrintedItsOwnWay), torch.ones(2)),
                                          leaf()]),
        # Flags answer the question, never the data: a dense copy of this one would take 4 TB.
        ("a sparse COO input of shape [1000000, 1000000] with 3 elements (an embedding's sparse gradient, say: 4 TB "
         "as a dense tensor)", False,
         lambda: [_huge_sparse().requires_grad_(), _huge_sparse()]),
        # Half precision, as a model trained in bfloat16 (or run in float16) has it: a tangent there records too.
        ("a float16 input with a forward-mode tangent", True,
         lambda: [dual(torch.ones(2), torch.float16), leaf(torch.float16)]),
        ("a bfloat16 input that requires grad", False, lambda: [leaf(torch.bfloat16, grad=True), leaf(torch.bfloat16)]),
        ("a bfloat16 input with a forward-mode tangent", True,
         lambda: [dual(torch.ones(2), torch.bfloat16), leaf(torch.bfloat16)]),
        # Every complex dtype: complex128 as complex64 (a dtype list of the usual ones misses it).
        ("a complex128 input that requires grad", False,
         lambda: [leaf(torch.complex128, grad=True), leaf(torch.complex128)]),
        ("a complex128 input with a forward-mode tangent", True,
         lambda: [dual(torch.ones(2) * 1j, torch.complex128), leaf(torch.complex128)]),
    ]
    cases += [  # last: an answer that reads a tangent where none can be raises on them
        ("a sparse COO input that requires grad, inside forward_ad.dual_level()", True,
         lambda: [torch.ones(2).to_sparse().requires_grad_(), torch.ones(2).to_sparse()]),
        ("a sparse CSR input that requires grad, inside forward_ad.dual_level()", True,
         lambda: [torch.eye(2).to_sparse_csr().requires_grad_()]),
        ("a sparse CSC input that requires grad, inside forward_ad.dual_level()", True,
         lambda: [torch.eye(2).to_sparse_csc().requires_grad_()]),
        ("a sparse BSR input (blocks of 1x1) that requires grad, inside forward_ad.dual_level()", True,
         lambda: [torch.eye(2).to_sparse_bsr((1, 1)).requires_grad_()]),
        ("a sparse BSC input (blocks of 1x1) that requires grad, inside forward_ad.dual_level()", True,
         lambda: [_sparse_bsc()]),
    ]

    def addcmul_add(a, b, c, d):
        return torch.addcmul(a, b, c).add(d)

    ops = {1: torch.sin, 2: torch.mul, 3: torch.addcmul, 4: addcmul_add}  # torch's own, by the number of inputs

    def state():
        return torch.is_grad_enabled(), forward_ad._current_level

    def level(n: int) -> str:
        return "no dual level open" if n < 0 else f"dual level {n} open"

    wrong, count = [], 0
    for what, in_dual_level, inputs in cases:
        if in_dual_level:
            forward_ad.enter_dual_level()
        try:
            with torch.enable_grad():
                tensors = inputs()
            op = ops[len(tensors)]
            for context in ("grad mode on", "torch.no_grad()"):
                count += 1
                case = f"{context}, {what}"
                with torch.no_grad() if context == "torch.no_grad()" else torch.enable_grad():
                    out = op(*tensors)
                    # Only a strided tensor has a tangent (make_dual refuses the others; unpack_dual raises on them).
                    recorded = out.grad_fn is not None or (in_dual_level and out.layout == torch.strided and
                                                           forward_ad.unpack_dual(out).tangent is not None)
                    before = state()
                    try:
                        yours = answer(*tensors)
                    except Exception as error:  # noqa: BLE001 - the reader's code may raise anything
                        if wrong:  # the wrong answers found before it first
                            break
                        arity = isinstance(error, TypeError) and "positional argument" in str(error)
                        return Result(False, f"called with {len(tensors)} tensor(s) ({case}), your function raised "
                                             f"{_raised(error, path)}\n" + ("An Autograd kernel asks about every "
                                             "tensor argument of its call, however many. " if arity else "")
                                             + f"Look again at {lesson}.")
                    after = state()
                if before[0] != after[0]:
                    on_off = {True: "on", False: "off"}
                    return Result(False, f"your function changed grad mode: {on_off[before[0]]} before the call "
                                         f"({case}), {on_off[after[0]]} after it. It is asked a question: leave "
                                         f"thread-local state as you found it. Look again at {lesson}.")
                if before[1] != after[1]:
                    return Result(False, f"your function changed the forward-mode AD level: {level(before[1])} "
                                         f"before the call ({case}), {level(after[1])} after it. It is asked a "
                                         f"question: leave thread-local state as you found it. Look again at {lesson}.")
                if not isinstance(yours, bool):
                    return Result(False, f"your function returned {type(yours).__name__}, not a bool ({case}). Look "
                                         f"again at {lesson}.")
                if yours != recorded:
                    does = "records a graph" if recorded else "records nothing"
                    wrong.append(f"{case} (torch.{op.__name__} {does}; your answer: {yours})")
        finally:
            while forward_ad._current_level >= 0:  # yours may have opened a level, or left it ours
                forward_ad.exit_dual_level()
    if not wrong:
        wrong = _records_graph_after_changes(answer) or _records_graph_sparse_beside_a_tangent(answer)
    if not wrong and (told := _records_graph_on_a_broadcast(answer)):
        return Result(False, f"{told}.\nLook again at {lesson}.")
    if not wrong:
        return Result(True, f"right in all {count + 7} cases, on tensors whose flags changed between two questions too")
    more = f" (and {len(wrong) - 1} more case{'s' if len(wrong) > 2 else ''})" if len(wrong) > 1 else ""
    return Result(False, f"your answer differs from what torch's own operators do for: {wrong[0]}{more}.\nLook again "
                         f"at {lesson} and lesson 00, section 2.")


class _PrintedItsOwnWay(torch.Tensor):
    """A tensor subclass that prints itself its own way (DTensor does): by a __repr__ of its own, and through
    __torch_function__, which torch.Tensor.__repr__(t) hands a subclass's call to. What it prints says nothing of its
    flags."""

    def __repr__(self):
        return "_PrintedItsOwnWay(...)"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.__repr__:
            return "_PrintedItsOwnWay(...)"
        return super().__torch_function__(func, types, args, kwargs or {})


def _huge_sparse() -> torch.Tensor:
    """A sparse COO tensor of shape [10**6, 10**6] with 3 elements (48 bytes of values and indices)."""
    return torch.sparse_coo_tensor(torch.tensor([[0, 5, 999_999], [7, 5, 0]]), torch.ones(3), (10**6, 10**6))


def _records_graph_on_a_broadcast(answer) -> str | None:
    """Flags answer the question, never the data: a dense input expanded to [2**20, 2**20] (a broadcast bias: 4 bytes
    of memory, 4 TB as a copy), in torch.no_grad() inside a dual level, beside a tensor with a tangent and beside one
    without. An answer that copies its inputs (clone, contiguous) to read them cannot."""
    import torch.autograd.forward_ad as forward_ad

    broadcast = torch.zeros(()).expand(2**20, 2**20)
    with torch.no_grad(), forward_ad.dual_level():
        for what, other, want in (("a tensor with a forward-mode tangent", forward_ad.make_dual(torch.ones(1),
                                                                                                 torch.ones(1)), True),
                                  ("a tensor with no tangent", torch.ones(1), False)):
            case = (f"in torch.no_grad() inside forward_ad.dual_level(), a tensor of 4 bytes expanded to [1048576, "
                    f"1048576] (a broadcast: 4 TB as a dense copy) beside {what}")
            try:
                yours = answer(broadcast, other)
            except Exception as error:  # noqa: BLE001 - the reader's code may raise anything
                return (f"{case}: your function raised {type(error).__name__}: {str(error).strip()[:150]}. It copied "
                        "a tensor to answer a question its flags answer: a copy costs what the tensor's data costs, "
                        "on every call of the kernel, and an expanded tensor's copy is as large as its shape")
            if yours is not want:
                does = "records a graph" if want else "records nothing"
                return f"{case}: torch's own operators' call {does}; your answer: {yours}"
    return None


def _records_graph_sparse_beside_a_tangent(answer) -> list[str]:
    """Inside a dual level, a sparse tensor beside a dense one with a tangent, in both orders: torch's own add and mul
    take the forward-mode path (they fail there, making the sparse input's zero tangent: "Could not run
    'aten::_efficientzerotensor' with arguments from the 'SparseCPU' backend"), so the call must record, whatever
    the order of its tensors."""
    import torch.autograd.forward_ad as forward_ad

    with forward_ad.dual_level():
        dense = forward_ad.make_dual(torch.ones(2), torch.ones(2))
        for order, tensors in (("sparse first", (torch.ones(2).to_sparse(), dense)),
                               ("the tangent first", (dense, torch.ones(2).to_sparse()))):
            if answer(*tensors) is not True:
                return [f"inside forward_ad.dual_level(), a sparse COO tensor and a dense one with a forward-mode "
                        f"tangent, {order} (torch.add and torch.mul take the forward-mode path for these: they fail "
                        "making the sparse input's zero tangent; your answer: False): a tangent on any input records, "
                        "whatever the order of the inputs, and a sparse one beside it has no tangent to read"]
    return []


def _records_graph_after_changes(answer) -> list[str]:
    """The same tensors asked about twice, their flags changed in between: a parameter unfrozen (requires_grad_()),
    and a dual level closed. Each answer is about the tensors as they are now."""
    import torch.autograd.forward_ad as forward_ad

    x, y = torch.ones(2), torch.ones(2)
    answer(x, y)
    x.requires_grad_()
    wrong = [] if answer(x, y) else ["grad mode on, x then x.requires_grad_() (a parameter unfrozen), asked again "
                                     "(torch.mul records a graph; your answer: False)"]
    with forward_ad.dual_level():
        d = forward_ad.make_dual(torch.ones(2), torch.ones(2))
        answer(d)
    if answer(d):
        wrong.append("a tensor asked about inside a dual level, then again after the level closed, where it has no "
                     "tangent (torch.sin records nothing; your answer: True)")
    # A buffer that gains a tangent by an in-place write inside the level (buffer.copy_(dual)): asked before and after.
    with forward_ad.dual_level():
        buffer = torch.zeros(2)
        answer(buffer)
        buffer.copy_(forward_ad.make_dual(torch.ones(2), torch.ones(2)))
        if not answer(buffer):
            wrong.append("inside a dual level, a buffer asked about, then written in place with a dual tensor "
                         "(buffer.copy_(dual): it has a tangent now), asked again (torch.sin records its tangent; "
                         "your answer: False)")
    with forward_ad.dual_level():  # asked in one level, then in a new one (numbered as the closed one was)
        e = forward_ad.make_dual(torch.ones(2), torch.ones(2))
        answer(e)
    with forward_ad.dual_level():
        if answer(e):
            wrong.append("a tensor asked about inside a dual level, then again inside a new dual level opened after "
                         "the first closed (it has no tangent in the new one; torch.sin records nothing; your answer: "
                         "True)")
    return wrong


class FakeTimer:
    """07.layer_cost's measurements, made up and repeatable: a call of the operator with the layer costs `cost` µs more
    than without, plus noise of `noise` µs (a standard deviation), drawn from `seed`. A drifting machine slows every
    call down as it runs; spikes hit one call in 16 (the calls numbered `spikes` modulo 16, from 0); a coarse timer
    counts whole steps of `step` µs (a power of two: its multiples, and their differences, are exact); a call right
    after a cold call of the other side runs `second_faster` µs faster (that call warmed a cache for it; a warmed call
    warms nothing), so in a round the second call is the faster, by less and less where `fading_over` is set (nothing
    from that call on: a cache that stays warm as the machine runs), or by more and more where `growing_over` is (all
    of it from that call on: a cache that warms as the machine runs); every `slow_without[0]`-th call without the layer
    (the first among them) is `slow_without[1]` µs slower (a busy moment). `calls` holds (with the layer?, the time
    returned)."""

    def __init__(self, cost: float, drift: float = 0.0, spikes: int | None = None, noise: float = 0.03, seed: int = 7,
                 step: float = 0.0, second_faster: float = 0.0, fading_over: int = 0, growing_over: int = 0,
                 slow_without: tuple[int, float] = (0, 0.0)):
        self.cost, self.drift, self.spikes, self.noise, self.step, self.calls = cost, drift, spikes, noise, step, []
        self.slow_without = slow_without
        self.second_faster, self.fading_over, self.growing_over, self.warmed = (second_faster, fading_over,
                                                                                growing_over, False)
        self.random = random.Random(seed)

    def _time(self, layer: bool) -> float:
        n = len(self.calls)
        spike = 40.0 if self.spikes is not None and n % 16 == self.spikes else 0.0
        every, slower = self.slow_without
        if every and not layer and sum(not made_with for made_with, _ in self.calls) % every == 0:
            spike += slower
        self.warmed = bool(self.calls) and self.calls[-1][0] != layer and not self.warmed
        faster = self.second_faster * (max(0.0, 1 - n / self.fading_over) if self.fading_over else
                                       min(1.0, n / self.growing_over) if self.growing_over else 1.0)
        time = (2.0 + self.drift * n + self.random.gauss(0, self.noise) + spike + (self.cost if layer else 0.0)
                - (faster if self.warmed else 0.0))
        self.calls.append((layer, round(time / self.step) * self.step if self.step else time))
        return self.calls[-1][1]

    def with_layer(self) -> float:
        return self._time(True)

    def without(self) -> float:
        return self._time(False)

    def differences(self, rounds: int) -> list[float]:
        """The last `rounds` calls with the layer less the last `rounds` without, in order: round by round, where
        each round timed one of each (calls made before them, to warm up, say, left out)."""
        times = {layer: [time for made_with, time in self.calls if made_with == layer] for layer in (True, False)}
        return [a - b for a, b in zip(times[True][-rounds:], times[False][-rounds:])]

    def unbalanced(self, rounds: int) -> str | None:
        """None where, of the last `rounds` rounds (a call of each side), as many timed the layer first as second,
        give or take one; else how many did."""
        layers = [layer for layer, _ in self.calls][-2 * rounds:]
        firsts = layers[0::2]
        if any(a == b for a, b in zip(firsts, layers[1::2])) or abs(2 * sum(firsts) - rounds) <= 1:
            return None  # rounds that do not pair up are order()'s to tell
        return (f"time_with() went first in {sum(firsts)} of {rounds} rounds: where going first or second changes a "
                "call's time (a cache the first call warms), the side that goes first more often carries that change "
                "into the differences; each order must come up in half the rounds")

    def order(self) -> str | None:
        """None where the calls with and without the layer alternate; else how they were made."""
        layers = [layer for layer, _ in self.calls]
        if all(layers[i] != layers[i + 1] for i in range(0, len(layers) - 1, 2)):
            return None
        if layers == sorted(layers, reverse=True) or layers == sorted(layers):
            first, then = ("with", "without") if layers[0] else ("without", "with")
            return f"you timed every call {first} the layer before any {then} it"
        return "you did not time the calls with and without the layer in the same rounds"


def _shown(result) -> str:
    """A reported (median, q1, q3) in µs: three decimals, and two significant digits below a nanosecond."""
    if not isinstance(result, tuple):
        return repr(result)
    return "(" + ", ".join(f"{v:.3f}" if v == 0 or abs(v) >= 1e-3 else f"{v:.2g}" for v in result) + ")"


def _not_from_the_rounds(result: tuple, differences: list[float]) -> str | None:
    """None where `result` is (the median, a first quartile, a third quartile) of `differences`; else what is not. A
    quartile is accepted wherever a usual definition puts it (statistics.quantiles' inclusive and exclusive methods,
    numpy's, Tukey's hinges): between the values at 0-based positions (n - 3) / 4 rounded down and n / 4 rounded up of
    the sorted differences, and the mirror of that for the third."""
    import statistics

    ordered, n = sorted(differences), len(differences)
    median, q1, q3 = result
    low, high = max(0, (n - 3) // 4), min(n - 1, -(-n // 4))
    if abs(median - statistics.median(ordered)) > 1e-9:
        middle = ordered[(n - 1) // 2], ordered[n // 2]
        if n % 2 == 0 and any(abs(median - value) < 1e-9 for value in middle):
            return (f"your median, {median:.3f} µs, is one of the two middle differences of {n} rounds: the median of "
                    "an even number of values is the mean of its two middle ones, not either of them (torch's median() "
                    "returns the lower one, so it is not that median)")
        true = statistics.median(ordered)
        off = abs(median - true)
        why = (": the precision of float32, not of Python's floats" if off <= 1e-5 * abs(true)
               else ": a rounding" if any(abs(median - round(true, digits)) < 1e-12 for digits in range(7)) else "")
        return (f"your median, {median:.3f} µs, is not the median of the {n} differences your rounds measured (off by "
                f"{off:.2g} µs{why})")
    for name, value, (lowest, highest) in [("first", q1, (ordered[low], ordered[high])),
                                          ("third", q3, (ordered[n - 1 - high], ordered[n - 1 - low]))]:
        if not lowest - 1e-9 <= value <= highest + 1e-9:
            return (f"your {name} quartile, {value:.3f} µs, is not a {name} quartile of the {n} differences your "
                    "rounds measured, by any usual definition")
    return None


_CUDA_SEEDED = []  # the calls that seeded torch's CUDA generators, while 07.layer_cost's check watches (below)
_FROZEN = "the objects frozen out of collection (gc.freeze)"
_FREEZES = []  # the calls of gc.freeze and gc.unfreeze, while 07.layer_cost's check watches (below)


def _watching_freezes() -> None:
    """Record every call of gc.freeze and gc.unfreeze, before the reader's file is loaded (`from gc import freeze`
    then finds the recording one). Counting the frozen objects instead (gc.get_freeze_count) walks all of them, and in
    a child of the fork server, which froze torch's, that writes into, and so copies, the whole inherited heap: a third
    of a second a check."""
    import gc

    for name in ("freeze", "unfreeze"):
        def recorded(_call=getattr(gc, name), _name=f"gc.{name}"):
            _FREEZES.append(_name)
            return _call()
        setattr(gc, name, recorded)


def _watching_cuda_seeds() -> None:
    """Record every call that seeds torch's CUDA generators: torch.manual_seed and torch.seed seed every device's, and
    torch.cuda's own. Their state does not show it: where CUDA has not started, torch queues the seed for later, and in
    a child of the fork server (which torch calls a bad fork) torch.manual_seed leaves CUDA alone."""
    for module, name in ((torch, "manual_seed"), (torch, "seed"), (torch.random, "manual_seed"),
                         (torch.random, "seed"), (torch.cuda, "manual_seed"), (torch.cuda, "manual_seed_all"),
                         (torch.cuda, "seed"), (torch.cuda, "seed_all")):
        def recorded(*args, _seeding=getattr(module, name), _name=f"{module.__name__}.{name}", **kwargs):
            _CUDA_SEEDED.append(_name)
            return _seeding(*args, **kwargs)
        setattr(module, name, recorded)


def _numpy_random_state(numpy) -> tuple:
    """numpy's global generator's state, comparable with ==: its key array as bytes (its repr takes 2 ms)."""
    name, key, *rest = numpy.random.get_state()
    return name, key.tobytes(), *rest


def _layer_cost_settings() -> dict:
    """The process-wide settings a measurement may change while it times, as they are now."""
    import faulthandler
    import gc
    import logging
    import os
    import signal
    import sys
    import threading
    import tracemalloc

    return {"garbage collection": "on" if gc.isenabled() else "off", "the collector's thresholds": gc.get_threshold(),
            "the collector's callbacks (gc.callbacks) and debug flags (gc.set_debug)": (list(gc.callbacks),
                                                                                          gc.get_debug()),
            _FROZEN: len(_FREEZES),  # a call of either changes what is frozen: the caller's objects, or more
            "torch's threads": torch.get_num_threads(),
            "Python's random numbers (the random module)": random.getstate(),
            "torch's random numbers": torch.random.get_rng_state(),
            "torch's CUDA random numbers (seeded: torch.manual_seed seeds them too)": len(_CUDA_SEEDED),
            "the interpreter's thread switch interval (sys.setswitchinterval)": sys.getswitchinterval(),
            "numpy's random numbers (numpy.random.seed)": (
                _numpy_random_state(sys.modules["numpy"]) if "numpy" in sys.modules else None),
            _NUMPY_ERRORS: sys.modules["numpy"].geterr() if "numpy" in sys.modules else None,
            "the process's priority (os.nice)": (
                os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None),
            "the process's scheduling policy (os.sched_setscheduler)": (
                os.sched_getscheduler(0) if hasattr(os, "sched_getscheduler") else None),
            "the levels of log messages switched off (logging.disable)": logging.root.manager.disable,
            "Python's memory tracing (tracemalloc: on or off, frames per traceback)": (
                tracemalloc.is_tracing(), tracemalloc.get_traceback_limit()),
            "Python's standard output and error streams (sys.stdout, sys.stderr)": (id(sys.stdout), id(sys.stderr)),
            "torch's default dtype (torch.set_default_dtype)": torch.get_default_dtype(),
            "the CPUs the process may run on (os.sched_setaffinity)": (
                os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None),
            "whether denormal numbers flush to zero (torch.set_flush_denormal)": _flushes_denormals(),
            "cuDNN's benchmark and deterministic flags (torch.backends.cudnn)": (
                torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic),
            _ONEDNN: (torch.backends.mkldnn.enabled, torch.backends.mkldnn.deterministic),
            _LOGGER_LEVELS: _logger_levels(),
            "torch's deterministic algorithms (torch.use_deterministic_algorithms)": (
                torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
            "float32 matmul precision (torch.set_float32_matmul_precision)": torch.get_float32_matmul_precision(),
            "autograd's anomaly detection (torch.autograd.set_detect_anomaly)": torch.is_anomaly_enabled(),
            "Python's warning filters (warnings.filters)": list(warnings.filters),
            _HOOKS: (sys.gettrace(), sys.getprofile(), threading.gettrace(), threading.getprofile()),
            _FAULTHANDLER: faulthandler.is_enabled(),
            _SIGNALS: {name: signal.getsignal(getattr(signal, name)) for name in _CALLERS_SIGNALS
                       if hasattr(signal, name)},
            _ENVIRONMENT: {name: value for name, value in _c_environment().items() if name != _SET_BY_TORCH}}


_ONEDNN = "oneDNN's flags (torch.backends.mkldnn: which CPU convolution kernels a call runs)"
_SIGNALS = "the process's signal handlers (signal.signal: what Ctrl-C, a kill or a user signal does)"
# The caller's signals, not those the runner's watchdog uses while a check runs (SIGALRM, SIGPROF).
_CALLERS_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2")
_NUMPY_ERRORS = "numpy's handling of floating-point errors (numpy.seterr: warn, raise or ignore an overflow)"
_FAULTHANDLER = "faulthandler (faulthandler.enable: on or off)"
_LOGGER_LEVELS = "the levels of Python's loggers (logging.getLogger(name).setLevel)"


def _logger_levels() -> dict[str, int]:
    """Each logger's own level where one is set (the root's too): a logger made since, its level unset, changes
    nothing."""
    import logging

    return {name: logger.level for name, logger in [("", logging.root), *logging.root.manager.loggerDict.items()]
            if isinstance(logger, logging.Logger) and logger.level != logging.NOTSET}


def _c_environment() -> dict[str, str]:
    """The process's environment as the C library holds it, which the processes it starts inherit: os.environ's
    changes reach it, and so does os.putenv, which os.environ never sees. os.environ where the C library's `environ`
    cannot be read."""
    import ctypes
    import os

    try:
        entries = ctypes.POINTER(ctypes.c_char_p).in_dll(ctypes.CDLL(None), "environ")
    except (OSError, ValueError):
        return dict(os.environ)
    environment, index = {}, 0
    while entries[index] is not None:
        name, _, value = os.fsdecode(entries[index]).partition("=")
        environment[name] = value
        index += 1
    return environment


# Its source, which 08.load_before_aoti's fresh Python runs a copy of: read as this module is imported, the code it
# runs here. Read when the check runs, it would be the file on disk then, which may have changed since (a checkout
# updated while a Jupyter kernel holds this module).
_C_ENVIRONMENT_SOURCE = inspect.getsource(_c_environment)


# torch writes TORCHINDUCTOR_CACHE_DIR itself the first time it reads it (torch/_inductor/runtime/cache_dir_utils.py,
# cache_dir()), when torch._dynamo or torch._inductor is imported, say: not the answer's setting.
_SET_BY_TORCH = "TORCHINDUCTOR_CACHE_DIR"
_ENVIRONMENT = ("the process's environment variables (os.environ, os.putenv: every process it starts inherits them, "
                "and OMP_NUM_THREADS sets a DataLoader worker's or a subprocess's torch threads)")
_HOOKS = ("the interpreter's trace and profile functions, the process's and those threading gives new threads "
          "(sys.settrace, sys.setprofile: a debugger's, coverage's, a profiler's)")


def _hook(frame, event, arg):  # a caller's debugger, coverage or profiler: here, one that does nothing
    return None


def _set_hooks(trace, profile, thread_trace, thread_profile) -> None:
    import sys
    import threading

    sys.settrace(trace)
    sys.setprofile(profile)
    threading.settrace(thread_trace)
    threading.setprofile(thread_profile)


# The settings compared with what they were before the check's first call (the others, before each case's).
_LAYER_COST_FIRST = ("torch's threads", "the process's priority (os.nice)",
                     "whether denormal numbers flush to zero (torch.set_flush_denormal)",
                     "cuDNN's benchmark and deterministic flags (torch.backends.cudnn)",
                     "torch's deterministic algorithms (torch.use_deterministic_algorithms)",
                     "float32 matmul precision (torch.set_float32_matmul_precision)",
                     "autograd's anomaly detection (torch.autograd.set_detect_anomaly)", _ENVIRONMENT, _ONEDNN,
                     _LOGGER_LEVELS, _NUMPY_ERRORS, _FAULTHANDLER, _SIGNALS)


def _layer_cost_in_threads(answer) -> str | None:
    """Two measurements at once, in two threads (two benchmarks of a suite run side by side), of layers of 0.40 µs over
    15 rounds and 1.20 µs over 16, on timers whose second call of a round runs faster (a cache the first warmed): each
    reports its own, each times the layer first in half its rounds, and together they leave the process's settings as
    they found them. The two take turns, call by call: a thread runs from one timed call to its next while the other
    waits in a timed call (so what each does between its calls, the other sees done); the second starts at the first's
    second call (so it finds whatever the first changed), and with a round more, ends last."""
    import threading

    turn = threading.Condition()
    holder, finished, timed_calls = ["first"], set(), {"first": 0, "second": 0}
    before = _layer_cost_settings()

    def measured(name: str, other: str, cost: float, rounds: int):
        timer = FakeTimer(cost, seed=13, second_faster=0.05)

        def side(time_one):
            def timed():
                with turn:
                    if timed_calls[name]:  # the other's turn first
                        holder[0] = other
                        if other == "second" and second.ident is None:  # not started yet
                            second.start()
                        turn.notify_all()
                    turn.wait_for(lambda: holder[0] == name or other in finished, timeout=2)
                    timed_calls[name] += 1
                return time_one()
            return timed

        try:
            result = answer(side(timer.with_layer), side(timer.without), rounds=rounds)
        finally:
            with turn:  # the other's calls wait no more
                finished.add(name)
                turn.notify_all()
        shared = ("the two shared something (a list of differences at module level?), and each took the other's "
                  "samples. A measurement keeps its samples to itself")
        if not (isinstance(result, tuple) and len(result) == 3 and abs(result[0] - cost) < cost / 4):
            return f"the one of a {cost:.2f} µs layer reported {_shown(result)}: {shared}"
        if wrong := _not_from_the_rounds(result, timer.differences(rounds)):
            return f"the one of a {cost:.2f} µs layer reported {_shown(result)}: {wrong}: {shared}"
        if unbalanced := timer.unbalanced(rounds):
            return (f"in the one of a {cost:.2f} µs layer, {unbalanced}: which side went first came from something "
                    "the two measurements shared (a module-level alternation?), not from the measurement's own rounds")
        return None

    wrong = []
    # Daemons: where the two wait for each other for good, the check reports it (_on_the_clock) and its process ends.
    first = threading.Thread(target=lambda: wrong.append(measured("first", "second", 0.4, 15)), daemon=True)
    second = threading.Thread(target=lambda: wrong.append(measured("second", "first", 1.2, 16)), daemon=True)
    first.start()
    first.join()
    if second.ident is not None:  # started (by the first's second timed call)
        second.join()
    if wrong := next(filter(None, wrong), None):
        return f"two measurements at once, in two threads (layers of 0.40 and 1.20 µs): {wrong}"
    if changed := _layer_cost_differing(before, _layer_cost_settings()):
        return (f"two measurements at once, in two threads, the second started while the first was timing: "
                f"afterwards, {changed}: what one measurement changed while it timed, the other took for the "
                "caller's, and restored. A setting that is the process's, not the thread's, is shared by every "
                "measurement running at the time")
    return None


def _layer_cost_warning_as_error(answer) -> str | None:
    """A caller that turns warnings into errors (as tests do for torch's autograd fallback warning): a timer that
    warns raises, and the error passes through the measurement."""
    timer, calls = FakeTimer(0.4, seed=15), []

    def warning():
        calls.append(None)
        if len(calls) == 3:
            warnings.warn("the timed call fell back to a slow path", UserWarning)
        return timer.with_layer()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            result = answer(warning, timer.without, rounds=15)
        except UserWarning:
            return None
    return (f"for a caller that turns warnings into errors (warnings.simplefilter(\"error\"), as tests do for "
            f"torch's autograd fallback warning), a timer warned, and your function returned {_shown(result)}: the "
            "warning never became the caller's error. A measurement leaves the caller's warning filters as they are")


def _layer_cost_keeps_warn_only(answer) -> str | None:
    """A caller that runs deterministic algorithms with warn_only=True (warnings where no deterministic kernel exists,
    not errors): a measurement leaves both flags as it found them."""
    found = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        timer = FakeTimer(0.4, seed=14)
        answer(timer.with_layer, timer.without, rounds=15)
        left = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(found[0], warn_only=found[1])
    if left != (True, True):
        return (f"for a caller that runs torch.use_deterministic_algorithms(True, warn_only=True), your function left "
                f"(enabled, warn_only) at {left}: what it changed while it timed it restored only in part (a setting "
                "of two flags, set back from one?). A measurement leaves process-wide settings as it found them")
    return None


def _layer_cost_keeps_flush_denormal(answer) -> str | None:
    """A caller that flushes denormal numbers to zero (torch.set_flush_denormal(True), for speed): a measurement leaves
    it on. (torch has no getter for it: a function that sets it back to off, the default, turns the caller's off.)"""
    if not torch.set_flush_denormal(True):  # a CPU without the flag: nothing to keep
        return None
    try:
        timer = FakeTimer(0.4, seed=15)
        answer(timer.with_layer, timer.without, rounds=15)
        left_on = _flushes_denormals()
    finally:
        torch.set_flush_denormal(False)
    if not left_on:
        return ("for a caller that flushes denormal numbers to zero (torch.set_flush_denormal(True)), your function "
                "turned it off: it set the flag back to the default, not to what it found (torch has no getter for "
                "it). A measurement leaves process-wide settings as it found them")
    return None


def _layer_cost_watchdog_kept(answer) -> str | None:
    """faulthandler's watchdog (dump_traceback_later: one per process, a thread of its own while armed) as the caller
    armed it, after a measurement: the check's runner arms one for the reader's code (toolkit.Watchdog), and one is
    armed here where it has not. The reader's first call, 4 rounds (an even number: an alternation kept between calls
    meets the check's later calls as it would have)."""
    import faulthandler
    import os
    import time

    from .toolkit import WATCHDOG

    if not os.path.isdir("/proc/self/task"):  # the operating system's list of the process's threads (Linux)
        return None
    import threading

    armed_here = not WATCHDOG.started
    if armed_here:
        faulthandler.dump_traceback_later(3600, exit=False)  # the caller's own
    # The random numbers as they were, after: an answer that draws meets the check's later calls as it would have.
    python_random, torch_random = random.getstate(), torch.random.get_rng_state()
    try:
        before, python_threads = len(os.listdir("/proc/self/task")), len(threading.enumerate())
        timer = FakeTimer(0.4, seed=3)
        answer(timer.with_layer, timer.without, rounds=4)
        # A thread the answer joined may still be on its way out of the process for a moment: a second, at most.
        for _ in range(100):
            if (after := len(os.listdir("/proc/self/task"))) == before:
                break
            time.sleep(0.01)
    finally:
        if armed_here:
            faulthandler.cancel_dump_traceback_later()
        random.setstate(python_random)
        torch.random.set_rng_state(torch_random)
    # A Python thread left running (a pool's) is said by _layer_cost_thread_started_meanwhile, later, in its words.
    if after != before and len(threading.enumerate()) == python_threads:
        return (f"the process had {before} threads before your function ran and {after} after it, as the operating "
                "system lists them (/proc/self/task), where Python's threading module lists none of them: your code "
                "started or stopped a thread of C's, faulthandler's watchdog (dump_traceback_later)? A process has one "
                "watchdog: arming one replaces the caller's, and cancel_dump_traceback_later() cancels the caller's "
                "too. A measurement leaves the process's settings as it found them")
    return None


def _layer_cost_collects(answer) -> str | None:
    """A caller that turned garbage collection off (as timeit does while it times): the measurement runs no collection
    of its own (gc.collect), which would free, finalize and call the caller's gc callbacks on the caller's objects, in
    the middle of the caller's work, and take as long as the caller has objects."""
    import gc

    collections = []

    def counted(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    enabled = gc.isenabled()
    gc.disable()
    gc.callbacks.append(counted)
    try:
        timer = FakeTimer(0.4, seed=18)
        answer(timer.with_layer, timer.without, 15)
    finally:
        gc.callbacks.remove(counted)
        if enabled:
            gc.enable()
    if collections:
        return (f"for a caller that had turned garbage collection off (gc.disable(), as timeit does while it times), "
                f"your function ran {len(collections)} collection(s) of its own (gc.collect()): each frees and "
                "finalizes the caller's garbage and calls the caller's gc callbacks, in the middle of the caller's "
                "work, and takes as long as the caller has objects. The timers run under the caller's garbage "
                "collection as it is")
    return None


def _layer_cost_threads_left(answer) -> str | None:
    """A thread the measurement starts (a watchdog, a sampler) ends with it: one left running after it returns runs on
    in the caller's process, and does what it was started for (warns, times out) when no measurement runs."""
    import threading

    before = set(threading.enumerate())
    timer = FakeTimer(0.4, seed=17)
    answer(timer.with_layer, timer.without, 15)
    if left := [thread for thread in threading.enumerate() if thread not in before]:  # alive ones only
        return (f"after your function returned, {len(left)} thread(s) it started still ran ({left[0].name}, a "
                f"{type(left[0]).__name__}): a measurement's threads end with it (a threading.Timer cancelled, a "
                "thread joined), or they run on in the caller's process, and do what they were started for when no "
                "measurement runs")
    return None


def _layer_cost_thread_started_meanwhile(answer) -> str | None:
    """A thread started while the measurement times (torch starts its OpenMP threads at its first parallel call, which
    a timed call may be) runs, once the measurement is over, as the process's others do. Linux keeps a thread's CPUs,
    priority and scheduling policy per thread, the CPU its floating-point flags (flushing denormals to zero), and
    threading gives a new thread the trace and profile functions it holds at the thread's start: a thread starts with
    what its starter had then."""
    import os
    import sys
    import threading

    if not (hasattr(os, "sched_getaffinity") and hasattr(os, "getpriority") and hasattr(os, "sched_getscheduler")):
        return None

    def per_thread() -> dict:
        def hook(which: str, hook) -> str:
            whose = "the caller's" if hook is _hook else "no" if hook is None else repr(hook)
            return f"runs {whose} {which} function"

        return {"cpus": f"runs on CPUs {sorted(os.sched_getaffinity(0))}",
                "priority": f"runs at priority (nice) {os.getpriority(os.PRIO_PROCESS, 0)}",
                "policy": f"runs under scheduling policy {_scheduling_policy(os.sched_getscheduler(0))}",
                "denormals": ("flushes denormal numbers to zero" if _flushes_denormals() else
                              "keeps denormal numbers (does not flush them to zero)"),
                "trace": hook("trace (a debugger's, coverage's)", sys.gettrace()),
                "profile": hook("profile (a profiler's)", sys.getprofile())}

    timer, over, seen, started = FakeTimer(0.4, seed=16), threading.Event(), [], []

    def pool_thread():
        over.wait(timeout=60)
        seen.append(per_thread())

    def first_call_starts_a_thread():
        if not started:
            started.append(threading.Thread(target=pool_thread, daemon=True))
            started[0].start()
        return timer.with_layer()

    # And a thread that runs before the measurement, pinned to one CPU of its own (an OpenMP worker under
    # GOMP_CPU_AFFINITY, a loader thread): it keeps its CPUs.
    existing = threading.Thread(target=over.wait, kwargs={"timeout": 60}, daemon=True)
    existing.start()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(existing.native_id, {cpus[-1]})
    threading.settrace(_hook)  # the caller's debugger or profiler, which threading hands every new thread
    threading.setprofile(_hook)
    try:
        found = {**per_thread(), "trace": "runs the caller's trace (a debugger's, coverage's) function",
                 "profile": "runs the caller's profile (a profiler's) function"}  # what a thread started now gets
        answer(first_call_starts_a_thread, timer.without, rounds=15)
        pinned = os.sched_getaffinity(existing.native_id)
    finally:
        threading.settrace(None)
        threading.setprofile(None)
        over.set()
        if started:
            started[0].join(timeout=60)
        existing.join(timeout=60)
    if len(cpus) > 1 and pinned != {cpus[-1]}:
        return (f"a thread that ran before your function, pinned to CPU {cpus[-1]} (an OpenMP worker under "
                f"GOMP_CPU_AFFINITY, a loader thread), runs on CPUs {sorted(pinned)} after it: what a measurement "
                "changes for threads it did not start, it sets back to what each of them had")
    if not seen:
        return None
    if not (differing := [name for name, value in seen[0].items() if value != found[name]]):
        return None
    return (f"a thread started while your function timed (as torch starts its OpenMP threads at its first parallel "
            f"call, which a timed call may be) {seen[0][differing[0]]} for good, where a thread started outside your "
            f"measurement {found[differing[0]]}: a new thread starts with its starter's CPUs, priority, scheduling "
            "policy and floating-point flags (Linux and the CPU keep them per thread), and with the trace and profile "
            "functions threading holds at its start. A measurement leaves the process's settings as it found them, "
            "for the threads started while it timed too")


def _scheduling_policy(policy: int) -> str:
    """os.SCHED_BATCH for 3, say: a policy's name in os."""
    import os

    return next((f"os.{name}" for name in dir(os) if name.startswith("SCHED_") and name != "SCHED_RESET_ON_FORK"
                 and getattr(os, name) == policy), str(policy))


class _NotDoneOnTheClock(BaseException):
    """A scenario ran past its time on the clock (a BaseException: an answer's `except Exception` lets it by)."""


def _on_the_clock(scenario, answer, what: str, seconds: float = 20.0) -> str | None:
    """scenario(answer), or a diagnosis once it has run `seconds` on the clock (each takes well under one): the
    handler of ITIMER_REAL's signal, on the main thread, interrupts a wait there (a lock's acquire, a thread's join)
    as it does a loop. Waiting uses no processor time, so the runner's watchdog would wait five times its limit."""
    import signal

    def expired(signum, frame):
        raise _NotDoneOnTheClock

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return scenario(answer)
    except _NotDoneOnTheClock:
        return (f"{what}: not done after {seconds:g} s on the clock, where each measurement "
                "takes well under a second: one call of your function waited for something another held (a lock "
                "of your file's, taken for a whole measurement, which a measurement inside a timer, or one in "
                "another thread whose timer takes turns with this one's, waits for: a deadlock). Measurements share "
                "nothing, so they need no lock: each keeps its own samples")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _layer_cost_nested(answer) -> str | None:
    """A measurement inside another's timer (a timer that first measures a sub-layer, a helper that measures too): the
    outer one's samples are its own."""
    outer, inner, calls = FakeTimer(0.4, seed=31), FakeTimer(0.0, seed=32), []

    def with_layer():  # its third call measures a sub-layer first, on the same thread
        calls.append(None)
        if len(calls) == 3:
            answer(inner.with_layer, inner.without, rounds=15)
        return outer.with_layer()

    measured = answer(with_layer, outer.without, rounds=15)
    if isinstance(measured, tuple) and all(abs(value - 0.4) < 0.1 for value in measured):
        return None
    return (f"a measurement of a layer of 0.40 µs whose timer, at its third call, measures a sub-layer first (a second "
            f"call of your function, inside the first, on the same thread): you report {_shown(measured)}: the outer "
            "call's samples were changed by the inner one (something kept between calls, per thread or process, "
            "reused?). Each call's samples are its own")


def _layer_cost_nested_at_every_call(answer) -> str | None:
    """A measurement (of 9 rounds: an odd number) inside every call of another's timer with the layer: the outer one
    still takes turns, each side first in half its rounds, whatever the inner ones did (on a machine where a round's
    second call runs faster, a side always first is a cost made up, or one hidden)."""
    outer, inner = FakeTimer(0.0, seed=33, second_faster=0.6), FakeTimer(0.0, seed=34)

    def with_layer():
        answer(inner.with_layer, inner.without, rounds=9)
        return outer.with_layer()

    measured = answer(with_layer, outer.without, rounds=15)
    layers = [layer for layer, _ in outer.calls]
    with_first = sum(layers[n] for n in range(0, len(layers) - 1, 2))
    if len(layers) == 30 and with_first in (7, 8):
        return None
    return (f"a layer that costs nothing, on a timer whose second call of a round runs 0.6 µs faster, and whose call "
            f"with the layer first measures a sub-layer (9 rounds: a second call of your function inside the first, "
            f"on the same thread): time_with() went first in {with_first} of the outer call's 15 rounds, and you "
            f"report {_shown(measured)}: each order must come up in half the rounds. The order was changed by the "
            "inner calls (an alternation kept between calls, per thread or process?): each call's order is its own")


def _layer_cost_keeps_c_profiler(answer) -> str | None:
    """A caller that profiles with cProfile, whose profile function is written in C: sys.getprofile() gives its
    Profile object, which sys.setprofile takes as a Python function (one that cannot be called). The profiler is
    still the process's after the measurement."""
    import cProfile
    import sys

    profiler, timer, raised = cProfile.Profile(), FakeTimer(0.4, seed=17), None
    profiler.enable()
    try:
        try:
            answer(timer.with_layer, timer.without, rounds=15)
        except Exception as error:  # noqa: BLE001 - the reader's code may raise anything; that is the diagnosis
            raised = error
        left = sys.getprofile()
    finally:
        profiler.disable()
        sys.setprofile(None)
    if raised is None and left is profiler:
        return None
    return ("for a caller that profiles with cProfile (python -m cProfile, cProfile.Profile().enable()), "
            + (f"your function raised {type(raised).__name__}: {str(raised).splitlines()[0][:200]}, and "
               if raised else "") + "afterwards the caller's profiler was "
            + ("off" if left is None else f"replaced by {left!r}")
            + ": the object sys.getprofile() gives for a profile function written in C is not the function itself, "
              "and sys.setprofile takes it for a Python one. A measurement leaves the interpreter's trace and "
              "profile functions as it found them")


def _layer_cost_same(name: str, old, new) -> bool:
    if name == _FROZEN:  # frozen objects that die leave the count: only more frozen, or most unfrozen, is a change
        return old // 2 <= new <= old
    return torch.equal(old, new) if isinstance(old, torch.Tensor) else old == new


def _layer_cost_differing(before: dict, after: dict) -> str | None:
    """Which of the settings `before` names differ `after` (with both values where they say something), or None."""
    names = [name for name in before if not _layer_cost_same(name, before[name], after[name])]
    for named in (_ENVIRONMENT, _LOGGER_LEVELS):  # which variables or loggers, not the whole dict
        if named in names:
            old, new = before[named], after[named]
            which = sorted(name for name in old.keys() | new.keys() if old.get(name) != new.get(name))
            return f"{named} changed: " + ", ".join(
                f"{_logger_named(name) if named == _LOGGER_LEVELS else name} ({_level_named(named, old.get(name))} to "
                f"{_level_named(named, new.get(name))})" for name in which)
    return ", ".join(f"{name} changed" + (f" ({before[name]} to {after[name]})" if name in (
        "garbage collection", "the collector's thresholds", "torch's threads", "the process's priority (os.nice)",
        "the interpreter's thread switch interval (sys.setswitchinterval)",
        "the CPUs the process may run on (os.sched_setaffinity)",
        "the levels of log messages switched off (logging.disable)") else "") for name in names) or None


def _logger_named(name: str) -> str:
    return f"logging.getLogger({name!r})" if name else "the root logger"


def _level_named(setting: str, value) -> str:
    """An environment variable's value, or a logger's level by its name (ERROR for 40); 'unset' for none."""
    import logging

    return "unset" if value is None else logging.getLevelName(value) if setting == _LOGGER_LEVELS else value


def _layer_cost_settings_changed(answer, first: dict) -> str | None:
    """07.layer_cost run by a caller that turned garbage collection off and tuned its thresholds, then by one whose
    timer raises: what the answer left changed, or None (`first`: settings as they were before the check's first
    call, torch's threads and the process's priority).
    (timeit turns the collector off while it times.)"""
    import gc
    import logging
    import os
    import sys
    import tracemalloc

    _watching_cuda_seeds()
    gc.freeze()  # a caller that froze its objects (a server before it forks): they stay frozen
    random.seed(12345)  # and seeded its random numbers: they stay as they are
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(12345)
    thresholds = gc.get_threshold()
    gc.disable()  # a caller that had turned it off, and tuned the thresholds
    gc.set_threshold(50_000, 50, 100)
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if len(cpus) > 1:  # and runs on one CPU of the machine's (taskset, a job scheduler's CPU set)
        os.sched_setaffinity(0, {min(cpus)})
    _set_hooks(_hook, _hook, _hook, _hook)  # and runs under a debugger, coverage or a profiler
    logged = logging.root.manager.disable
    logging.disable(logging.INFO)  # and switched its INFO messages off
    tracemalloc.start(25)  # and traces its memory (hunting a leak: python -X tracemalloc=25)
    traced = bytearray(1 << 12)  # an allocation traced before the measurement
    try:
        before = {**_layer_cost_settings(), **first}  # as the check's first call found them
        timer = FakeTimer(0.4, seed=11)
        answer(timer.with_layer, timer.without, rounds=15)
        changed = _layer_cost_differing(before, _layer_cost_settings())
        if not changed and tracemalloc.get_object_traceback(traced) is None:
            changed = ("Python's memory tracing (tracemalloc) lost what it had traced before the measurement (stopped "
                       "and started again?)")
    finally:
        _set_hooks(None, None, None, None)
        logging.disable(logged)
        tracemalloc.stop()
        _layer_cost_restore(thresholds, first["torch's threads"], before)
        if len(cpus) > 1:
            os.sched_setaffinity(0, cpus)
    if changed:
        return (f"{changed}, for a caller that had turned garbage collection off, set thresholds of its own, runs on "
                "one CPU and under a debugger (trace and profile functions set), with INFO log messages switched off, "
                "tracing its memory (tracemalloc, 25 frames)")
    # A timer that raises at the third round: an operator that fails, then Ctrl-C (KeyboardInterrupt, which is no
    # Exception: an `except Exception` that restores lets it by, settings changed).
    for error, what in ((RuntimeError("the timed call failed"), "a timer raised (its call failed)"),
                        (KeyboardInterrupt(), "a timer was interrupted (Ctrl-C: KeyboardInterrupt)")):
        timer, calls = FakeTimer(0.4, seed=12), []

        def failing():
            calls.append(None)
            if len(calls) == 3:
                raise error
            return timer.with_layer()

        before = _layer_cost_settings()
        try:
            result = answer(failing, timer.without, rounds=15)
        except type(error):
            result = "raised"
        try:
            if result != "raised":
                return (f"{what}, and your function returned {_shown(result)}: the error was swallowed, so a broken "
                        "measurement reads as a result. Let the timer's error through")
            if changed := _layer_cost_differing(before, _layer_cost_settings()):
                return f"{changed}, after {what} (its error passed through your function)"
        finally:
            _layer_cost_restore(thresholds, first["torch's threads"], before)
    return None


def _layer_cost_restore(thresholds: tuple, threads: int, settings: dict) -> None:
    """Back to what the check found, whatever the answer left: the check's own later cases run as usual."""
    import gc
    import logging
    import os
    import sys

    gc.enable()
    gc.set_threshold(*thresholds)
    torch.set_num_threads(threads)
    sys.setswitchinterval(settings["the interpreter's thread switch interval (sys.setswitchinterval)"])
    torch.set_flush_denormal(settings["whether denormal numbers flush to zero (torch.set_flush_denormal)"])
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = settings[
        "cuDNN's benchmark and deterministic flags (torch.backends.cudnn)"]
    torch.backends.mkldnn.enabled, torch.backends.mkldnn.deterministic = settings[_ONEDNN]
    levels = settings[_LOGGER_LEVELS]
    for name in _logger_levels():
        logging.getLogger(name or None).setLevel(levels.get(name, logging.NOTSET))
    enabled, warn_only = settings["torch's deterministic algorithms (torch.use_deterministic_algorithms)"]
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
    torch.set_float32_matmul_precision(settings["float32 matmul precision (torch.set_float32_matmul_precision)"])
    torch.autograd.set_detect_anomaly(settings["autograd's anomaly detection (torch.autograd.set_detect_anomaly)"])
    if (cpus := settings["the CPUs the process may run on (os.sched_setaffinity)"]) is not None:
        os.sched_setaffinity(0, cpus)
    environment = settings[_ENVIRONMENT]
    for name in [name for name in _c_environment() if name not in environment and name != _SET_BY_TORCH]:
        os.environ.pop(name, None)
        os.unsetenv(name)  # set by os.putenv, which os.environ never saw
    for name, value in environment.items():
        os.environ[name] = value  # and os.putenv: a value os.putenv changed is set back too


def _layer_cost_timers_see_the_callers_settings(answer) -> str | None:
    """The settings a measurement leaves as it found them are the caller's while its timers run too: a measurement
    that changes one for its rounds and sets it back times another call than the caller's."""
    import gc
    import os

    def settings():
        return {"deterministic algorithms (torch.use_deterministic_algorithms)":
                    (torch.are_deterministic_algorithms_enabled(),
                     torch.is_deterministic_algorithms_warn_only_enabled()),
                "float32 matmul precision (torch.set_float32_matmul_precision)": torch.get_float32_matmul_precision(),
                "whether denormal numbers flush to zero (torch.set_flush_denormal)": _flushes_denormals(),
                "garbage collection (gc.disable, gc.set_threshold)": (gc.isenabled(), gc.get_threshold()),
                "the CPUs the timing thread may run on (os.sched_setaffinity)": (
                    os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None),
                "the timing thread's priority (os.nice, os.setpriority)": (  # 0: the calling thread's, on Linux
                    os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None)}

    def timer(time):
        def call():
            seen.append(settings())
            return time
        return call

    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")  # a caller's choice, not torch's default: one to keep
    try:
        callers, seen = settings(), []
        answer(timer(1.0), timer(0.6), rounds=5)
    finally:
        torch.set_float32_matmul_precision(precision)
    if differ := [what for what, value in callers.items() if any(found[what] != value for found in seen)]:
        return (f"your timers ran with {differ[0]} other than the caller's (set back afterwards): a setting like it "
                "changes what a call does (torch.empty filling its memory under deterministic algorithms, a matmul's "
                "precision, the collections a call's garbage sets off), so the measurement times another call than "
                "the caller makes. The timers run with every "
                "setting as the caller has it (lesson 07, section 2)")
    return None


def _layer_cost_keeps_timers(layer_cost) -> str | None:
    """Nothing of a measurement outlives it: once it returns and the caller drops its timers, they go, with what they
    refer to (the operator's inputs, a model). Freed by their counts of references, no garbage collection needed."""
    class Inputs:  # what the caller's timers refer to
        pass

    inputs = Inputs()
    alive = weakref.ref(inputs)

    def time_with(inputs=inputs):
        return 1.5

    def time_without(inputs=inputs):
        return 1.0

    layer_cost(time_with, time_without, 9)
    del time_with, time_without, inputs
    if alive() is not None:
        return ("after a measurement returned and the caller dropped its timers, what they refer to (the operator's "
                "inputs, a model) is still alive: something your file keeps holds the timers (a history of "
                "measurements?), so every measurement's inputs stay in memory for the life of the process. A "
                "measurement keeps nothing once it returns")
    # And once a timer raised: an error kept (for a post-mortem) keeps its traceback, whose frames hold the timers.
    inputs, calls = Inputs(), []
    alive = weakref.ref(inputs)

    def failing(inputs=inputs):
        calls.append(None)
        if len(calls) == 3:
            raise RuntimeError("the timed call failed")
        return 1.5

    def time_without(inputs=inputs):
        return 1.0

    try:
        layer_cost(failing, time_without, 9)
    except RuntimeError:
        pass
    del failing, time_without, inputs
    if alive() is None:
        return None
    return ("after a measurement whose timer raised, once the caller had handled the error and dropped its timers, "
            "what they refer to (the operator's inputs, a model) is still alive: something your file keeps holds the "
            "timers (the error, kept for later? its traceback holds the frames of the calls it went through, and "
            "their variables). A measurement keeps nothing once it is over, a failed one too")


def _held_by(module) -> int:
    """How many objects the reader's module holds through its variables and the lists, tuples, dicts, sets and deques
    in them (functions, classes and modules aside: what the file defines, not what its calls keep)."""
    import collections
    import types

    seen, stack = set(), [value for name, value in vars(module).items() if not name.startswith("__")]
    while stack:
        value = stack.pop()
        skipped = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)
        if id(value) in seen or isinstance(value, skipped):
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            stack.extend([*value.keys(), *value.values()])
        elif isinstance(value, (list, tuple, set, frozenset, collections.deque)):
            stack.extend(value)
    return len(seen)


def _layer_cost_keeps_measurements(layer_cost, module) -> str | None:
    """Nor what it measured: five more measurements leave the file's variables holding no more than before."""
    def measure():
        layer_cost(lambda: 1.5, lambda: 1.0, 9)

    measure()  # what a first call sets up once (a cache of its own) is not a measurement kept
    before = _held_by(module)
    for _ in range(5):
        measure()
    if (grown := _held_by(module) - before) <= 0:
        return None
    return (f"after five more measurements, your file's variables hold {grown} more objects than before them: "
            "something of each measurement is kept (a history of differences or results?), so the process's memory "
            "grows with every measurement for as long as it runs, and two threads measuring at once add to one "
            "collection. A measurement keeps nothing once it returns")


@exercise("07.layer_cost", "hard")
def layer_cost(path: Path) -> Result:
    _watching_freezes()
    imported = _layer_cost_settings()
    module = load_python(path)
    answer = module.layer_cost
    if changed := _layer_cost_differing(imported, _layer_cost_settings()):
        return Result(False, f"importing your file changed the process's settings: {changed}. A measurement, and the "
                             "file that holds it, leave the process as they found it")
    interop = torch.get_num_interop_threads()  # compared at the end: its default follows the CPUs the process may use
    first = {name: value for name, value in _layer_cost_settings().items()  # before the first call, as the caller had
             if name in _LAYER_COST_FIRST}
    if wrong := _layer_cost_watchdog_kept(answer):  # first: the runner's watchdog is armed until a call cancels it
        return Result(False, wrong)
    problems, measured = [], []
    # A threshold of the reader's own, a fixed number of µs, is caught by two machines: a quiet one where 0.02 µs is a
    # cost, and a noisy one where nothing is, though the median difference is 0.26 µs (seed 6; its first quartile is
    # below zero). 16 rounds, an even number, have no middle difference: their median lies between two.
    for what, timer, cost, rounds in [
            ("a layer of 0.40 µs on a steady machine", FakeTimer(0.4), 0.4, 15),
            ("a layer of 0.40 µs on a machine that slows down as it runs", FakeTimer(0.4, drift=0.04), 0.4, 15),
            ("a layer of 0.40 µs, with a spike in one call of 16", FakeTimer(0.4, spikes=3), 0.4, 15),
            ("a layer of 0.40 µs, with a spike in another call of 16 (of the other side)", FakeTimer(0.4, spikes=2),
             0.4, 15),
            ("a layer of 0.02 µs on a quiet machine (noise of 0.002 µs)", FakeTimer(0.02, noise=0.002), 0.02, 15),
            ("a layer of 5 ns (0.005 µs, as lesson 07 times C++ calls) on a very quiet machine (noise of 0.0005 µs)",
             FakeTimer(0.005, noise=0.0005), 0.005, 15),
            ("no layer at all: the same call twice", FakeTimer(0.0), None, 15),
            ("no layer at all, on a noisy machine (noise of 0.3 µs)", FakeTimer(0.0, noise=0.3, seed=6), None, 15),
            ("no layer at all, timed in whole steps of 0.125 µs (most differences exactly 0)",
             FakeTimer(0.0, step=0.125), None, 15),
            ("no layer at all, on a machine where the second call of a round runs 0.30 µs faster (a cache the first "
             "warms), whichever side it times", FakeTimer(0.0, second_faster=0.3), None, 15),
            ("the same machine, over 9 rounds (lesson 07's count)", FakeTimer(0.0, second_faster=0.3, seed=5), None,
             9),
            ("a layer of 0.40 µs on a steady machine, over 16 rounds", FakeTimer(0.4, seed=8), 0.4, 16),
            ("a layer of 0.40 µs on a machine where the second call of a round runs faster, by 0.60 µs at first and by "
             "nothing once 30 calls are made (a cache that stays warm)",
             FakeTimer(0.4, second_faster=0.6, fading_over=30, seed=13), 0.4, 15),
            # Last, in the order they came: the cases above draw the same numbers as before (an answer's own random
            # module draws too).
            ("calls 0.50 µs faster with the layer than without, every round (a layer adds work: the measurement, not "
             "the layer, is off)", FakeTimer(-0.5, seed=14), None, 15),
            ("a layer of 0.07 µs, timed in whole steps of 0.125 µs (more than half of the differences one step, the "
             "rest 0: the first quartile is 0, not above it)", FakeTimer(0.07, noise=0.02, seed=9, step=0.125), None,
             15),
            ("a layer of 0.40 µs on a machine where the second call of a round runs faster, by nothing at first and by "
             "0.60 µs once 30 calls are made (a cache that warms as the machine runs)",
             FakeTimer(0.4, second_faster=0.6, growing_over=30, seed=16), 0.4, 15),
            # Below a nanosecond, and still clear of the noise: a floor of the reader's own, in ns, is not the rule.
            ("a layer of 0.2 ns (0.0002 µs: a flag read) timed by timers that each average many calls (noise of "
             "0.00002 µs)", FakeTimer(0.0002, noise=0.00002, seed=18), 0.0002, 15),
            ("a layer of 0.01 ns (0.00001 µs) timed by timers that each average a great many calls (noise of "
             "0.000001 µs): still clear of the noise", FakeTimer(0.00001, noise=0.000001, seed=19), 0.00001, 15)]:
        result = answer(timer.with_layer, timer.without, rounds=rounds)
        measured.append((what, timer, rounds))
        made = {layer: sum(made_with == layer for made_with, _ in timer.calls) for layer in (True, False)}
        if min(made.values()) < rounds:
            problems.append(f"{what}: you called time_with() {made[True]} and time_without() {made[False]} times, "
                            f"for {rounds} rounds: a median and quartiles over {rounds} rounds need a difference "
                            "from each round")
            continue
        if max(made.values()) > rounds + 3:  # a warm-up call or two aside
            problems.append(f"{what}: you called time_with() {made[True]} and time_without() {made[False]} times, "
                            f"for {rounds} rounds: a round times each side once, and its difference is one sample")
            continue
        if cost is None:
            if result is not None:
                problems.append(f"{what}: you report {_shown(result)}; " + (
                    "the differences lie below zero: lesson 07 calls a difference a cost only where its whole "
                    "interquartile range lies above zero, so report None" if timer.cost < 0 else
                    "the difference is within the noise, so report None"))
                firsts = {timer.calls[i][0] for i in range(0, len(timer.calls), 2)}
                if timer.second_faster and len(firsts) == 1:
                    problems[-1] += (f"; every round timed the call {'with' if firsts.pop() else 'without'} the layer "
                                     "first, so what going second does lands in every difference")
            continue
        order = timer.order()
        if result is None:
            problems.append(f"{what}: you report None (within noise); the cost is there in every round")
        elif not (isinstance(result, tuple) and len(result) == 3):
            problems.append(f"{what}: you report {_shown(result)}, not a tuple (median, first quartile, third "
                            "quartile)")
        elif not abs(result[0] - cost) < cost / 4:
            firsts = [layer for layer, _ in timer.calls][-2 * rounds::2]
            if timer.second_faster and len(set(firsts)) == 1:
                why = (f"; every round timed the call {'with' if firsts[0] else 'without'} the layer first, so what "
                       "going second does lands in every difference")
            elif timer.fading_over and sum(a != b for a, b in zip(firsts, firsts[1:])) < rounds - 1:
                why = ("; your rounds take one order in runs (not reversed every other round), so the order follows "
                       "the time, and what going second does, which changes as the machine runs, lands in the "
                       "differences")
            else:
                why = "" if order else "; a statistic that one spike can move is the wrong one"
            problems.append(f"{what}: you report a median of {result[0]:.3f} µs{why}")
        elif result[1] <= result[0] <= result[2]:
            if not (wrong := _not_from_the_rounds(result, timer.differences(rounds))):
                continue
            problems.append(f"{what}: {wrong}")
        elif not _not_from_the_rounds((result[1], result[0], result[2]), timer.differences(rounds)):
            problems.append(f"{what}: {_shown(result)} reads as (first quartile, median, third quartile), not "
                            "(median, first quartile, third quartile)")
        else:
            which = "first quartile is above" if result[1] > result[0] else "third quartile is below"
            problems.append(f"{what}: in {_shown(result)}, the {which} the median: these are not the median and "
                            "quartiles of one set of numbers")
        if order and timer.drift:
            problems[-1] += f"; {order}, so the machine's drift lands in the difference"
    if not problems:  # each side first in half the rounds, in every measurement: chance does not balance them
        problems += [f"{what}: {unbalanced}" for what, timer, rounds in measured
                     if (unbalanced := timer.unbalanced(rounds))][:1]
    if problems:
        return Result(False, "\n".join(problems) + "\nLook again at lesson 07, section 2: how a cost is measured, and "
                                                   "when it is called one.")
    # The same two timers again, after the layer changed (a second build, another dtype): measured anew. The same
    # function objects both times, as a caller that keeps its timers passes them.
    timer = FakeTimer(0.4, seed=9)
    with_layer, without = timer.with_layer, timer.without
    answer(with_layer, without, rounds=15)
    timer.cost = 1.2
    again = answer(with_layer, without, rounds=15)
    if not (isinstance(again, tuple) and abs(again[0] - 1.2) < 0.3):
        return Result(False, f"the same two timers, called again after the layer's cost went from 0.40 to 1.20 µs: you "
                             f"report {_shown(again)}: a result kept from the first call. Each call measures")
    # A layer of 0.10 µs, the calls without it 1 µs slower in 4 rounds of 16 (a busy moment): the first quartile of the
    # differences lies below zero by most definitions, at the fifth smallest (0.10) by one; a cost, where one is
    # reported, is one whose own interquartile range lies above zero.
    # Then 2 rounds of 9 so: the first quartile lies above zero by the inclusive definition (the third smallest
    # difference) and Tukey's hinges, below it by the exclusive one (between the second and the third): either
    # verdict stands, where the quartiles reported are the ones that decided it.
    for busy_rounds, every in ((16, 4), (9, 5)):
        timer = FakeTimer(0.1, noise=0.005, slow_without=(every, 1.0), seed=17)
        busy = answer(timer.with_layer, timer.without, rounds=busy_rounds)
        if isinstance(busy, tuple) and len(busy) == 3 and not busy[1] > 0:
            return Result(False, f"a layer of 0.10 µs, the calls without it 1 µs slower in {-(-busy_rounds // every)} "
                                 f"rounds of {busy_rounds} (a busy moment): you report {_shown(busy)}, a cost whose "
                                 "own first quartile is not above zero: lesson 07 calls a difference a cost only where "
                                 "its whole interquartile range lies above zero, by the quartiles it reports.\nLook "
                                 "again at lesson 07, section 2: how a cost is measured, and when it is called one.")
    # Timers that read the calling thread's state, as a real call does (an autocast region, a guard, grad mode): a
    # layer that exists only inside the caller's autocast region.
    timer = FakeTimer(0.4, seed=10)

    def convolution_flags():  # which convolution kernels a call runs (cuDNN's on a GPU, oneDNN's on the CPU)
        cudnn, onednn = torch.backends.cudnn, torch.backends.mkldnn
        return (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32, onednn.enabled,
                onednn.deterministic)

    callers_convolutions, callers_dtype = convolution_flags(), torch.get_default_dtype()
    callers_fallback = torch._C._get_autograd_fallback_mode()  # what an operator without autograd kernel costs
    # How many threads the call may use, and how often Python lets another thread run: a layer's work in parallel,
    # and the caller's other threads, as the caller has them.
    callers_threads, callers_switch = torch.get_num_threads(), sys.getswitchinterval()

    from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

    class Recording(TorchDispatchMode):  # the caller's recorder or logger: a mode that hands each call on
        seen: list = []  # what it recorded: the made-up timers call no operator, so any is the measurement's own

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(func)
            return func(*args, **(kwargs or {}))

    recording = Recording()

    def in_the_region(time):  # 5 µs more where the call runs otherwise than the caller makes it
        return lambda: time() + (0.0 if torch.is_autocast_enabled("cpu") and torch.is_grad_enabled()
                                 and not torch.is_inference_mode_enabled() and torch.is_anomaly_enabled()
                                 and convolution_flags() == callers_convolutions
                                 and torch.get_default_dtype() == callers_dtype
                                 and recording in _get_current_dispatch_mode_stack()
                                 and torch.is_autocast_cache_enabled() and torch._C._is_torch_function_enabled()
                                 and torch._C._get_autograd_fallback_mode() == callers_fallback
                                 and torch.get_num_threads() == callers_threads
                                 and sys.getswitchinterval() == callers_switch else 5.0)

    with torch.autocast("cpu"), torch.autograd.set_detect_anomaly(True), recording:  # a caller debugging its NaNs
        measured = answer(in_the_region(timer.with_layer), timer.without, rounds=15)
    if not (isinstance(measured, tuple) and abs(measured[0] - 0.4) < 0.1):
        return Result(False, f"called inside an autocast region with anomaly detection on, with a timer whose call "
                             f"runs differently outside them: you report {_shown(measured)}, where the layer costs "
                             "0.40 µs: the timers ran where the caller's state (the region, grad mode, anomaly "
                             "detection, cuDNN's and oneDNN's flags, the default dtype, a TorchDispatchMode, "
                             "autocast's cast cache, __torch_function__, the autograd fallback's mode, guards) is not, "
                             "in another thread, or with a setting changed (torch's threads, Python's thread switch "
                             "interval)? A timer times a call as the caller would make it, on the caller's thread")
    changed = _layer_cost_settings_changed(answer, first)
    if changed and changed.startswith(("a timer raised", "a timer was interrupted")):
        return Result(False, changed)
    if changed:
        return Result(False, f"after your function ran, {changed}: a measurement leaves process-wide settings as it "
                             "found them, even if it changes them while it times, and even when a timer raises (what "
                             "timeit does to garbage collection, it undoes in a finally)")
    if wrong := (_layer_cost_keeps_warn_only(answer) or _layer_cost_warning_as_error(answer)
                 or _layer_cost_keeps_flush_denormal(answer) or _layer_cost_keeps_c_profiler(answer)
                 or _layer_cost_thread_started_meanwhile(answer) or _layer_cost_threads_left(answer)
                 or _layer_cost_collects(answer)):
        return Result(False, wrong)
    if torch.get_num_interop_threads() != interop:
        return Result(False, f"after your function ran, torch's inter-op threads went from {interop} to "
                             f"{torch.get_num_interop_threads()} (torch.set_num_interop_threads), a setting torch "
                             "takes once per process and for good: a measurement leaves process-wide settings as it "
                             "found them, and this one cannot be set back")
    if recording.seen:  # after the settings: an answer that changes one may run operators too
        shown = ", ".join(dict.fromkeys(str(func) for func in recording.seen[:6]))
        return Result(False, f"called inside the caller's TorchDispatchMode (a logger that records the operators the "
                             f"caller runs), your function ran {len(recording.seen)} torch operators of its own "
                             f"({shown}): the caller's mode records them as its own, and under a FakeTensorMode, or in "
                             f"a `with torch.device(\"meta\")` block, they have no values to compute with. The timers "
                             "run under the caller's modes; a measurement's own arithmetic (its order of sides, its "
                             "statistics) is not the caller's work")
    # Last: two threads at once may leave each other's settings behind.
    if wrong := (_on_the_clock(_layer_cost_in_threads, answer, "two measurements at once, in two threads taking turns")
                 or _on_the_clock(_layer_cost_nested, answer, "a measurement inside a timer of another's")
                 or _layer_cost_timers_see_the_callers_settings(answer)
                 or _on_the_clock(_layer_cost_nested_at_every_call, answer,
                                  "a measurement inside every call of another's timer")
                 or _layer_cost_keeps_timers(answer) or _layer_cost_keeps_measurements(answer, module)):
        return Result(False, wrong)
    return Result(True, "right on steady, drifting, spiky, quiet and noisy machines, over an odd and an even number of "
                        "rounds, silent on noise, a coarse timer's included, measured anew on each call, on the "
                        "caller's thread")


# ---------------------------------------------------------------------------------------------
# 08: shipping


_AOTI_CALLS = ("lesson 08's model on 5 rows", "a second model (other weights) on 3 rows")


# What the fresh Python's process_state() reads, in its order: the process-wide settings run() and its import leave.
_SERVER_SETTINGS = ("number of threads (torch.set_num_threads)",
                    "number of inter-op threads (torch.set_num_interop_threads, which cannot be set again once work "
                    "ran)",
                    "flushing of denormal numbers to zero (torch.set_flush_denormal)",
                    "float32 matmul precision (torch.set_float32_matmul_precision)",
                    "deterministic algorithms (torch.use_deterministic_algorithms)",
                    "default dtype (torch.set_default_dtype)", "default device (torch.set_default_device)",
                    "working directory (os.chdir)", "file creation mask (os.umask)")


# 4 MiB: a package's first bytes, the same in every copy of one fill (_padded_package). A package starts with its
# generated code, the same for two releases of one architecture, and a model of a few hundred layers has a MiB of it.
_LEAD = 1 << 22


# The CRC-32 and Adler-32 of every file _padded_package writes, whole: a checksum of 32 bits tells no two files apart
# for certain (by chance one pair in 4e9; on purpose, a few bytes chosen give any file any checksum).
_SHARED_CRC32, _SHARED_ADLER32 = 0x0B0E5EED, 0x5EED0B0E
_ADLER = 65521  # Adler-32's modulus
_SWAPS, _ADLER_BYTES = 64, 1024  # the two parts of the archive's comment _checksummed_comment chooses


def _crc_changes_chosen(rows: list[tuple[int, int]], want: int) -> int:
    """Which of some changes to a message, together, change its CRC-32 by `want`: `rows` holds (what change n alone
    changes in the CRC, 1 << n), and the answer is the bits n of the changes to make. CRC-32 is affine in the bits, so
    this solves 32 linear equations over GF(2), one per bit of the CRC, by Gaussian elimination."""
    chosen = 0
    for high in reversed(range(32)):  # from the CRC's highest bit down
        pivot = next((row for row in rows if row[0] >> high & 1), None)
        if pivot is None:
            continue
        rows = [(crc ^ pivot[0], which ^ pivot[1]) if crc >> high & 1 else (crc, which)
                for crc, which in rows if (crc, which) != pivot]
        if want >> high & 1:
            want, chosen = want ^ pivot[0], chosen ^ pivot[1]
    assert want == 0, "the changes span the CRC's 32 bits"
    return chosen


def _checksummed_comment(head: bytes) -> bytes:
    """The bytes that, after `head`, make the whole's CRC-32 _SHARED_CRC32 and its Adler-32 _SHARED_ADLER32.

    Adler-32 is two sums modulo 65521: A, of the bytes, and B, of each byte times its distance from the end. The last
    _ADLER_BYTES bytes set both: 65521 units more than A lacks, packed at the end, then single units moved away from
    the end until B is right too (each step away adds 1 to B, nothing to A). CRC-32 is affine in the bits: the first
    3 * _SWAPS bytes are triples 00 02 00, each of which may become 01 00 01 (+1, -2, +1: A and B stay), and the
    triples to change solve 32 linear equations over GF(2), one per bit of the CRC."""
    import zlib

    def adler(data: bytes) -> tuple[int, int]:
        value = zlib.adler32(data, zlib.adler32(head))
        return value & 0xFFFF, value >> 16

    swaps = bytearray(b"\0\2\0" * _SWAPS)
    units = [0] * (_ADLER_BYTES + 1)  # units[r]: the value of the byte r from the end
    a, b = adler(bytes(swaps) + bytes(_ADLER_BYTES))
    missing = ((_SHARED_ADLER32 & 0xFFFF) - a) % _ADLER + _ADLER
    for distance in range(1, _ADLER_BYTES + 1):
        units[distance] = min(255, missing)
        missing -= units[distance]
    top = max(distance for distance in range(1, _ADLER_BYTES + 1) if units[distance])
    lacking = ((_SHARED_ADLER32 >> 16) - b - sum(r * unit for r, unit in enumerate(units))) % _ADLER
    while lacking:
        while not units[top]:
            top -= 1
        to = min(_ADLER_BYTES, top + lacking)
        while units[to] == 255:
            to -= 1
        units[top], units[to], lacking = units[top] - 1, units[to] + 1, lacking - (to - top)
    tail = bytes(reversed(units[1:]))
    assert adler(bytes(swaps) + tail) == (_SHARED_ADLER32 & 0xFFFF, _SHARED_ADLER32 >> 16)
    crc_head = zlib.crc32(head)
    base = zlib.crc32(bytes(swaps) + tail, crc_head)
    rows = []  # (what swapping triple n changes in the CRC, 1 << n)
    for n in range(_SWAPS):
        swapped = bytearray(swaps)
        swapped[3 * n:3 * n + 3] = b"\1\0\1"
        rows.append((zlib.crc32(bytes(swapped) + tail, crc_head) ^ base, 1 << n))
    chosen = _crc_changes_chosen(rows, _SHARED_CRC32 ^ base)
    for n in range(_SWAPS):
        if chosen >> n & 1:
            swaps[3 * n:3 * n + 3] = b"\1\0\1"
    comment = bytes(swaps) + tail
    assert zlib.crc32(comment, crc_head) == _SHARED_CRC32 and adler(comment) == (_SHARED_ADLER32 & 0xFFFF,
                                                                                  _SHARED_ADLER32 >> 16)
    return comment


def _padded_package(package: Path, to: Path, size: int, fill: bytes = b"\0") -> None:
    """A copy of an AOTInductor package, `size` bytes long, that the loader runs as the original: its entries in a
    folder of one name, "release" (a package's files are in a folder named as it was saved; releases of one model are
    often saved under one name), and two entries the loader never reads, of `fill` bytes: one before the package's own
    (_LEAD bytes, the same in every copy of one fill: the heads of two copies tell them apart no more than those of two
    releases of one large model, whose generated code comes first) and one after them, as long as makes up `size`.
    The archive's comment, its last bytes, makes the file's CRC-32 _SHARED_CRC32 and its Adler-32 _SHARED_ADLER32.

    Each copy is made once, in lesson 08's build folder, named by the package's contents, `size` and `fill`, and
    copied from there: a check deploys sixteen, and every mistake of 08.load_before_aoti runs the check."""
    import hashlib
    import os
    import shutil
    import zipfile

    made = shipping.SHIPPING / "padded" / (f"{hashlib.sha256(package.read_bytes()).hexdigest()[:16]}_{size}_"
                                           f"{fill.hex()}.pt2")
    if not made.exists():
        made.parent.mkdir(parents=True, exist_ok=True)
        scratch = made.with_name(f"{made.name}.{os.getpid()}")  # then renamed: a check beside it sees all or nothing

        def entry(name: str) -> zipfile.ZipInfo:  # of a fixed time: two copies' entries alike, byte for byte
            return zipfile.ZipInfo(f"release/{name}", date_time=(1980, 1, 1, 0, 0, 0))

        def copy_with_padding(length: int) -> int:
            with zipfile.ZipFile(package) as original, zipfile.ZipFile(scratch, "w", zipfile.ZIP_STORED) as archive:
                archive.writestr(entry("extra/lead"), fill * _LEAD)
                for file in original.infolist():
                    archive.writestr(entry(file.filename.split("/", 1)[1]), original.read(file))
                archive.writestr(entry("extra/padding"), fill * length)
                archive.comment = bytes(3 * _SWAPS + _ADLER_BYTES)
            return scratch.stat().st_size

        copy_with_padding(size - copy_with_padding(0))
        head = scratch.read_bytes()[:-(3 * _SWAPS + _ADLER_BYTES)]
        scratch.write_bytes(head + _checksummed_comment(head))
        os.replace(scratch, made)
    shutil.copyfile(made, to)


def _weights_changed_in_the_middle(padded: Path, model: torch.nn.Module, to: Path) -> torch.nn.Module:
    """A copy of `padded` (a _padded_package of `model`'s package) whose model's first layer has its first row doubled,
    and the model it runs. The weights lie, uncompressed, in the middle of the package's library; the change keeps the
    library's CRC-32, and so the whole file's and the zip directory at its end: the lowest bit of some of 48 of the
    layer's later weights (a change of one unit in the last place) is flipped to make up for it (_crc_changes_chosen
    picks which).
    Size, head, tail and CRC-32 alike: only the middle tells the two files apart."""
    import copy
    import struct
    import zlib

    original = padded.read_bytes()
    data = bytearray(original)
    weight = model.w1.detach().contiguous()  # (32, 64), float32: the first layer's
    start = data.find(weight.numpy().tobytes())
    assert start > _LEAD and data.find(weight.numpy().tobytes(), start + 1) == -1, "the weights, once, in the middle"
    row = weight.shape[1] * 4
    first_row = struct.unpack_from(f"<{weight.shape[1]}f", data, start)
    struct.pack_into(f"<{weight.shape[1]}f", data, start, *(2 * value for value in first_row))
    candidates = [start + 16 * row + 4 * n for n in range(48)]  # the lowest byte of 48 weights of later rows
    base = zlib.crc32(bytes(data[start:]))  # of what follows the unchanged head: equal only if the whole's is
    rows = []
    for n, at in enumerate(candidates):
        data[at] ^= 1
        rows.append((zlib.crc32(bytes(data[start:])) ^ base, 1 << n))
        data[at] ^= 1
    chosen = _crc_changes_chosen(rows, zlib.crc32(original[start:]) ^ base)
    for n, at in enumerate(candidates):
        if chosen >> n & 1:
            data[at] ^= 1
    assert zlib.crc32(bytes(data)) == zlib.crc32(original) and len(data) == len(original)
    to.parent.mkdir(parents=True, exist_ok=True)
    to.write_bytes(bytes(data))
    changed = copy.deepcopy(model)
    with torch.no_grad():
        changed.w1.copy_(torch.frombuffer(bytes(data[start:start + weight.numel() * 4]),
                                          dtype=torch.float32).view_as(weight))
    return changed


_LOADED_ONCE = "A file's model is loaded once, and again only when its contents change."


def _environment_changes_said(variables: dict, around: str) -> str:
    """08.load_before_aoti's words for environment variables that `around` (the call, the import) changed: name ->
    [before, after], None where unset."""
    return "; ".join(f"{name} {'not set' if before is None else repr(before)} before {around}, "
                     f"{'not set' if after is None else repr(after)} after it" for name, (before, after) in
                     variables.items())


def _python_changed(what: str) -> str:
    """08.load_before_aoti's diagnosis for calls after which Python's warning filters or loggers' levels differ."""
    return (f"in the fresh Python, after the calls to run(), {what} differed from what they were before your file was "
            "imported: a setting of the whole process, which decides which of the caller's warnings and log records "
            "show (and torch's: the warnings of deterministic algorithms' warn-only mode among them) in everything it "
            "runs after. run() changes nothing but its output")


def _from_the_build(libraries: list[str]) -> str:
    """08.load_before_aoti's diagnosis for libraries loaded from the workbook's build folder."""
    from helpers import paths

    shown = [f"build/{Path(library).resolve().relative_to(paths.BUILD.resolve())}" for library in libraries]
    more = f" (and {len(shown) - 1} more)" if len(shown) > 1 else ""
    return (f"in the fresh Python, your code loaded {shown[0]}{more} from the workbook's build folder: a production "
            "machine has none, only the package where pip installed it (here, in a folder of its own)")


def _mapped_more(what: str, grew: int, why: str) -> str:
    """08.load_before_aoti's diagnosis for calls after which more compiled models' libraries stay mapped."""
    return (f"in the fresh Python, {what}: {grew} more compiled models' libraries stayed mapped in the process: "
            f"{why}")


@exercise("08.load_before_aoti", "medium")
def load_before_aoti(path: Path) -> Result:
    import json
    import os
    import shutil
    import subprocess
    import tempfile

    from helpers import paths

    from .toolkit import WATCHDOG

    now_doing("building the wheel, exporting the models and writing the releases the fresh Python is given")
    installed = shipping.install(shipping.build_wheel())
    build.load_all("schemas", "cpu", "meta", "composite")
    generator = torch.Generator().manual_seed(1)
    models = [shipping.mlp_package(seed) for seed in range(len(_AOTI_CALLS))]
    hint = "\nLook again at lesson 08, 'From a fresh Python'"
    # The package where pip would put it on another machine: in a folder of its own, not where lesson 08 put it, so
    # that a library loaded by its path in the workbook's build folder is told apart from the installed one's.
    with tempfile.TemporaryDirectory(prefix="workbook_08_") as elsewhere:
        site = shutil.copytree(installed, Path(elsewhere) / "site-packages")
        calls = []  # (the .pt2 file, x, every model's output for x): a wrong output may be another model's
        # Both files of one size (two releases of one architecture often are), of the same first 4 MiB and of one
        # CRC-32 and Adler-32, so that neither the name, the size, the head nor a checksum of 32 bits tells one
        # release from the other.
        size = max(model_pt2.stat().st_size for _, model_pt2 in models) + _LEAD + 4096
        for n, ((_, model_pt2), rows) in enumerate(zip(models, (5, 3))):
            # Each model as a release of it is deployed: v1/model.pt2, v2/model.pt2, one file name.
            deployed = Path(elsewhere) / f"v{n + 1}" / "model.pt2"
            deployed.parent.mkdir()
            _padded_package(model_pt2, deployed, size)
            if n == 1:  # a hard link to it, made before any load: another name for the same file (cp -al deploys so)
                os.link(deployed, deployed.parent / "same_file.pt2")
            x = torch.randn(rows, 32, generator=generator)
            with torch.no_grad():
                calls.append((str(deployed), x, [model(x) for model, _ in models]))
        torch.save(calls, Path(elsewhere) / "calls.pt")
        # Each call's input again, its middle row changed (neither the first nor the last), and the models' outputs.
        middles = []
        for model_pt2, x, _ in calls:
            middle = x.clone()
            middle[1] += 1.0
            with torch.no_grad():
                middles.append((middle, [model(middle) for model, _ in models]))
        torch.save(middles, Path(elsewhere) / "middles.pt")
        # Batches the package takes that no other call sends, with the first model's outputs: its fewest rows (2,
        # AOTInductor's lower bound for a dynamic size, though export's range starts at 0) and more than any other.
        with torch.no_grad():
            batches = [(x, models[0][0](x)) for x in (torch.randn(rows, 32, generator=generator) for rows in (2, 300))]
        torch.save(batches, Path(elsewhere) / "batches.pt")
        # The two files of one time too, as tar, unzip, cp -p and rsync -t deploy them, their metadata changed in one
        # tick of the file system's clock: size, modification and change times alike; only the file (its inode) differs.
        stamp = Path(calls[0][0]).stat().st_mtime_ns
        for _ in range(50):
            for deployed, _, _ in calls:
                os.utime(deployed, ns=(stamp, stamp))
            if len({Path(deployed).stat().st_ctime_ns for deployed, _, _ in calls}) == 1:
                break
        # Four releases more, to deploy over one file in turn: the two models, each twice, every file's contents new.
        releases = [Path(elsewhere) / "releases" / f"r{n}.pt2" for n in range(1, 5)]
        releases[0].parent.mkdir()
        for n, release in enumerate(releases):
            _padded_package(models[n % 2][1], release, size, fill=bytes([n + 1]))
        # Four models more that a server holds: eight in turn, more than a cache sized for the four above.
        held = [Path(elsewhere) / "held" / f"m{n}.pt2" for n in range(1, 5)]
        held[0].parent.mkdir()
        for n, model_file in enumerate(held):
            _padded_package(models[n % 2][1], model_file, size, fill=bytes([n + 11]))
        # Two releases of contents no call has seen, the second deployed while run() loads the first.
        # Two more, the first deployed while run() reads it; one more for a caller of another default dtype.
        racing = [Path(elsewhere) / "racing" / f"r{n}.pt2" for n in range(5)]
        racing[0].parent.mkdir()
        for n, release in enumerate(racing):
            _padded_package(models[n % 2][1], release, size, fill=bytes([n + 21]))
        retiring = Path(elsewhere) / "retiring.pt2"  # a release of its own, to be removed once served
        _padded_package(models[0][1], retiring, size, fill=bytes([31]))
        # A release of the first model whose weights changed, alike but in the middle of its library, deployed
        # over the first: its output for the first call's input.
        changed_release = Path(elsewhere) / "middle"
        changed_release.mkdir()
        _padded_package(models[0][1], changed_release / "before.pt2", size, fill=bytes([41]))
        with torch.no_grad():
            torch.save(_weights_changed_in_the_middle(changed_release / "before.pt2", models[0][0],
                                                      changed_release / "after.pt2")(calls[0][1]),
                       changed_release / "output.pt")
        import textwrap

        environment_reader = textwrap.indent(_C_ENVIRONMENT_SOURCE, " " * 12).lstrip()
        # The runner's limit on the reader's code, in processor time as the runner counts it (a loaded machine, a test
        # run's workers beside it, slows the clock, not the work): torch's import is in it too.
        limit = WATCHDOG.seconds or 600
        program = f"""
            import os, signal

            def over_time(signum, frame):
                print("OVER TIME", flush=True)
                os._exit(0)

            signal.signal(signal.SIGPROF, over_time)
            signal.setitimer(signal.ITIMER_PROF, {limit!r})

            import contextlib, json, shutil, sys, types, torch, weakref

            {environment_reader}

            def environment_changes(before, now):  # name -> [before, now] where they differ (torch's own setting aside)
                return {{name: [before.get(name), now.get(name)] for name in sorted({{*before, *now}})
                        if before.get(name) != now.get(name)
                        and not (name == {_SET_BY_TORCH!r} and name not in before)}}

            def stop_unless(right):  # the check reports the first wrong step: the steps after it would not change that
                if not right:
                    print("STOPPED", flush=True)
                    sys.exit(0)

            os.environ["AOTI_RUNTIME_CHECK_INPUTS"] = "1"  # as lesson 08 advises where inputs come from outside
            # Where AOTInductor's loader extracts each package it loads (a folder of 2 MB that it leaves behind):
            # inside the check's own folder, removed with it, not the machine's /tmp.
            os.environ["TMPDIR"] = os.path.join({str(elsewhere)!r}, "tmp")
            os.makedirs(os.environ["TMPDIR"])
            import tempfile
            tempfile.tempdir = os.environ["TMPDIR"]  # Python's tempfile too, which may have read TMPDIR already
            # And a home folder of its own, where a cache of the reader's (~/.cache) would go.
            os.environ["HOME"] = os.path.join({str(elsewhere)!r}, "home")
            os.environ["XDG_CACHE_HOME"] = os.path.join(os.environ["HOME"], ".cache")
            os.makedirs(os.environ["XDG_CACHE_HOME"])

            def temporary_bytes():  # what lies in the temporary and home folders beside the loader's own extractions
                return sum(os.path.getsize(os.path.join(folder, name))
                           for top in (tempfile.tempdir, os.environ["HOME"])
                           for folder, _, names in os.walk(top) for name in names
                           if not os.path.relpath(folder, top).startswith(("aotinductor_", "torchinductor_"))
                           and not os.path.islink(os.path.join(folder, name)))

            torch.set_num_threads(max(2, torch.get_num_threads()))  # two at least: a run() that sets one shows
            answer = types.ModuleType("answer")  # from the file's text, as toolkit.load_python loads it
            answer.__file__ = {str(path)!r}
            def process_state():  # the settings _SERVER_SETTINGS names, in its order (denormal flushing has no getter)
                mask = os.umask(0o022)  # read by setting it (there is no getter), and set back at once
                os.umask(mask)
                return [torch.get_num_threads(), torch.get_num_interop_threads(),
                        (torch.tensor([1e-40]) * 1.0).item() == 0.0, torch.get_float32_matmul_precision(),
                        torch.are_deterministic_algorithms_enabled(), str(torch.get_default_dtype()),
                        str(torch.get_default_device()), os.getcwd(), oct(mask)]

            # The process's clocks, which the check moves on an hour at its last step (a quiet night, in one step).
            import time as clock
            clock_offset = [0]
            for name in ("time", "monotonic", "perf_counter"):
                for suffix, scale in (("", 1), ("_ns", 10**9)):
                    setattr(clock, name + suffix, lambda read=getattr(clock, name + suffix), scale=scale:
                            read() + clock_offset[0] * scale)
            for suffix, scale in (("", 1), ("_ns", 10**9)):
                setattr(clock, "clock_gettime" + suffix, lambda which, read=getattr(clock, "clock_gettime" + suffix),
                        scale=scale: read(which) + clock_offset[0] * scale)
            import datetime as calendar

            class MovedOn(calendar.datetime):  # datetime's clock, moved on with the others
                @classmethod
                def now(cls, tz=None):
                    return super().now(tz) + calendar.timedelta(seconds=clock_offset[0])

                @classmethod
                def utcnow(cls):
                    return super().utcnow() + calendar.timedelta(seconds=clock_offset[0])

                @classmethod
                def today(cls):
                    return cls.now()

            calendar.datetime = MovedOn
            # A file system whose times count whole seconds (ext3's, HFS+'s): two writes within one second look alike
            # by their times, whatever the clock of this machine's file system counts.
            def whole_seconds(stat):
                def coarse(*args, **kwargs):
                    real = stat(*args, **kwargs)
                    seconds = [getattr(real, f"st_{{kind}}time_ns") // 10**9 for kind in "amc"]
                    extra = {{name: getattr(real, name) for name in ("st_blksize", "st_blocks", "st_rdev")}}
                    for kind, second in zip("amc", seconds):
                        extra[f"st_{{kind}}time"], extra[f"st_{{kind}}time_ns"] = float(second), second * 10**9
                    return os.stat_result(tuple(real[:7]) + tuple(seconds), extra)
                return coarse

            folder_stat = os.stat  # the file system's own times, for the folders run() must not write in
            os.stat, os.lstat, os.fstat = whole_seconds(os.stat), whole_seconds(os.lstat), whole_seconds(os.fstat)
            # AOTInductor's loader, which deploys a release over the file it loads once it has read it, when asked:
            # load_package, which torch._inductor.aoti_load_package imports and calls, and which an answer may call
            # itself (by either module's name).
            import torch._inductor.package
            import torch._inductor.package.package
            load_package, deploy_during_load = torch._inductor.package.load_package, []

            # At the last step, the files of many releases of one model, each loaded in an instant: the model behind
            # them is loaded once, and each load of one of them, counted, returns a StandIn for it (1025 real loads take
            # seconds). A load by another way than load_package is a real one, seen in the process's mappings.
            stand_in_for, loads_stood_in = {{}}, [0]
            hold_loads = [0.0]  # seconds each real load waits first (a large model's load, while other threads run)

            class StandIn:
                def __init__(self, model):
                    self.model = model

                def __call__(self, *args, **kwargs):
                    return self.model(*args, **kwargs)

                def __getattr__(self, name):
                    return getattr(self.model, name)

            def models_mapped(kept_only=False):  # the compiled models' libraries the process maps (Linux only)
                if not os.path.exists("/proc/self/maps"):
                    return set()
                # A mapping's path is its sixth field. A model's library stays mapped after the model is dropped,
                # " (deleted)": the model removes the file it extracted, and nothing unmaps it. A model kept maps one
                # not deleted, or one whose model load_package returned is alive still (an answer may remove the
                # folder a load extracted into itself). Each load extracts its library anew, under a path of its own.
                paths = {{line.split(maxsplit=5)[5].strip() for line in python_open("/proc/self/maps")
                         if len(line.split(maxsplit=5)) == 6}}
                if not kept_only:
                    return {{path for path in paths if path.endswith((".wrapper.so", ".wrapper.so (deleted)"))}}
                alive = {{library for model, libraries in models_loaded if model() is not None
                         for library in libraries}}
                return {{path.removesuffix(" (deleted)") for path in paths if path.endswith(".wrapper.so")
                        or path.endswith(".wrapper.so (deleted)") and path.removesuffix(" (deleted)") in alive}}

            models_loaded = []  # (a weak reference to a model load_package loaded, the libraries its load mapped)
            others_files = []  # files made in the temporary folder as each load began, as another process makes them

            def loading(*args, **kwargs):
                if stand_in_for:
                    import hashlib
                    source = args[0] if args else kwargs.get("path")
                    if isinstance(source, (str, os.PathLike)):
                        with python_open(source, "rb") as file:
                            contents = file.read()
                    else:
                        position = source.tell()
                        contents = source.read()
                        source.seek(position)
                    if (model := stand_in_for.get(hashlib.sha256(contents).digest())) is not None:
                        loads_stood_in[0] += 1
                        return StandIn(model)
                if hold_loads[0]:
                    clock.sleep(hold_loads[0])
                # A file another process makes in the temporary folder as the load begins (a compiler's, another
                # server's): the machine's processes share that folder, and a call removes only what it made.
                others_files.append(os.path.join({str(elsewhere)!r}, "tmp", f"another_process_{{len(others_files)}}"))
                python_open(others_files[-1], "w").close()
                mapped = models_mapped()
                model = load_package(*args, **kwargs)
                models_loaded.append((weakref.ref(model), models_mapped() - mapped))
                while deploy_during_load:
                    shutil.copyfile(*deploy_during_load.pop())
                return model

            torch._inductor.package.load_package = torch._inductor.package.package.load_package = loading
            # And Python's open(), which deploys a release over a file once a read of it is closed, when asked.
            import builtins, io
            python_open, deploy_after_read = builtins.open, []

            class ReadThenDeploy:
                def __init__(self, file):
                    self.file = file

                def __getattr__(self, name):
                    return getattr(self.file, name)

                def __iter__(self):
                    return iter(self.file)

                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    self.close()

                def close(self):
                    self.file.close()
                    while deploy_after_read:
                        shutil.copyfile(*deploy_after_read.pop())

            def opening(file, mode="r", *args, **kwargs):
                opened = python_open(file, mode, *args, **kwargs)
                watched = [target for _, target in deploy_after_read]
                if "r" in mode and isinstance(file, (str, os.PathLike)) and os.path.abspath(file) in watched:
                    return ReadThenDeploy(opened)
                return opened

            builtins.open = io.open = opening

            def python_settings():  # what an import or a call could leave behind in Python's machinery: warnings, logs
                import logging, warnings
                # The root's and torch's loggers: those torch's own code configures, and any of theirs set or disabled
                # (a logger that a load makes anew is at its defaults, and not listed).
                levels = {{name or "root": [logger.level, logger.disabled]
                          for name, logger in [("", logging.root), *logging.root.manager.loggerDict.items()]
                          if isinstance(logger, logging.Logger) and name.split(".")[0] in ("", "torch")
                          and (name in ("", "torch", "torch._inductor", "torch.export")
                               or logger.level or logger.disabled)}}
                return {{"Python's warning filters (warnings.filters)": repr(warnings.filters),
                        "Python's warning hooks (warnings.showwarning and formatwarning, as logging.captureWarnings "
                        "replaces them)": repr([warnings.showwarning, warnings.formatwarning]),
                        "the loggers' levels (logging.getLogger(...).setLevel and .disabled, logging.disable)":
                            repr([levels, logging.root.manager.disable])}}

            def from_the_build():  # the libraries the process loaded from the workbook's build folder
                mapped = open("/proc/self/maps").read().split() if os.path.exists("/proc/self/maps") else []
                libraries = {{*torch.ops.loaded_libraries, *(word for word in mapped if ".so" in word)}}
                build = os.path.realpath({str(paths.BUILD)!r}) + os.sep
                return sorted(p for p in libraries if os.path.realpath(p).startswith(build))

            def generators():  # torch's, Python's random module's and numpy's: a caller's seeded draws depend on each
                import hashlib, random
                states = [torch.get_rng_state().numpy().tobytes(), repr(random.getstate()).encode()]
                if "numpy" in sys.modules:
                    legacy = sys.modules["numpy"].random.get_state()
                    states += [legacy[1].tobytes(), repr(legacy[2:]).encode()]
                return hashlib.sha256(b"".join(states)).hexdigest()

            def standard_streams():  # what file descriptors 0, 1 and 2 lead to, and Python's sys.stdin, stdout, stderr
                def file_of(descriptor):
                    try:
                        found = os.fstat(descriptor)
                    except OSError:  # closed
                        return None
                    return [found.st_dev, found.st_ino]
                return [[file_of(n) for n in range(3)], [id(sys.stdin), id(sys.stdout), id(sys.stderr)]]

            found, python_found, random_found = process_state(), python_settings(), generators()
            streams_found = standard_streams()
            environment_found = _c_environment()
            with open({str(path)!r}, "rb") as file:
                exec(compile(file.read(), {str(path)!r}, "exec"), answer.__dict__)
            python_imported = python_settings()
            environment_set = environment_changes(environment_found, _c_environment())
            # run() writes nothing beside the release it is given (a read-only volume, an image's layer): the folder
            # its name gives, and the one it resolves to, keep their times to the nanosecond through the call. And it
            # leaves the process's environment as it found it (a TMPDIR of its own for a load, say).
            given_run, wrote_beside, environment_changed, streams_changed = answer.run, [], [], []
            # And what it makes outside the temporary and home folders (whose growth the steps below measure): every
            # file or folder a call creates through Python (open for writing, os.mkdir: tempfile's, shutil's) is noted
            # by an audit hook, and one still there after the call is reported, then removed (a scratch copy of each
            # release in /var/tmp or /dev/shm fills a disk, or the memory, one load at a time).
            created, inside_run, left_outside = [], [False], []

            def note_created(event, args):
                if not inside_run[0] or event not in ("open", "os.mkdir") or not isinstance(args[0], (str, bytes)):
                    return
                if event == "open" and not (isinstance(args[1], str) and any(c in args[1] for c in "wax+")
                                            or isinstance(args[2], int) and args[2] & (os.O_WRONLY | os.O_RDWR)):
                    return
                name = os.path.abspath(os.fsdecode(args[0]))
                if not os.path.lexists(name) and "__pycache__" not in name.split(os.sep):  # not Python's bytecode
                    created.append(name)

            sys.addaudithook(note_created)
            allowed = [os.path.realpath(tempfile.gettempdir()), os.path.realpath(os.environ["HOME"])]

            def run_watched(model_pt2, x):
                folders = {{os.path.dirname(os.path.abspath(model_pt2)), os.path.dirname(os.path.realpath(model_pt2))}}
                before = {{folder: folder_stat(folder).st_mtime_ns for folder in folders}}
                environment, streams = _c_environment(), standard_streams()
                inside_run[0] = True
                try:
                    return given_run(model_pt2, x)
                finally:
                    inside_run[0] = False
                    left = sorted({{name for name in created if os.path.lexists(name) and not any(
                        os.path.realpath(name).startswith(folder + os.sep) for folder in allowed)}})
                    created.clear()
                    if left and not left_outside:
                        left_outside.append(None)
                        called = os.path.relpath(os.path.abspath(model_pt2), {str(elsewhere)!r})
                        print("LEFT OUTSIDE", json.dumps([called, left]), flush=True)
                    for name in left:  # nothing of it stays behind the check
                        if os.path.isdir(name) and not os.path.islink(name):
                            shutil.rmtree(name, ignore_errors=True)
                        else:
                            with contextlib.suppress(OSError):
                                os.remove(name)
                    if (now := standard_streams()) != streams and not streams_changed:
                        streams_changed.append(None)
                        called = os.path.relpath(os.path.abspath(model_pt2), {str(elsewhere)!r})
                        which = [name for name, was, is_now in zip(
                            ("file descriptor 0 (standard input)", "file descriptor 1 (standard output)",
                             "file descriptor 2 (standard error)", "sys.stdin", "sys.stdout", "sys.stderr"),
                            streams[0] + streams[1], now[0] + now[1]) if was != is_now]
                        print("STREAMS CHANGED", json.dumps([called, which]), flush=True)
                    changed = environment_changes(environment, _c_environment())
                    if changed and not environment_changed:
                        environment_changed.append(None)
                        called = os.path.relpath(os.path.abspath(model_pt2), {str(elsewhere)!r})
                        print("ENVIRONMENT CHANGED", json.dumps([called, changed]), flush=True)
                    if not wrote_beside and any(os.path.isdir(folder) and folder_stat(folder).st_mtime_ns != time
                                                for folder, time in before.items()):
                        wrote_beside.append(None)
                        print("WROTE BESIDE", json.dumps(os.path.basename(os.fspath(model_pt2))), flush=True)

            answer.run = run_watched
            imported = {{"state": [found, process_state()],
                        "python": [what for what, was in python_found.items() if python_imported[what] != was],
                        "random": random_found == generators(), "streams": streams_found == standard_streams(),
                        "grad_mode": torch.is_grad_enabled(), "environment": environment_set}}
            print("IMPORTED", json.dumps(imported))
            stop_unless(imported["grad_mode"] and found == imported["state"][1] and not imported["python"]
                        and imported["random"] and imported["streams"] and not environment_set)

            torch.set_num_threads(torch.get_num_threads() + 1)  # a server that sizes its pool after the imports
            for n, (model_pt2, x, outputs) in enumerate(torch.load({str(Path(elsewhere) / "calls.pt")!r})):
                print("CALLING", n)
                threads, state, random_state = torch.get_num_threads(), process_state(), generators()
                out = answer.run(model_pt2, x)
                same = [isinstance(out, torch.Tensor) and out.shape == output.shape and torch.allclose(out, output,
                        atol=1e-6) for output in outputs]
                called = {{"n": n, "same": same, "grad_mode": torch.is_grad_enabled(),
                          "inference": isinstance(out, torch.Tensor) and out.is_inference(),
                          "threads": [threads, torch.get_num_threads()], "state": [state, process_state()],
                          "random": random_state == generators(),
                          "package": "workbook_ops" in sys.modules, "from_build": from_the_build(),
                          "python": [what for what, was in python_found.items() if python_settings()[what] != was]}}
                print("CALLED", json.dumps(called))
                stop_unless(same[n] and called["grad_mode"] and not called["inference"]
                            and threads == torch.get_num_threads() and state == process_state() and called["random"]
                            and called["package"] and not called["from_build"] and not called["python"]
                            and not (environment_changed or left_outside or wrote_beside))
                # Its rows in reverse order: as many elements, the same sum, another input (each row's output its own);
                # then its middle row changed. The caller flushes denormal numbers to zero meanwhile (False where the
                # CPU cannot).
                middle, middle_outputs = torch.load({str(Path(elsewhere) / "middles.pt")!r})[n]
                middle_same = bool(torch.allclose(answer.run(model_pt2, middle), middle_outputs[n], atol=1e-6))
                answer.run(model_pt2, x)  # x again, then its rows reversed: each right after x itself
                flushing = torch.set_flush_denormal(True)
                torch.set_float32_matmul_precision("high")  # and chose its own matmul precision
                torch.use_deterministic_algorithms(True, warn_only=True)  # and warns of nondeterministic kernels
                flipped = answer.run(model_pt2, x.flip(0))
                kept = ((not flushing or (torch.tensor([1e-40]) * 1.0).item() == 0.0)
                        and torch.get_float32_matmul_precision() == "high"
                        and torch.are_deterministic_algorithms_enabled()
                        and torch.is_deterministic_algorithms_warn_only_enabled())
                torch.set_flush_denormal(False)
                torch.set_float32_matmul_precision("highest")
                torch.use_deterministic_algorithms(False)
                print("FLIPPED", json.dumps({{"n": n, "same": (same := bool(torch.allclose(flipped, outputs[n].flip(0),
                                                                                         atol=1e-6))),
                                             "middle": middle_same, "flushing kept": kept}}))
                stop_unless(same and middle_same and kept)
            # A caller that did not set AOTI_RUNTIME_CHECK_INPUTS (most servers): the call on the file of the last
            # call, unchanged, leaves the environment as it found it as well (run_watched compares it). TMPDIR stays:
            # an answer that loads again here would unpack into the machine's /tmp, and leave it there.
            checking = os.environ.pop("AOTI_RUNTIME_CHECK_INPUTS")
            try:
                answer.run(model_pt2, x)
            finally:
                os.environ["AOTI_RUNTIME_CHECK_INPUTS"] = checking
            stop_unless(not environment_changed)
            # A release deployed over the file of the last call, as a deployment replaces model.pt2 in place.
            (first, x_first, outputs), (second, _, _) = torch.load({str(Path(elsewhere) / "calls.pt")!r})
            stamp = os.stat(second)
            shutil.copyfile(first, second)  # of the same size, and given the old file's time (rsync -t, cp -p)
            os.utime(second, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
            out = answer.run(second, x_first)
            print("REDEPLOYED", json.dumps({{"same": (same := bool(torch.allclose(out, outputs[0], atol=1e-6)))}}))
            stop_unless(same)
            # Two releases more deployed so, one right after the other (a deploy, a smoke test, a fix deployed): the
            # two within one second (tried again where a second ended between them), each then run.
            served_right, seconds = [], []
            for _ in range(5):
                seconds.clear()
                for release, output in zip({[str(release) for release in releases[1::-1]]!r}, outputs[::-1]):
                    shutil.copyfile(release, second)
                    os.utime(second, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
                    seconds.append(os.stat(second).st_ctime_ns // 10**9)
                    served_right.append(bool(torch.allclose(answer.run(second, x_first), output, atol=1e-6)))
                if seconds[0] == seconds[1]:
                    break
            print("TWICE", json.dumps({{"same": all(served_right)}}))
            stop_unless(all(served_right))
            # A link to that file (a path that leads to the release a deploy overwrites), run(); then the file the link
            # leads to written in place again (the second model, of the same size, given the old file's time).
            link = os.path.join(os.path.dirname(second), "linked_file.pt2")
            os.symlink(second, link)
            answer.run(link, x_first)
            shutil.copyfile({str(releases[1])!r}, second)
            os.utime(second, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
            out = answer.run(link, x_first)
            print("THROUGH A LINK", json.dumps({{"same": (same := bool(torch.allclose(out, outputs[1], atol=1e-6)))}}))
            stop_unless(same)
            for name, wrong in (("ONE ROW", torch.zeros(1, x.shape[1])), ("FLOAT64", x.double()),
                                ("INT64", x.long()), ("FLOAT16", x.half())):
                threads = torch.get_num_threads()
                try:  # 1 row, below the smallest batch the package takes; float64: these the input checks refuse
                    answer.run(model_pt2, wrong)
                    refused = False
                except Exception:  # noqa: BLE001 - the package's refusal, whatever its type
                    refused = True
                print(name, json.dumps({{"refused": refused, "grad_mode": torch.is_grad_enabled(),
                                          "threads": [threads, torch.get_num_threads()]}}))
                stop_unless(refused and (name != "ONE ROW" or torch.is_grad_enabled()
                                         and threads == torch.get_num_threads()))
            with torch.no_grad():  # a caller with grad mode off gets it back off
                answer.run(model_pt2, x)
                print("NO GRAD", json.dumps({{"grad_mode": (grad_mode := torch.is_grad_enabled())}}))
            stop_unless(not grad_mode)
            # A caller that chose its precision through the per-backend API (torch.backends.<backend>.matmul.
            # fp32_precision), after which torch's legacy getter refuses to read one ("a mix of the legacy and new
            # APIs")
            torch.backends.mkldnn.matmul.fp32_precision = "bf16"
            try:
                answer.run(model_pt2, x)
                raised = ""
            except Exception as error:  # noqa: BLE001 - what the answer raised, said
                raised = f"{{type(error).__name__}}: {{str(error).splitlines()[0][:160]}}"
            new_api = {{"raised": raised, "kept": torch.backends.mkldnn.matmul.fp32_precision == "bf16"}}
            torch.backends.mkldnn.matmul.fp32_precision = "none"
            print("NEW API", json.dumps(new_api))
            stop_unless(not raised and new_api["kept"])

            def still_kept(calls):  # of the models the calls loaded, how many are kept after the last
                before, loaded = models_mapped(kept_only=True), set()
                for call in calls:
                    call()
                    loaded |= models_mapped(kept_only=True) - before
                return len(loaded & models_mapped(kept_only=True))

            before = len(models_mapped())
            for _ in range(4):  # a server: one call per request, on one file
                answer.run(model_pt2, x)
            print("MAPPED", json.dumps({{"grew": (grew := len(models_mapped()) - before)}}))
            stop_unless(grew == 0)
            # Requests the package refuses (bad requests: 1 row, float64 rows) on that file, unchanged: its model stays.
            before = len(models_mapped())
            for wrong in (torch.zeros(1, x.shape[1]), x.double()):
                try:
                    answer.run(model_pt2, wrong)
                except Exception:  # noqa: BLE001 - the package's refusal, whatever its type
                    pass
            print("AFTER REFUSALS", json.dumps({{"grew": (grew := len(models_mapped()) - before)}}))
            stop_unless(grew == 0)
            # And one from a caller that did not set AOTI_RUNTIME_CHECK_INPUTS: the model's library read the variable
            # at its first call (a static in the generated wrapper: cpp_wrapper_cpu.py), so it refuses it still, and
            # the environment is as that caller left it (run_watched compares it).
            checking = os.environ.pop("AOTI_RUNTIME_CHECK_INPUTS")
            try:
                with contextlib.suppress(Exception):  # the package's refusal, whatever its type
                    answer.run(model_pt2, x.double())
            finally:
                os.environ["AOTI_RUNTIME_CHECK_INPUTS"] = checking
            stop_unless(not environment_changed)
            # The same file, unchanged, by other names: a symbolic link to it (as a deploy tool or a config may give
            # it), and a hard link made before any load (cp -al, rsync --link-dest: a name of its own, one inode).
            another_name = os.path.join(os.path.dirname(model_pt2), "another_name.pt2")
            os.symlink(model_pt2, another_name)
            before = len(models_mapped())
            answer.run(another_name, x)
            answer.run(os.path.join(os.path.dirname(model_pt2), "same_file.pt2"), x)
            print("ANOTHER NAME", json.dumps({{"grew": (grew := len(models_mapped()) - before)}}))
            stop_unless(grew == 0)
            # One input buffer, refilled in place for each request (as a server reuses one): each output is the
            # model's for what the buffer holds now, and a tensor of its own.
            buffer = x.clone()
            first_out = answer.run(model_pt2, buffer)
            buffer.copy_(torch.randn(x.shape, generator=torch.Generator().manual_seed(7)))
            second_in, second_out = buffer.clone(), answer.run(model_pt2, buffer)
            # Refilled again through numpy's view of it (a server's decoder writing into it): a write torch's
            # version counter never sees, as one through .data or from C does not.
            buffer.numpy()[...] = torch.randn(x.shape, generator=torch.Generator().manual_seed(8)).numpy()
            # Every input below stays alive to the end: a freed one's memory may be the next one's, and an answer
            # that keeps outputs by the input's address would then answer the check's own reference call.
            third_in, third_out = buffer.clone(), answer.run(model_pt2, buffer)
            right = answer.run(model_pt2, second_in)
            again_in = second_in.clone()
            again = answer.run(model_pt2, again_in)  # the same rows again, right after
            refilled = {{"same": bool(torch.allclose(second_out, right, atol=1e-6)),
                        "own": second_out.untyped_storage().data_ptr() != first_out.untyped_storage().data_ptr(),
                        "numpy": bool(torch.allclose(third_out, answer.run(model_pt2, third_in), atol=1e-6)),
                        # the same rows twice (second_in, a copy of what the buffer held): two outputs all the same
                        "apart": len({{out.untyped_storage().data_ptr() for out in (second_out, right, again)}}) == 3}}
            print("REFILLED", json.dumps(refilled))
            stop_unless(refilled["same"] and refilled["own"] and refilled["numpy"] and refilled["apart"])

            def deployed(release):  # a release copied over one file, then a request
                return lambda: (shutil.copyfile(release, model_pt2), answer.run(model_pt2, x))

            # Releases deployed over one file in turn: counted by what each loaded, so that a cache full already (it
            # drops models of other files as it takes these) shows as much as an empty one.
            temporary = temporary_bytes()
            releases_kept = still_kept([deployed(release) for release in {[str(release) for release in releases]!r}])
            releases_temporary = temporary_bytes() - temporary
            print("RELEASES", json.dumps({{"grew": releases_kept, "temporary": releases_temporary}}))
            # The same releases deployed by a link flipped to each (current -> rN, as many deploy tools do), the
            # server calling run() on current/model.pt2: the file it names is one, whatever the link points to.
            linked = os.path.join(os.path.dirname(model_pt2), "linked")
            for n, release in enumerate({[str(release) for release in releases]!r}):
                os.makedirs(os.path.join(linked, f"r{{n}}"))
                shutil.copyfile(release, os.path.join(linked, f"r{{n}}", "model.pt2"))

            def flipped(n):  # the link flipped to release n, then a request on current/model.pt2
                def call():
                    os.symlink(f"r{{n}}", os.path.join(linked, "next"))
                    os.replace(os.path.join(linked, "next"), os.path.join(linked, "current"))
                    answer.run(os.path.join(linked, "current", "model.pt2"), x)
                return call

            print("LINKED", json.dumps({{"grew": (linked_kept := still_kept([flipped(n) for n in range(4)]))}}))
            # The link flipped back to r2 (whose contents no other name holds: r3's are model_pt2's too), r1 served
            # by its own name (a canary's), then the link flipped to r1: the calls load nothing, and r2, which no
            # name leads to now, goes at the next call.
            flipped(2)()
            answer.run(os.path.join(linked, "r1", "model.pt2"), x)
            kept_before = models_mapped(kept_only=True)
            flipped(1)()
            for _ in range(2):
                answer.run(os.path.join(linked, "current", "model.pt2"), x)
            to_one_dropped = len(kept_before - models_mapped(kept_only=True))
            print("TO ONE LOADED", json.dumps({{"dropped": to_one_dropped}}))
            # Last: a cache that keeps every model it loaded, up to more than a server holds, is full by now and
            # would drop old releases as it takes new ones (the releases above: each replaces the last, none kept).
            served = (first, model_pt2, *{[str(model_file) for model_file in releases[:2] + held]!r})
            for model_file in served:  # a server of eight models: each loaded once, then a request for each in turn
                answer.run(model_file, x)
            before = len(models_mapped())
            for _ in range(2):
                for model_file in served:
                    answer.run(model_file, x)
            print("IN TURN", json.dumps({{"grew": (in_turn_grew := len(models_mapped()) - before)}}))
            # A release served by two names (its file, and a link to it), then the link flipped to another release
            # already loaded: the file's own name still leads to its model, which stays.
            flipping = os.path.join(os.path.dirname(model_pt2), "flipping.pt2")
            os.symlink(model_pt2, flipping)
            answer.run(flipping, x)
            answer.run(model_pt2, x)
            before = len(models_mapped())
            os.symlink(first, flipping + ".next")
            os.replace(flipping + ".next", flipping)
            answer.run(flipping, x_first)
            answer.run(model_pt2, x)
            print("STILL NAMED", json.dumps({{"grew": (still_named_grew := len(models_mapped()) - before)}}))
            def dropped_once_spoiled(name, spoil):  # run() on name, spoil(name), run() again: the models dropped
                answer.run(name, x)
                kept_before = models_mapped(kept_only=True)
                spoil(name)
                try:
                    answer.run(name, x)
                except Exception:  # noqa: BLE001 - a file gone or cut off: any refusal will do
                    pass
                return len(kept_before - models_mapped(kept_only=True))

            # A release retired (its file removed, the model behind it served by no other name): the next call on
            # its name fails, and the model, which no name leads to now, goes with that call.
            retired = os.path.join(os.path.dirname(model_pt2), "retired.pt2")
            shutil.copyfile({str(retiring)!r}, retired)
            print("RETIRED", json.dumps({{"dropped": (retired_dropped := dropped_once_spoiled(retired, os.remove))}}))
            # Twenty requests of new inputs, their outputs dropped: what run() keeps of them (a result cache that
            # never forgets) grows with every request a server serves.
            import gc

            def tensors_alive():
                return sum(isinstance(value, torch.Tensor) for value in gc.get_objects())

            gc.collect()
            alive = tensors_alive()
            for i in range(20):
                answer.run(first, torch.full(x_first.shape, float(i)))
            gc.collect()
            # And the last request's own tensors: its input and output, dropped by the caller, are freed at once (a
            # server that keeps the last request's holds its memory until the next: the growth above does not see it).
            last_input = torch.full(x_first.shape, 20.0)
            last_output = answer.run(first, last_input)
            last = [weakref.ref(last_input), weakref.ref(last_output)]
            del last_input, last_output
            gc.collect()
            print("KEPT", json.dumps({{"grew": (grew := tensors_alive() - alive),
                                      "last": (last_kept := [ref() is not None for ref in last])}}))
            # Here too for the steps from RELEASES on, which report in another order than they run (the check
            # reports the first wrong one in its own order), so that a wrong answer stops before the costly steps.
            stop_unless(grew < 10 and not any(last_kept) and releases_kept <= 1 and releases_temporary <= {1.5 * size}
                        and linked_kept <= 1 and to_one_dropped and in_turn_grew == 0 and still_named_grew == 0
                        and retired_dropped)
            # A release deployed while run() loads the file (copied over it once the loader has read the old one): the
            # next call serves the new release. Then an hour with no call (the clocks moved on), and the same file,
            # unchanged, again: its model is not loaded again.
            (_, x_race, outputs_race), _ = torch.load({str(Path(elsewhere) / "calls.pt")!r})
            race = os.path.join({str(elsewhere)!r}, "race", "model.pt2")
            os.makedirs(os.path.dirname(race))
            shutil.copyfile({str(racing[0])!r}, race)
            deploy_during_load.append(({str(racing[1])!r}, race))
            answer.run(race, x_race)
            deployed = not deploy_during_load  # not where run() loads otherwise than through load_package
            deploy_during_load.clear()
            served = bool(torch.allclose(answer.run(race, x_race), outputs_race[int(deployed)], atol=1e-6))
            before = len(models_mapped())
            clock_offset[0] += 3600
            answer.run(race, x_race)
            print("RACED", json.dumps({{"served": served, "idle grew": (grew := len(models_mapped()) - before)}}))
            stop_unless(served and grew == 0)
            # The same race, the release deployed once run() has read the file (and closed it) itself.
            read_race = os.path.join({str(elsewhere)!r}, "race", "read.pt2")
            shutil.copyfile({str(racing[2])!r}, read_race)
            deploy_after_read.append(({str(racing[3])!r}, os.path.abspath(read_race)))
            answer.run(read_race, x_race)
            deployed = not deploy_after_read  # not where run() reads no file in Python
            deploy_after_read.clear()
            # The contents run() read before the release came, at once under a name of their own: that release's
            # model.
            read_again = read_race + ".kept"
            shutil.copyfile({str(racing[2])!r}, read_again)
            read_kept = bool(torch.allclose(answer.run(read_again, x_race), outputs_race[0], atol=1e-6))
            served_read = bool(torch.allclose(answer.run(read_race, x_race), outputs_race[int(deployed)], atol=1e-6))
            # A caller whose default dtype is float64 (scientific code) sends float32 rows, which the model takes.
            torch.set_default_dtype(torch.float64)
            try:
                out = answer.run({str(racing[4])!r}, x_race)
                float64_default = "" if torch.allclose(out, outputs_race[0], atol=1e-6) else "another output"
            except Exception as error:  # noqa: BLE001 - what the answer raised, said
                float64_default = f"{{type(error).__name__}}: {{str(error).splitlines()[0][:160]}}"
            default_after = str(torch.get_default_dtype())
            torch.set_default_dtype(torch.float32)
            print("READ RACED", json.dumps({{"served": served_read, "kept": read_kept,
                                            "float64 default": float64_default, "default after": default_after}}))
            stop_unless(served_read and read_kept and not float64_default and default_after == "torch.float64")
            import hashlib, zipfile

            def release_of_its_own(package, to, mark):  # the package's contents, its archive's comment `mark`
                os.makedirs(os.path.dirname(to), exist_ok=True)
                shutil.copyfile(package, to)
                with zipfile.ZipFile(to, "a") as archive:
                    archive.comment = mark.encode()

            # One relative name, from the folders of two releases in turn (a caller that changes its working directory
            # between requests: one name, two files), each release of contents no other name holds; then from each
            # again: the second round loads nothing.
            relative = [os.path.join({str(elsewhere)!r}, "relative", folder) for folder in ("a", "b")]
            for n, (folder, package) in enumerate(zip(relative, {[str(held_file) for held_file in held[:2]]!r})):
                release_of_its_own(package, os.path.join(folder, "model.pt2"), f"relative {{n}}")
            where, outs = os.getcwd(), []
            try:
                for folder in relative:
                    os.chdir(folder)
                    answer.run("model.pt2", x_race)
                before = len(models_mapped())
                for folder in relative:
                    os.chdir(folder)
                    outs.append(answer.run("model.pt2", x_race))
            finally:
                os.chdir(where)
            print("RELATIVE", json.dumps({{"grew": (grew := len(models_mapped()) - before),
                                          "same": (same := all(torch.allclose(out, outputs_race[n], atol=1e-6)
                                                               for n, out in enumerate(outs)))}}))
            stop_unless(grew == 0 and same)
            # A release torn over a served one (a copy cut off halfway: a full disk, a deploy killed): the call on
            # its name fails, and the model served before, which that name no longer leads to, goes with that call.
            def cut_in_half(name):
                with python_open(name, "r+b") as file:
                    file.truncate(len(file.read()) // 2)

            torn = os.path.join({str(elsewhere)!r}, "torn", "model.pt2")
            release_of_its_own({str(retiring)!r}, torn, "torn")
            temporary = temporary_bytes()
            dropped = dropped_once_spoiled(torn, cut_in_half)
            for _ in range(3):  # the server's next requests: each call on the torn file fails as the first did
                try:
                    answer.run(torn, x)
                except Exception:  # noqa: BLE001 - any refusal will do
                    pass
            # Then a complete archive of a release's size that holds no model (the wrong file deployed): it opens as
            # an archive, and each load fails past that.
            with zipfile.ZipFile(torn, "w") as archive:
                archive.writestr("data/blob", bytes({size}))
            for _ in range(2):
                try:
                    answer.run(torn, x)
                except Exception:  # noqa: BLE001 - any refusal will do
                    pass
            grew = temporary_bytes() - temporary
            # Then the release deployed again, complete, over the torn file: the next call serves it (a load that
            # failed is not held against the name, nor against anything but those torn contents).
            release_of_its_own({str(retiring)!r}, torn, "repaired")
            try:
                repaired = bool(torch.allclose(answer.run(torn, x_race), outputs_race[0], atol=1e-6))
            except Exception as error:  # noqa: BLE001 - the diagnosis quotes it
                said = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
                repaired = f"{{type(error).__name__}}: {{said}}"
            print("TORN", json.dumps({{"dropped": dropped, "temporary": grew, "repaired": repaired}}))
            stop_unless(dropped and grew <= {1.5 * size} and repaired is True)
            # Four requests at once, in four threads, on a release no call has loaded (a server's requests in
            # parallel), two by its name and two by a hard link to it: one load. Each real load waits a while first,
            # so that a thread that finds the model not loaded yet reaches a load of its own meanwhile, whatever the
            # threads' order.
            import threading
            at_once = os.path.join({str(elsewhere)!r}, "at_once", "model.pt2")
            release_of_its_own({str(retiring)!r}, at_once, "at once")
            os.link(at_once, os.path.join(os.path.dirname(at_once), "same_file.pt2"))
            environment, before, outs = _c_environment(), len(models_mapped()), [None] * 4
            start = threading.Barrier(4)

            def request(n):
                start.wait()
                outs[n] = given_run(at_once if n % 2 else os.path.join(os.path.dirname(at_once), "same_file.pt2"),
                                    x_race)

            hold_loads[0] = 0.5
            threads = [threading.Thread(target=request, args=(n,)) for n in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            hold_loads[0] = 0.0
            print("AT ONCE", json.dumps({{"grew": (grew := len(models_mapped()) - before),
                                         "same": (same := all(isinstance(out, torch.Tensor) and torch.allclose(
                                             out, outputs_race[0], atol=1e-6) for out in outs)),
                                         "environment": (kept := _c_environment() == environment)}}))
            stop_unless(grew <= 1 and same and kept)
            # A release of the first model whose weights changed, deployed over a file run() has loaded (cp -p):
            # the same size and times, the same first 4 MiB and last MiB, the same CRC-32, the whole file's and each
            # of its files'; only the middle of its library differs.
            in_place = os.path.join({str(changed_release)!r}, "model.pt2")
            shutil.copyfile({str(changed_release / "before.pt2")!r}, in_place)
            answer.run(in_place, x_race)
            stamp = os.stat(in_place)
            shutil.copyfile({str(changed_release / "after.pt2")!r}, in_place)
            os.utime(in_place, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
            out = answer.run(in_place, x_race)
            print("MIDDLE", json.dumps({{"same": (same := bool(torch.allclose(
                out, torch.load({str(changed_release / "output.pt")!r}), atol=1e-6))),
                                        "old": bool(torch.allclose(out, outputs_race[0], atol=1e-6))}}))
            stop_unless(same)
            # The package's fewest rows and a batch larger than any before, on the loaded file of the first model.
            served = {{}}
            for x_rows, output in torch.load({str(Path(elsewhere) / "batches.pt")!r}):
                try:
                    out = answer.run(at_once, x_rows)
                    served[len(x_rows)] = "same" if torch.allclose(out, output, atol=1e-5) else "another output"
                except Exception as error:  # noqa: BLE001 - a refusal of the reader's, whatever its type
                    served[len(x_rows)] = f"{{type(error).__name__}}: {{str(error).strip()[:300]}}"
            print("BATCHES", json.dumps(served))
            stop_unless(all(what == "same" for what in served.values()))
            print("OTHERS", json.dumps({{"gone": (gone := sum(not os.path.exists(name) for name in others_files)),
                                        "made": len(others_files)}}))
            stop_unless(gone == 0)
            # Last, as the costliest step (a wrong answer that fails before it does not pay for it): a server of many
            # models, 1025 files (more than a cache sized for a few keeps: functools.lru_cache's 128, 256, 512, 1024),
            # each a release of its own of one model (made from its package unpadded: a third of the bytes to write
            # and read), run() on each in turn, then on each again: the second round loads nothing.
            many = [os.path.join({str(elsewhere)!r}, "many", f"m{{n}}.pt2") for n in range(1025)]
            behind = load_package({str(held[0])!r})
            for n, name in enumerate(many):
                release_of_its_own({str(models[0][1])!r}, name, f"many {{n}}")
                with python_open(name, "rb") as file:
                    stand_in_for[hashlib.sha256(file.read()).digest()] = behind
            for name in many:
                answer.run(name, x_race)
            before, stood_in = len(models_mapped()), loads_stood_in[0]
            same = all([torch.allclose(answer.run(name, x_race), outputs_race[0], atol=1e-6) for name in many])
            print("MANY", json.dumps({{"grew": (grew := len(models_mapped()) - before + loads_stood_in[0] - stood_in),
                                      "same": same}}))
            stop_unless(grew == 0 and same)
            python_now = python_settings()
            print("PYTHON SETTINGS", json.dumps({{"changed": [what for what, was in python_found.items()
                                                           if python_now[what] != was]}}))
            print("FROM THE BUILD", json.dumps(from_the_build()))
        """
        # A package's first load probes which vector instructions the CPU runs, once per Inductor cache (a compile of
        # some seconds, whose files stay in the cache: $TORCHINDUCTOR_CACHE_DIR, which the fresh Python inherits).
        # Done here, so that what the fresh Python finds made outside its folders is the reader's, not torch's.
        from torch._inductor import cpu_vec_isa

        cpu_vec_isa.pick_vec_isa()
        waited = limit * (WATCHDOG.WALL_FACTOR - 1)  # on the clock: within the runner's own wall-clock limit
        now_doing(f"running your run() in the fresh Python (at most {waited:.0f} s on the clock)")
        try:
            printed = shipping.run_python(program, Path(site), check=False, timeout=waited)
        except subprocess.TimeoutExpired:
            return Result(False, f"in the fresh Python, your code ran for {waited:.0f} s on the clock without "
                                 f"finishing, using less than {limit:.0f} s of processor time: does it wait for "
                                 "something that never comes (a lock, a thread, a file)? Or the machine could not "
                                 "run it: too busy, or short of memory (what your code keeps: a server's memory "
                                 f"grows with it).{hint}.")
    lines = printed.splitlines()
    if "OVER TIME" in lines:
        return Result(False, f"in the fresh Python, your code used {limit:.0f} s of processor time without finishing: "
                             "does it loop forever, or does each call do more than it needs? The check calls run() "
                             "about 2,160 times (2,050 of them on 1,025 files in turn, whose models it loads for you "
                             "at no cost): a call that reads its file once, and looks up the model of what it read, "
                             f"does little more than that read.{hint}.")
    started = [int(line.split()[1]) for line in lines if line.startswith("CALLING ")]
    done = [json.loads(line.removeprefix("CALLED ")) for line in lines if line.startswith("CALLED ")]
    from_build = [json.loads(line.removeprefix("FROM THE BUILD ")) for line in lines
                  if line.startswith("FROM THE BUILD ")]
    stopped = "STOPPED" in lines  # at its first wrong step: the one the checks below report
    if changed := [json.loads(line.removeprefix("ENVIRONMENT CHANGED ")) for line in lines
                   if line.startswith("ENVIRONMENT CHANGED ")]:  # first: a later call may fail for it
        called, variables = changed[0]
        changes = _environment_changes_said(variables, "the call")
        temporary = (", and every temporary folder made after it goes where TMPDIR says (torch's loader makes one per "
                     "load)" if "TMPDIR" in variables else "")
        return Result(False, f"in the fresh Python, run() on {called} left the process's environment changed "
                             f"(os.environ, os.putenv): {changes}. Every process the server starts inherits "
                             f"{'them' if len(variables) > 1 else 'it'}{temporary}. What a call changes, it sets "
                             "back (lesson 00, section 2).")
    if not from_build and not stopped:  # it raised, or ended: the error that ended the fresh Python, not the log lines
        # torch may print on the way (a CUDA build of torch on a machine without a GPU logs "No CUDA runtime is found")
        errors = [line for line in lines if "Error" in line]
        when = f"run() on {_AOTI_CALLS[started[-1]]}" if started else "your file, as it was loaded"
        last = errors[-1] if errors else "(nothing printed)"
        where = (" (the check sets AOTI_RUNTIME_CHECK_INPUTS=1, as the lesson advises): which batch sizes the compiled "
                 "model takes" if "too small" in last else ": what the package holds of the operators it calls, and "
                 "what it does not" if any(word in last for word in ("schema", "operator", "workbook::")) else "")
        return Result(False, f"in the fresh Python, {when}: {last}{hint}{where}.")
    (imported, redeployed, twice, through_a_link, one_row, float64, int64, float16, no_grad, new_api, mapped,
     after_refusals,
     another_name, refilled, still_named, retired, in_turn, releases, linked, to_one_loaded, flipped, kept, raced,
     read_raced, relative, many, torn, at_once, python_settings) = (
        [json.loads(line.removeprefix(f"{name} ")) for line in lines if line.startswith(f"{name} ")]
        for name in ("IMPORTED", "REDEPLOYED", "TWICE", "THROUGH A LINK", "ONE ROW", "FLOAT64", "INT64", "FLOAT16",
                     "NO GRAD", "NEW API",
                     "MAPPED", "AFTER REFUSALS", "ANOTHER NAME", "REFILLED", "STILL NAMED", "RETIRED", "IN TURN",
                     "RELEASES",
                     "LINKED", "TO ONE LOADED", "FLIPPED", "KEPT", "RACED", "READ RACED", "RELATIVE", "MANY",
                     "TORN", "AT ONCE", "PYTHON SETTINGS"))
    if imported and not imported[0]["grad_mode"]:
        return Result(False, "in the fresh Python, importing your file turned grad mode off (torch.set_grad_enabled, "
                             "or a torch.no_grad() entered and never left): from the import on, the caller's own code "
                             "(its training, say) records no graph. What a call needs, it sets around the call, and "
                             "sets back (lesson 00, section 2).")
    if imported and imported[0]["state"][0] != imported[0]["state"][1]:
        setting, before, after = next((setting, before, after) for setting, before, after
                                      in zip(_SERVER_SETTINGS, *imported[0]["state"]) if before != after)
        return Result(False, f"in the fresh Python, importing your file set the process's {setting} from {before} to "
                             f"{after}: a server that imports it runs all its other torch work so. What a call needs, "
                             f"it sets around the call, and sets back (lesson 00, section 2).")
    if imported and imported[0]["python"]:
        return Result(False, f"in the fresh Python, importing your file changed {imported[0]['python'][0]}: a setting "
                             "of the whole process, which decides which of the caller's warnings and log records show "
                             "(and torch's) in everything it runs after the import. A module changes nothing of its "
                             f"importer's; a server that wants other settings sets them itself.{hint}.")
    if imported and imported[0]["environment"]:
        changes = _environment_changes_said(imported[0]["environment"], "the import")
        return Result(False, f"in the fresh Python, importing your file changed the process's environment "
                             f"(os.environ, os.putenv): {changes}. Every process the server starts from then on "
                             "inherits it (OMP_NUM_THREADS sets a DataLoader worker's or a subprocess's torch "
                             "threads). A module changes nothing of its importer's; what a call needs, it sets "
                             f"around the call, and sets back (lesson 00, section 2).{hint}.")
    if imported and not imported[0]["streams"]:
        return Result(False, "in the fresh Python, importing your file left the standard streams (file descriptors 0 "
                             "to 2, sys.stdin, sys.stdout, sys.stderr) leading elsewhere than before: the caller's own "
                             "output and errors (its logs, torch's warnings, a crash's traceback) go there from then "
                             f"on. A module changes nothing of its importer's.{hint}.")
    if imported and not imported[0]["random"]:
        return Result(False, "in the fresh Python, importing your file changed the random number generators' "
                             "states (torch.manual_seed, random.seed, numpy.random.seed, or a draw): a caller that "
                             "seeded before the import (a test, a reproducible run) draws other numbers after it. A "
                             f"module changes nothing of its importer's.{hint}.")
    if outside := [json.loads(line.removeprefix("LEFT OUTSIDE ")) for line in lines
                   if line.startswith("LEFT OUTSIDE ")]:
        called, left = outside[0]
        shown = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
        return Result(False, f"in the fresh Python, run() on {called} made {shown}, outside the temporary folder "
                             "(tempfile's, $TMPDIR) and the home folder, and left it there after the call: a file a "
                             "call leaves for each load, where nothing removes it, fills a server's disk (or, in "
                             "/dev/shm, its memory), one release at a time. What a call makes for itself goes in the "
                             f"temporary folder, and goes when the call is done{hint}.")
    if beside := [json.loads(line.removeprefix("WROTE BESIDE ")) for line in lines if line.startswith("WROTE BESIDE ")]:
        return Result(False, f"in the fresh Python, run() on {beside[0]} wrote into the folder of the release it was "
                             "given (a file made there, or removed): a release's folder may be read-only (a container "
                             "image's layer, a volume mounted read-only), and two processes serving one file share "
                             f"it. run() reads the release, and writes nothing beside it{hint}.")
    for call in done:
        what = f"run() on {_AOTI_CALLS[call['n']]}"
        if not call["same"][call["n"]]:
            other = [_AOTI_CALLS[n].split(" on ")[0] for n, same in enumerate(call["same"]) if same]
            got = (f" returned what {other[0]} gives, the model of an earlier call: each call names the .pt2 file "
                   "whose model it runs (the two files share their size, times, first 4 MiB, CRC-32 and "
                   "Adler-32: their contents differ)" if other else " did not return the model's output")
            return Result(False, f"in the fresh Python, {what}{got}.{hint}.")
        if not call["grad_mode"]:
            return Result(False, f"in the fresh Python, grad mode was off after {what}, where it was on before: code "
                                 "that changes thread-local state must restore it, or the caller's later code (its "
                                 "training, say) runs changed (lesson 00, section 2).")
        if call["inference"]:
            return Result(False, f"in the fresh Python, {what} returned an inference tensor (made under "
                                 "torch.inference_mode()): the caller cannot save it for a backward, nor write into "
                                 "it. The model's output is the caller's, to use as any tensor.")
        if call["threads"][0] != call["threads"][1]:
            return Result(False, f"in the fresh Python, {what} changed the process's number of threads from "
                                 f"{call['threads'][0]} to {call['threads'][1]}: a setting of the whole process, for "
                                 "everything the caller runs after it. run() changes nothing but its output.")
        if call["state"][0] != call["state"][1] or not call["random"]:
            setting = next((setting for setting, before, after in zip(_SERVER_SETTINGS, *call["state"])
                            if before != after),
                           "random number generators' states (torch.manual_seed, random.seed, numpy.random.seed: the "
                           "caller's own draws repeat)")
            return Result(False, f"in the fresh Python, {what} changed the process's {setting}: a setting of the "
                                 "whole process, for everything the caller runs after it. run() changes nothing but "
                                 "its output.")
        if call["python"]:
            return Result(False, _python_changed(call["python"][0]) + f"{hint}.")
        if call["from_build"]:
            return Result(False, _from_the_build(call["from_build"]) + f"{hint}.")
        if not call["package"]:
            return Result(False, f"in the fresh Python, {what} returned the model's output, but the installed package, "
                                 "workbook_ops, was never imported: the operators' library was loaded by other means, "
                                 "and the package's own Python never ran: it refuses a wheel built for another CUDA "
                                 "than torch's before it loads the library, and makes the registrations done from "
                                 "Python (lesson 06's vmap rule), so on another machine a wrong wheel loads silently "
                                 f"and vmap falls back to a loop.{hint}.")
    if wrong := next((call for call in flipped if not call["flushing kept"]), None):
        return Result(False, f"in the fresh Python, a caller that flushes denormal numbers to zero "
                             f"(torch.set_flush_denormal(True)), chose its float32 matmul precision (\"high\") and "
                             "warns of nondeterministic kernels (torch.use_deterministic_algorithms(True, "
                             f"warn_only=True)) called run() on {_AOTI_CALLS[wrong['n']]}, and found one of them "
                             "changed after it (warn-only mode is a setting too): "
                             "run() set a setting back to torch's default, not to what it found. run() changes nothing "
                             f"but its output.{hint}.")
    if wrong := next((call for call in flipped if not call["middle"]), None):
        return Result(False, f"in the fresh Python, run() on {_AOTI_CALLS[wrong['n']]}, then on the same input with "
                             "its middle row changed (the first and last rows as they were): not the model's output "
                             "for the second input. Something kept from an earlier call was returned (a result kept "
                             f"by a part of the input?). Each call computes its own input's output.{hint}.")
    if wrong := next((call for call in flipped if not call["same"]), None):
        return Result(False, f"in the fresh Python, run() on {_AOTI_CALLS[wrong['n']]}, then on the same rows in "
                             "reverse order (another input, with the same sum, shape and dtype): not the model's "
                             "output for the second input. Something kept from the first call was returned (a result "
                             f"kept by a summary of the input?). Each call computes its own input's output.{hint}.")
    if kept and kept[0]["grew"] < 10 and any(kept[0]["last"]):
        held = " and ".join(what for what, alive in zip(("its input", "its output"), kept[0]["last"]) if alive)
        return Result(False, f"in the fresh Python, a request whose input and output the caller then dropped: {held} "
                             "stayed alive after the call: run() keeps the last request's tensors (for the next?), "
                             "so a server holds a request's memory until another comes, its largest batch's too. "
                             f"What a call is given and returns is the caller's, and goes when the caller drops it"
                             f"{hint}.")
    if kept and kept[0]["grew"] >= 10:
        return Result(False, "in the fresh Python, twenty requests of new inputs, their outputs dropped by the caller: "
                             f"{kept[0]['grew']} more tensors alive after them than before. run() keeps something of "
                             "every request (a result cache that never forgets?), and a server's memory grows with "
                             f"every request it serves. What a call makes is the caller's.{hint}.")
    if redeployed and not redeployed[0]["same"]:
        return Result(False, "in the fresh Python, the first model copied over the second one's model.pt2, the file of "
                             "the last call (a release deployed in place, a file of the same size, given the old "
                             "file's time as rsync -t and cp -p give it), then run() on that file: not the output of "
                             "the model now in it. Something kept from the earlier call (a cache keyed on the file's "
                             "name, size, time or first bytes?) ran the old model: what run() keeps must change when "
                             f"the file's contents do.{hint}.")
    if twice and not twice[0]["same"]:
        return Result(False, "in the fresh Python, the second model, then the first, copied over that model.pt2 one "
                             "right after the other, within one second (each of the same size, given the old file's "
                             "time), run() called after each: once, not the output of the model then in the file. "
                             "What run() keeps from an earlier call told two different contents apart by something "
                             "that two deployments within one second share: what tells them apart for certain?"
                             f"{hint}.")
    if through_a_link and not through_a_link[0]["same"]:
        return Result(False, "in the fresh Python, run() on a link to that model.pt2 (linked_file.pt2 -> model.pt2), "
                             "then the second model copied over the file the link leads to (of the same size, given "
                             "the old file's time), then run() on the link again: not the output of the model now in "
                             "the file. What run() keeps told the two apart by the link itself, not by the file the "
                             f"caller's path leads to.{hint}.")
    if not one_row[0]["refused"]:
        return Result(False, "in the fresh Python, run() on a batch of 1 row, fewer than the package was exported for, "
                             "returned a result: the input checks that AOTI_RUNTIME_CHECK_INPUTS=1 turns on, which "
                             f"refuse it, did not run.{hint}.")
    if not one_row[0]["grad_mode"]:
        return Result(False, "in the fresh Python, grad mode was off after your file was imported and run() raised "
                             "(the package refused a batch "
                             "of 1 row), where it was on before: code that changes thread-local state must restore it "
                             "on every way out, an error's included (lesson 00, section 2).")
    if one_row[0]["threads"][0] != one_row[0]["threads"][1]:
        return Result(False, f"in the fresh Python, run() raised (the package refused a batch of 1 row) and left the "
                             f"process's number of threads at {one_row[0]['threads'][1]}, where it was "
                             f"{one_row[0]['threads'][0]}: a setting changed by hand must be restored on every way "
                             "out, an error's included (try/finally).")
    for wrong, dtype in ((float64, "float64"), (int64, "int64"), (float16, "float16")):
        if not wrong[0]["refused"]:
            return Result(False, f"in the fresh Python, run() on {dtype} rows, where the package was exported for "
                                 "float32, returned a result: the input checks that AOTI_RUNTIME_CHECK_INPUTS=1 turns "
                                 f"on, which refuse them, did not run on what the caller gave (converted first?): a "
                                 f"caller that sends {dtype} gets what it did not ask for.{hint}.")
    if no_grad[0]["grad_mode"]:
        return Result(False, "in the fresh Python, run() called inside torch.no_grad() left grad mode on: code that "
                             "changes thread-local state must restore what it found, not what it expects (lesson 00, "
                             "section 2).")
    if new_api and (new_api[0]["raised"] or not new_api[0]["kept"]):
        what = (f"raised {new_api[0]['raised']}" if new_api[0]["raised"] else
                "changed it (torch.backends.mkldnn.matmul.fp32_precision is no longer \"bf16\")")
        return Result(False, "in the fresh Python, a caller that chose its float32 matmul precision through the "
                             "per-backend API torch's documentation recommends (torch.backends.mkldnn.matmul."
                             f"fp32_precision = \"bf16\") called run(), which {what}: once that API is used, "
                             "torch.get_float32_matmul_precision() refuses to read the setting (a mix of the legacy "
                             "and new APIs). run() changes nothing but its output, and needs no setting read or set "
                             f"for it.{hint}.")
    for step, what, why in (
            (mapped, "run() four more times on one file",
             "run() loaded the package at each call, and a model's library stays mapped after the model is dropped "
             "(/proc/self/maps shows it '(deleted)'), so a server that calls run() once a request grows until memory "
             f"runs out. {_LOADED_ONCE}"),
            (after_refusals, "two requests the package refuses (1 row; float64 rows) on a file whose model run() "
                             "holds, the file unchanged",
             "run() loaded the file again after the package refused an input (a retry that reloads?), and a library "
             "stays mapped after its model is dropped, so a server that gets bad requests grows with each. A refusal "
             "is the caller's input's, not the model's."),
            (another_name, "run() on a symbolic link and on a hard link to a file whose model it holds (the file "
                           "unchanged, given by other names)",
             "run() loaded the file's model again, where a file's model is loaded once while its contents stay as they "
             "are, whatever the name it is given by.")):
        if step and step[0]["grew"]:
            return Result(False, f"{_mapped_more(what, step[0]['grew'], why)}{hint}.")
    if refilled and refilled[0]["same"] and refilled[0]["own"] and not refilled[0]["numpy"]:
        return Result(False, "in the fresh Python, run() on one input buffer, refilled in place between the calls "
                             "through torch, then through numpy's view of it (buffer.numpy()[...] = ..., as a server's "
                             "decoder writes into its buffer: torch's version counter does not see such a write), "
                             "returned the third time not the model's output for what the buffer holds now, but an "
                             "earlier one: something kept from an earlier call was returned. Each call returns the "
                             f"model's output for its input as it is then.{hint}.")
    if refilled and not (refilled[0]["same"] and refilled[0]["own"]):
        got = ("not the model's output for what the buffer holds now, but an earlier one: something kept from the "
               "first call (an output kept by the input's address?) was returned" if not refilled[0]["same"] else
               "the same memory as the first call's output: the caller who kept that one sees it change")
        return Result(False, f"in the fresh Python, run() twice on one input buffer, refilled in place between the "
                             f"calls (as a server reuses one), returned the second time {got}. Each call returns the "
                             f"model's output for its input as it is then, a tensor of the caller's own.{hint}.")
    if refilled and not refilled[0]["apart"]:
        return Result(False, "in the fresh Python, run() on the same rows twice (a second request as the first, and "
                             "one right after it) returned the second time the first call's output itself, the same "
                             "memory: a caller that writes into its output (post-processing in place) changes what "
                             f"the next request gets. Each call returns a tensor of the caller's own.{hint}.")
    if in_turn and in_turn[0]["grew"]:
        return Result(False, _mapped_more("run() on eight files in turn, twice each after a first round (a server of "
                                          "eight models, a request for each in turn)", in_turn[0]["grew"],
                                          "run() loaded a package again when another file was asked for (it keeps the "
                                          "models served last, not one per file?), and a library stays mapped after "
                                          f"its model is dropped. {_LOADED_ONCE}{hint}."))
    if releases and releases[0]["grew"] > 1:
        return Result(False, f"in the fresh Python, four releases deployed in turn over one model.pt2, run() called "
                             f"after each: {releases[0]['grew']} of the four releases' models stayed loaded in the "
                             "process: run() keeps the model of every release it has served (a cache keyed on the "
                             "contents, never emptied?), and a server that lives through many deployments grows with "
                             f"each. Keep one model per file, loaded again when its contents change.{hint}.")
    if releases and releases[0]["temporary"] > 1.5 * size:  # a copy of the model served now may stay
        return Result(False, f"in the fresh Python, four releases deployed in turn over one model.pt2, run() called "
                             f"after each: {releases[0]['temporary'] / 2**20:.1f} MB more stayed in the temporary "
                             f"folder (tempfile's, $TMPDIR) or the home folder (~, ~/.cache), where each release is "
                             f"{size / 2**20:.1f} MB: a file run() writes there for a release outlives that release's "
                             f"model, and a server's disk fills with each deployment.{hint}.")
    if linked and linked[0]["grew"] > 1:
        return Result(False, f"in the fresh Python, four releases deployed by a link flipped to each in turn (current "
                             f"-> r0, r1, ..., as many deploy tools do), run() called on current/model.pt2 after each: "
                             f"{linked[0]['grew']} of the four releases' models stayed loaded in the process: run() "
                             "keeps a model per file the link pointed to (a path resolved through the link, "
                             "os.path.realpath?), and every release it served stays loaded. The caller names one "
                             f"file: a name holds one model at most, loaded again when the contents it leads to "
                             f"change.{hint}.")
    if to_one_loaded and not to_one_loaded[0]["dropped"]:
        return Result(False, "in the fresh Python, the link current flipped from r2 to r1, a release run() had loaded "
                             "already by its own name (a canary's), then three calls on current/model.pt2: r2's model "
                             "stayed loaded, though no name the caller gives leads to it any more. A call that loads "
                             "nothing drops what no name leads to as well (a sweep only where a model is loaded?): a "
                             f"flip to a release served already is how a rollout ends.{hint}.")
    if retired and not retired[0]["dropped"]:
        return Result(False, "in the fresh Python, a release retired (run() on it, its file removed, then run() on its "
                             "name again, which fails): its model stayed loaded, though no name the caller gives leads "
                             "to it any more. The call on a name drops what that name led to, a call that fails "
                             f"too.{hint}.")
    if still_named and still_named[0]["grew"]:
        what = ("run() on a file and on a link to it, then the link flipped to another release loaded already, then "
                "run() on both names again")
        why = ("run() dropped the first file's model when the link stopped leading to it, though the file's own name "
               "still does, and loaded it again. A model goes when no name leads to it.")
        return Result(False, f"{_mapped_more(what, still_named[0]['grew'], why)}{hint}.")
    if raced and not raced[0]["served"]:
        return Result(False, "in the fresh Python, a release deployed over a file while run() loaded it (copied over "
                             "it once the loader had read the old one), then run() again: the old release served, and "
                             "so it stays: what run() knows of the file was read after the load, so it describes the "
                             "new file and stands for the old model. Read what tells one file's contents from "
                             f"another's before loading it.{hint}.")
    if read_raced and not read_raced[0]["served"]:
        return Result(False, "in the fresh Python, a release deployed over a file once run() had read it (and closed "
                             "it), then run() again: the old release served, and so it stays: what run() knows of the "
                             "file was read after its contents, so it describes the new file and stands for the old "
                             f"model. Read what tells one file's contents from another's before them.{hint}.")
    if read_raced and not read_raced[0]["kept"]:
        return Result(False, "in the fresh Python, a release deployed over a file once run() had read it (and closed "
                             "it), then a file of the contents run() had read, under another name: another model's "
                             "output. What run() read of the file was not what its loader then loaded (the file had "
                             "changed in between), so the model of one release is known by the other's contents."
                             f"{hint}.")
    if read_raced and read_raced[0]["float64 default"]:
        return Result(False, "in the fresh Python, a caller whose default dtype is float64 (torch.set_default_dtype) "
                             "called run() with float32 rows, which the model takes: "
                             f"{read_raced[0]['float64 default']}: something run() makes takes the caller's default "
                             "dtype (torch.zeros, torch.randn without a dtype), which is the caller's, not the "
                             f"model's. Make what the model takes with the dtype it takes.{hint}.")
    if read_raced and read_raced[0]["default after"] != "torch.float64":
        return Result(False, "in the fresh Python, a caller whose default dtype is float64 (torch.set_default_dtype) "
                             "called run() with float32 rows, and found its default dtype "
                             f"{read_raced[0]['default after']} after the call: a setting of the whole process, which "
                             "every tensor the caller makes from then on takes. run() changes nothing but its output: "
                             f"what the model takes, it makes with the dtype it takes.{hint}.")
    if raced and raced[0]["idle grew"]:
        return Result(False, _mapped_more("run() on an unchanged file after an hour with no call (the process's clocks "
                                          "moved on)", raced[0]["idle grew"], "run() dropped an idle model and loaded "
                                          "the file again, and a library stays mapped after its model is dropped, so a "
                                          f"server with quiet hours grows with each. {_LOADED_ONCE}") + f"{hint}.")
    if relative and not relative[0]["same"]:
        return Result(False, "in the fresh Python, run(\"model.pt2\") from the folder of one release, then from "
                             "another's (a caller that changes its working directory: one relative name, two files): "
                             "the second time, not the output of the model in the second folder's file. A relative "
                             f"name leads to the file its caller's working directory holds.{hint}.")
    if relative and relative[0]["grew"]:
        return Result(False, _mapped_more("run(\"model.pt2\") from the folder of one release, then from another's (a "
                                          "caller that changes its working directory: one relative name, two files), "
                                          "then from each again", relative[0]["grew"], "run() loaded a file's model "
                                          "again, though neither file changed: what run() keeps took the two files "
                                          f"for one. {_LOADED_ONCE}") + f"{hint}.")
    if many and not many[0]["same"]:
        return Result(False, "in the fresh Python, run() on 1025 files in turn, each a release of one model: not that "
                             f"model's output.{hint}.")
    if many and many[0]["grew"]:
        return Result(False, f"in the fresh Python, run() on 1025 files in turn (a server of many models, each file a "
                             f"release of its own), then on each again: {many[0]['grew']} of them loaded again, though "
                             "none changed: run() dropped models that a name the caller gives still leads to (a cache "
                             "of a fixed size? A server may hold more models than a cache is sized for). "
                             f"{_LOADED_ONCE}{hint}.")
    if python_settings and python_settings[0]["changed"]:
        return Result(False, _python_changed(python_settings[0]["changed"][0]) + f"{hint}.")
    if torn and not torn[0]["dropped"]:
        return Result(False, "in the fresh Python, a release torn over a served one (run() on it, then its file cut "
                             "off halfway, as a copy a full disk or a killed deploy leaves, then run() on its name "
                             "again, which fails): the model served before stayed loaded, though the name leads to "
                             "other contents now. The call on a name drops what that name led to, a call that fails "
                             f"too.{hint}.")
    if torn and torn[0]["temporary"] > 1.5 * size:  # a copy of the model served before may stay
        return Result(False, f"in the fresh Python, a release torn over a served one (a copy cut off halfway), then "
                             "an archive of its size that holds no model (the wrong file deployed), run() called on "
                             f"the name six times, each call failing: {torn[0]['temporary'] / 2**20:.1f} "
                             "MB more stayed in the temporary folder (tempfile's, $TMPDIR) or the home folder (~, "
                             f"~/.cache), where the release was {size / 2**20:.1f} MB: a file run() writes there for "
                             "a load is left behind when the load fails (a removal that only runs after a load that "
                             "works?), and a server that retries a release it cannot load fills its disk, one file "
                             f"per request.{hint}.")
    if torn and torn[0]["repaired"] is not True:
        got = ("a wrong output" if torn[0]["repaired"] is False else f"a refusal ({torn[0]['repaired']})")
        return Result(False, "in the fresh Python, a release torn over a served one (a copy cut off halfway), run() "
                             "called on its name four times, each call failing, then the release deployed again, "
                             f"complete, over it, and run() on it: {got}, not the model's output. Something kept "
                             "from the failed loads (a failure remembered by the file's name?) refuses the repaired "
                             "release until the process restarts: what a failed load leaves must go when the file's "
                             f"contents change.{hint}.")
    at_once_what = ("run() from four threads at once on one release no call had loaded, two by its name and two by a "
                    "hard link to it (a server's requests in parallel)")
    if at_once and not at_once[0]["same"]:
        return Result(False, f"in the fresh Python, {at_once_what}: not the model's output in every thread (one "
                             "raised?). Each request gets its model's output, whatever the others do meanwhile"
                             f"{hint}.")
    if at_once and at_once[0]["grew"] > 1:
        return Result(False, _mapped_more(at_once_what, at_once[0]["grew"], "each thread that found the file's "
                                          "model not loaded yet loaded it itself (a check, then a load, with another "
                                          "thread's check in between). What run() reads and changes of what it keeps "
                                          f"is one call's at a time. {_LOADED_ONCE}") + f"{hint}.")
    if at_once and not at_once[0]["environment"]:
        return Result(False, f"in the fresh Python, {at_once_what}: the process's environment variables were changed "
                             "once the four were done: one thread's setting, set back to what another had set "
                             "meanwhile? What a call changes of the process, another thread sees; each call leaves "
                             f"it as it found it.{hint}.")
    if changed := [json.loads(line.removeprefix("MIDDLE ")) for line in lines if line.startswith("MIDDLE ")]:
        if not changed[0]["same"]:
            return Result(False, "in the fresh Python, a release of the first model whose first layer changed, "
                                 "deployed over a file run() had loaded (cp -p: the old file's times): the same size, "
                                 "the same first 4 MiB and last MiB, the same CRC-32, the whole file's and each of its "
                                 "files' (the zip's directory at its end alike); only the middle of its library "
                                 "differs. run() returned " + ("the old release's output" if changed[0]["old"] else
                                                                "another output than the new release's")
                                 + ": what it reads of a file to know whether it changed is part of the file, not all "
                                 f"of it. {_LOADED_ONCE}{hint}.")
    if streams := [json.loads(line.removeprefix("STREAMS CHANGED ")) for line in lines
                   if line.startswith("STREAMS CHANGED ")]:
        called, which = streams[0]
        return Result(False, f"in the fresh Python, run() on {called} left {' and '.join(which)} leading elsewhere "
                             "than before the call: the caller's own output and errors (its logs, torch's warnings, a "
                             "crash's traceback) go there from then on. What a call changes of the process, it sets "
                             f"back, a call that fails too (lesson 00, section 2).{hint}.")
    batches = [json.loads(line.removeprefix("BATCHES ")) for line in lines if line.startswith("BATCHES ")]
    if batches and (wrong := [(rows, what) for rows, what in batches[0].items() if what != "same"]):
        rows, what = wrong[0]
        which = ("the fewest the package takes" if rows == "2" else "more than any request before")
        return Result(False, f"in the fresh Python, run() on {rows} rows of the first model's input ({which}), on a "
                             "file it had loaded: " + ("not the model's output" if what == "another output" else
                                                       f"it raised {what}") + ". The package was exported with a "
                             "dynamic batch (torch.export.Dim): it takes any number of rows from 2 on (AOTInductor's "
                             "lower bound for a dynamic size), and a request it takes is served, whatever its size"
                             f"{hint}.")
    others = [json.loads(line.removeprefix("OTHERS ")) for line in lines if line.startswith("OTHERS ")]
    if others and others[0]["gone"]:
        return Result(False, f"in the fresh Python, {others[0]['gone']} of the {others[0]['made']} files that another "
                             "process made in the temporary folder (tempfile's, $TMPDIR, which the machine's "
                             "processes share) while run() loaded a model were gone afterwards: run() removed "
                             "what appeared there during its load, not only what it made itself. On a server, another "
                             "process's files (a compiler's, another server's unpacked model) go so, in the middle of "
                             f"its work. A call removes what it made, and nothing else{hint}.")
    if stopped:  # a step the fresh Python judged wrong, and the checks above did not: a bug of this check's
        return Result(False, f"in the fresh Python, a step went wrong that this check does not name:\n{printed}")
    if from_build[0]:
        return Result(False, _from_the_build(from_build[0]) + f"{hint}.")
    return Result(True, "same as eager, for both models and the releases deployed over the last one called; a batch "
                        "the package refuses refused; grad mode and threads as they were; the operators from the "
                        "installed package")


def _stable_add_unbacked(op, path: Path) -> str | None:
    """add on two fake tensors with an unbacked symbol each, in their first sizes (the counts of x[x > 0] and
    y[y > 0], equal when the call runs, and no trace knows them), then in their second (nonzero(x).t()): a fake
    kernel's check of the shapes must hold off to the call, not refuse or decide while tracing, in any dimension."""
    from helpers import shapes

    for unknown, shown, where in (
            (0, "[u0, 3] and [u1, 3]", "x[mask] and y[mask]"),
            (1, "[3, u0] and [3, u1]", "nonzero(x).t() and nonzero(y).t(), x and y of 3 dimensions")):
        mode, counts = shapes.unbacked(2)  # new symbols: a check made on the first pair decides nothing here
        with mode:
            asserts = _runtime_asserts(mode)
            try:
                out = op(*(torch.empty((count, 3) if unknown == 0 else (3, count)) for count in counts))
            except Exception as error:  # noqa: BLE001 - the reader's fake may raise anything; that is the diagnosis
                return (f"on two fake tensors of shapes {shown}, u0 and u1 sizes no trace knows (the counts in "
                        f"{where}, as torch.compile traces add of them, which eager runs), your fake kernel raised "
                        f"{_raised(error, path)}: a check that reads a size, or decides whether two sizes are equal, "
                        "while tracing, refuses what the call would accept: a condition on sizes that the trace "
                        "cannot decide is checked when the call runs (lesson 06, section 5)")
            recorded = (_runtime_asserts(mode) > asserts
                        or mode.shape_env.replace(counts[1].node.expr) != counts[1].node.expr)
        known = 1 - unknown  # the dimension of size 3: a plain int, never a symbol
        if out.dim() != 2 or not isinstance(out.shape[known], int) or out.shape[known] != 3:
            return f"on two fake tensors of shapes {shown}, your fake kernel returned shape {list(out.shape)}"
        if not recorded:
            return (f"on two fake tensors of shapes {shown}, u0 and u1 sizes no trace knows (the counts in {where}), "
                    "your fake kernel returned a tensor and recorded nothing that makes u0 and u1 agree: the traced "
                    "program makes the call whatever the counts, where the CPU kernel refuses two shapes (a compiled "
                    "program that drops an unused result then returns where eager raises). Where it cannot decide "
                    "while tracing, a fake kernel records what must hold when the call runs (lesson 06, section 5)")
    return None


def _stable_add_backward_symbolic(op, path: Path) -> str | None:
    """None when setup_context and backward keep symbolic sizes symbolic, as a compiled training step
    (torch.compile(dynamic=True)) traces them; else what they did."""
    mode, shape_env, (fake,) = _symbolic_fakes(torch.randn(3, 4))
    symbols = [size.node.expr for size in fake.shape]
    case = (f"two float32 tensors of symbolic shape [{', '.join(map(str, symbols))}], both requiring grad, forward "
            "then backward (as a training step under torch.compile(dynamic=True) traces them)")
    with mode:
        inputs = (fake.clone().requires_grad_(), fake.clone().requires_grad_())
        try:
            grads = torch.autograd.grad(op(*inputs).sum(), inputs)
        except Exception as error:  # noqa: BLE001 - the reader's code may raise anything; that is the diagnosis
            return f"{case}: {_raised(error, path)}"
    if turned := _sizes_fixed(shape_env, symbols, path):
        return (f"{case}: your setup_context or backward turned {turned}: the backward then holds for this size only, "
                "a compiled training step compiles again for every batch size, and one on sizes known only when it "
                "runs (x[mask]) does not compile. Sizes are kept as the SymInts they are (lesson 06, section 5)")
    if any(grad.shape != fake.shape for grad in grads):
        return f"{case}: gradients of shapes {[list(grad.shape) for grad in grads]}, where the inputs' are {symbols}"
    return None


def _stable_add_opcheck_cases() -> list[tuple]:
    """08.stable_autograd's opcheck calls: (what, self, other, which of them require grad)."""
    def both(dtype, make=torch.randn):
        return make(3, 4).to(dtype), make(3, 4).to(dtype)

    cases = [(f"{what}, requires_grad {grads}", a, b, grads)
             for what, (a, b) in [("contiguous inputs", both(torch.float32)),
                                  ("a transposed (non-contiguous) `self`", (torch.randn(4, 3).t(), torch.randn(3, 4))),
                                  ("a transposed `other`", (torch.randn(3, 4), torch.randn(4, 3).t()))]
             for grads in ((True, True), (True, False), (False, True))]
    def integers(*shape):  # randn's counterpart for the integer dtypes
        return torch.randint(-100, 100, shape)

    return cases + [
        ("float64 inputs, `self` transposed", torch.randn(4, 3, dtype=torch.float64).t(),
         torch.randn(3, 4, dtype=torch.float64), (True, True)),
        ("float16 inputs", *both(torch.float16), (True, False)),
        ("bfloat16 inputs, `other` transposed", torch.randn(3, 4, dtype=torch.bfloat16),
         torch.randn(4, 3, dtype=torch.bfloat16).t(), (False, True)),
        ("int32 inputs, `self` transposed", integers(4, 3).int().t(), integers(3, 4).int(), (False, False)),
        ("int64 inputs", *both(torch.int64, integers), (False, False)),
        ("an expanded `self` (stride 0)", torch.randn(3, 1).expand(3, 4), torch.randn(3, 4), (True, False)),
        ("empty inputs, shape (0, 4)", torch.randn(0, 4), torch.randn(0, 4), (False, False)),
        ("a channels_last `self`, shape (2, 3, 2, 2)", torch.randn(2, 3, 2, 2).contiguous(
            memory_format=torch.channels_last), torch.randn(2, 3, 2, 2), (True, False)),
    ]


def _stable_add_refused() -> list[tuple]:
    """(what, self, other): calls add.cpp's kernel refuses."""
    return [
        ("a float32 `self` and a float64 `other`", torch.ones(3, 4), torch.ones(3, 4, dtype=torch.float64)),
        ("a float64 `self` and a float32 `other` (which would fit in `self`'s dtype)",
         torch.ones(3, 4, dtype=torch.float64), torch.ones(3, 4)),
        ("an int64 `self` and an int32 `other`", torch.ones(3, 4, dtype=torch.int64),
         torch.ones(3, 4, dtype=torch.int32)),
        ("`self` of shape [3, 4] and `other` of shape [4, 3]", torch.ones(3, 4), torch.ones(4, 3)),
        ("`self` of shape [3, 4] and `other` of shape [4] (which would broadcast)", torch.ones(3, 4), torch.ones(4)),
        ("`self` of shape [3, 4] and `other` of shape [3, 4, 5]", torch.ones(3, 4), torch.ones(3, 4, 5)),
        ("`self` of shape [3, 4, 5] and `other` of shape [3, 4]", torch.ones(3, 4, 5), torch.ones(3, 4)),
        ("`self` of shape [4, 3] and `other` of shape [4, 1] (which would broadcast)", torch.ones(4, 3),
         torch.ones(4, 1)),
        ("`self` of shape [3, 4] and `other` of shape [3, 5]", torch.ones(3, 4), torch.ones(3, 5)),
        ("`self` of shape [2, 3] and `other` of shape [5, 3] (the last sizes agree)", torch.ones(2, 3),
         torch.ones(5, 3)),
        ("two int16 tensors", torch.ones(3, 4, dtype=torch.int16), torch.ones(3, 4, dtype=torch.int16)),
        ("two bool tensors", torch.ones(3, 4, dtype=torch.bool), torch.ones(3, 4, dtype=torch.bool)),
        ("two complex64 tensors", torch.ones(3, 4, dtype=torch.complex64), torch.ones(3, 4, dtype=torch.complex64)),
        ("two float8_e5m2 tensors (a floating-point dtype add.cpp does not take)",
         torch.ones(3, 4, dtype=torch.float8_e5m2), torch.ones(3, 4, dtype=torch.float8_e5m2)),
        ("two uint8 tensors", torch.ones(3, 4, dtype=torch.uint8), torch.ones(3, 4, dtype=torch.uint8)),
        ("two int8 tensors", torch.ones(3, 4, dtype=torch.int8), torch.ones(3, 4, dtype=torch.int8)),
        *[(f"two {str(dtype).removeprefix('torch.')} tensors (unsigned, as wide as a dtype add.cpp takes)",
           torch.ones(3, 4, dtype=dtype), torch.ones(3, 4, dtype=dtype)) for dtype in (torch.uint32, torch.uint64)],
        # With no elements (a batch with no rows): the CPU kernel checks before it computes, so it refuses them too.
        ("an empty float32 `self` and an empty float64 `other`, both [0, 3]", torch.ones(0, 3),
         torch.ones(0, 3, dtype=torch.float64)),
        ("an empty `self` of shape [0, 3] and an empty `other` of shape [0, 4]", torch.ones(0, 3), torch.ones(0, 4)),
        # The two half dtypes autocast casts to: as wide, both floating-point, and still two dtypes.
        ("a bfloat16 `self` and a float16 `other`", torch.ones(3, 4, dtype=torch.bfloat16),
         torch.ones(3, 4, dtype=torch.float16)),
        ("a float16 `self` and a bfloat16 `other`", torch.ones(3, 4, dtype=torch.float16),
         torch.ones(3, 4, dtype=torch.bfloat16)),
    ]


_NOT_IMPLEMENTED_REFUSAL = (
    "on {what}, as torch.compile traces them, your fake kernel refused the call with NotImplementedError: "
    "torch.compile reads that from a fake kernel as \"no fake implementation\" and breaks the graph there, instead of "
    "refusing while tracing (the call then fails in eager, or fullgraph=True reports an unsupported operator). The "
    "CPU kernel's refusals are RuntimeErrors, as TORCH_CHECK raises.\nLook again at lesson 02: the workbook's Meta "
    "kernels (csrc/meta.cpp) check what its CPU kernels check, with TORCH_CHECK.")


@exercise("08.stable_autograd", "hard")
def stable_autograd(path: Path) -> Result:
    from torch.autograd.gradcheck import GradcheckError

    build.load("stable")
    if problem := _checks_with_asserts(path, "the CPU kernel's TORCH_CHECKs do"):
        return problem
    answer = load_python(path)
    library = torch.library.Library("workbook_stable", "FRAGMENT")
    torch.library.register_fake("workbook_stable::add", answer.fake, lib=library)
    torch.library.register_autograd("workbook_stable::add", answer.backward, setup_context=answer.setup_context,
                                    lib=library)
    op = torch.ops.workbook_stable.add.default
    hint = "\nLook again at lesson 08, section 2 (its limits), and at lessons 04 and 06."
    # The cheap checks first: a wrong answer fails in milliseconds, where opcheck's sweep takes seconds.
    meta = "lesson 06, section 4: a kernel given by register_fake runs on meta tensors too, and returns meta tensors"
    for dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16):
        a, b = torch.ones(4, 3, dtype=dtype).t(), torch.ones(3, 4, dtype=dtype)
        real = op(a, b)
        try:
            out = op(a.to("meta"), b.to("meta"))
        except Exception as error:  # noqa: BLE001 - the reader's fake may raise anything; that is the diagnosis
            return Result(False, f"on two {dtype} meta tensors, your fake kernel raised {_raised(error, path)}\n"
                                 f"Look again at {meta}.")
        if (out.device.type, out.shape, out.dtype, out.stride()) != ("meta", real.shape, real.dtype, real.stride()):
            return Result(False, f"on two {dtype} meta tensors (`self` transposed), your fake kernel returned shape "
                                 f"{list(out.shape)}, {out.dtype}, strides {list(out.stride())} on {out.device}: not "
                                 f"what the CPU kernel returns on CPU tensors, moved to meta.\nLook again at {meta}.")
    # Two calls on inputs of one shape: each output is the caller's own, as the CPU kernel's are.
    first, second = (op(torch.empty(2, 3, device="meta"), torch.empty(2, 3, device="meta")) for _ in range(2))
    if first is second or first.untyped_storage()._cdata == second.untyped_storage()._cdata:
        return Result(False, "two calls on meta tensors of one shape returned the same tensor (or two views of one): "
                             "each call's output is the caller's own, as the CPU kernel's is, and a caller that writes "
                             "into one (resize_, unsqueeze_, a meta-device model's initialization) changes the other "
                             f"(something kept between calls?).\nLook again at {meta}.")
    symbolic = [("two float32 tensors", torch.randn(3, 4), None),
                ("a transposed float64 tensor and its copy", torch.randn(4, 3, dtype=torch.float64).t(), None),
                ("two int32 tensors", torch.arange(12, dtype=torch.int32).view(3, 4), None)]
    lesson = "lesson 08, section 2, and lesson 06, section 5"
    if problem := _specialized_sizes(op, symbolic, path, lesson):
        return problem
    for what, a, b in _stable_add_refused():
        try:
            op(a, b)
        except RuntimeError as error:
            refused = str(error).splitlines()[0]
        try:
            op(a.to("meta"), b.to("meta"))
        except RuntimeError:  # as the CPU kernel refuses it (STD_TORCH_CHECK raises RuntimeError)
            continue
        except Exception as error:  # noqa: BLE001 - the reader's fake may raise anything; that is the diagnosis
            return Result(False, f"on meta tensors, your fake kernel refused {what} with {_raised(error, path)}, where "
                                 f"the CPU kernel raises RuntimeError (\"{refused}\"): a caller that catches "
                                 "the refusal (except RuntimeError) in eager misses it on meta tensors. torch._check "
                                 "raises "
                                 "RuntimeError, as the CPU kernel's checks do.\nLook again at lesson 02: the "
                                 "workbook's Meta kernels (csrc/meta.cpp) check what its CPU kernels check, with "
                                 "TORCH_CHECK.")
        return Result(False, f"on meta tensors, your fake kernel accepted {what}, which the CPU kernel refuses "
                             f"(\"{refused}\"): torch.compile and torch.export would trace a call that fails when it "
                             "runs.\nLook again at lesson 02: the workbook's Meta kernels (csrc/meta.cpp) check what "
                             "its CPU kernels check.")
    # A meta tensor beside a CPU one: the call goes to the Meta key, the fake kernel's, where the CPU kernel refuses
    # an argument on another device.
    if problem := _sizes_compared(op, path, lesson):  # the same refusal, on sizes that are symbols
        return problem
    for what, a, b in (("a meta `self` and a CPU `other`", torch.ones(3, 4, device="meta"), torch.ones(3, 4)),
                       ("a CPU `self` and a meta `other`", torch.ones(3, 4), torch.ones(3, 4, device="meta")),
                       # aten takes a 0-dim CPU tensor beside any device's as a number; the CPU kernel does not
                       ("a 0-dim meta `self` and a 0-dim CPU `other`", torch.tensor(1.0, device="meta"),
                        torch.tensor(1.0)),
                       ("a 0-dim CPU `self` and a 0-dim meta `other`", torch.tensor(1.0),
                        torch.tensor(1.0, device="meta"))):
        try:
            op(a, b)
        except RuntimeError:  # as the CPU kernel's checks refuse two devices
            continue
        except Exception as error:  # noqa: BLE001 - the reader's fake may raise anything; that is the diagnosis
            return Result(False, f"on {what}, your fake kernel refused the call with {_raised(error, path)}, where the "
                                 "CPU kernel's checks raise RuntimeError: a caller that catches the refusal (except "
                                 "RuntimeError) misses it here.\nLook again at lesson 02: the workbook's Meta kernels "
                                 "(csrc/meta.cpp) check what its CPU kernels check, with TORCH_CHECK.")
        return Result(False, f"on {what}, your fake kernel returned a tensor, where the CPU kernel refuses an argument "
                             "on another device than its own (read its checks).\nLook again at lesson 02: the "
                             "workbook's Meta kernels (csrc/meta.cpp) check what its CPU kernels check.")
    # A sparse meta tensor stops at SparseMeta, which has no kernel; a sparse fake tensor reaches the fake kernel.
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        dense, coo, csr, csc, bsr, bsc = (mode.from_tensor(t) for t in (
            torch.ones(3, 4), torch.ones(3, 4).to_sparse(), torch.ones(3, 4).to_sparse_csr(),
            torch.ones(3, 4).to_sparse_csc(), torch.ones(4, 4).to_sparse_bsr((2, 2)),
            torch.ones(4, 4).to_sparse_bsc((2, 2))))
        for what, a, b in (("two sparse (COO) float32 fake tensors", coo, coo),
                           ("a dense `self` and a sparse (COO) `other`, float32 fake tensors", dense, coo),
                           ("two sparse (CSR) float32 fake tensors", csr, csr),
                           ("two sparse (CSC) float32 fake tensors", csc, csc),
                           ("two sparse (BSR) float32 fake tensors", bsr, bsr),
                           ("two sparse (BSC) float32 fake tensors", bsc, bsc),
                           # mkldnn: a layout of the CPU device (a fake CPU tensor of it), not only a device name
                           *([("two mkldnn-layout float32 CPU fake tensors", *[mode.from_tensor(
                               torch.ones(3, 4).to_mkldnn())] * 2)] if torch.backends.mkldnn.is_available() else [])):
            try:
                op(a, b)
            except NotImplementedError:
                return Result(False, _NOT_IMPLEMENTED_REFUSAL.format(what=what))
            except Exception:  # noqa: BLE001 - any error refuses the call, as eager's does
                continue
            return Result(False, f"on {what}, as torch.compile traces them, your fake kernel accepted a layout the "
                                 "CPU kernel refuses (read its checks): torch.compile and torch.export would trace a "
                                 "call that fails when it runs.\nLook again at lesson 02: the workbook's Meta kernels "
                                 "(csrc/meta.cpp) check what its CPU kernels check.")
        # Fake tensors of other devices, as a model is traced for them (no such device needed): the operator has no
        # kernel there. Those of accelerators torch knows by name, beside the usual ones: a fake kernel that lists the
        # devices it refuses, rather than those it takes, misses them.
        # privateuseone:0 is lesson 09's own device before it is named (a backend of one's own).
        for device in ("cuda", "xpu", "mps", "mtia", "xla", "maia", "ipu", "hip", "vulkan", "ve", "fpga", "lazy",
                       "hpu:0", "privateuseone:0", "mkldnn", "opengl", "opencl", "ideep"):
            on_device = torch.empty(3, 4, device=device)
            try:
                op(on_device, on_device)
            except NotImplementedError:
                return Result(False, _NOT_IMPLEMENTED_REFUSAL.format(what=f"two float32 fake tensors on {device}"))
            except Exception:  # noqa: BLE001 - any error refuses the call
                continue
            return Result(False, f"on two float32 fake tensors on {device}, as torch.compile and torch.export trace "
                                 "a model for that device, your fake kernel returned a tensor: the operator has a CPU "
                                 "kernel only, so the traced program fails when it runs. A fake kernel refuses every "
                                 "device the operator has no kernel for; meta, where it runs itself, it takes.")
    for grads in ((True, True), (True, False), (False, True)):
        case = f"float64 inputs, `other` transposed, requires_grad {grads}"
        a = torch.randn(3, 4, dtype=torch.float64, requires_grad=grads[0])
        b = torch.randn(4, 3, dtype=torch.float64).t().requires_grad_(grads[1])
        try:
            torch.autograd.gradcheck(op, (a, b))
        except GradcheckError as error:  # "... with respect to input N": N counts the inputs that require grad
            which = re.search(r"with respect to input (\d+)", str(error))
            differentiable = [name for name, needs in zip(("self", "other"), grads) if needs]
            what = (f"the gradient of `{differentiable[int(which[1])]}` that your backward gives differs from the "
                    "numerical one" if which else str(error).splitlines()[0][:200])
            return Result(False, f"gradcheck failed for {case}: {what}" + hint)
    # gradcheck's grad_outputs are ones and zeros, exact in every dtype: a random one tells a gradient computed in less
    # precision than the inputs have.
    a, b = (torch.randn(3, 4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    grad_output = torch.randn(3, 4, dtype=torch.float64)
    op(a, b).backward(grad_output)
    for name, tensor in (("self", a), ("other", b)):
        if tensor.grad is not None and not torch.equal(tensor.grad, grad_output):
            error = (tensor.grad - grad_output).abs().max().item()
            return Result(False, f"float64 inputs, backward with a grad_output of random float64 values: the gradient "
                                 f"of `{name}` is off by up to {error:.2g}, as if computed in a dtype of less "
                                 "precision than the inputs' (gradcheck's grad_outputs, ones and zeros, are exact in "
                                 "every dtype and cannot tell)" + hint)
    a, b = torch.randn(3, 4, dtype=torch.float64, requires_grad=True), torch.randn(3, 4, dtype=torch.float64,
                                                                                 requires_grad=True)
    if not torch.autograd.gradgradcheck(op, (a, b), raise_exception=False):
        return Result(False, "gradgradcheck failed for float64 inputs: with create_graph=True (double backward, a "
                             "gradient penalty) the gradients your backward returns must themselves be differentiable "
                             "(lesson 04, section 2)" + hint)
    if told := _sum_gradients_differentiable(op, ("self", "other")):
        return Result(False, told + " (lesson 04, section 2)" + hint)
    # add's backward reads neither input: inputs written after the call (a buffer used again) must not stop it.
    a, b = (torch.ones(3, 4, requires_grad=True).clone() for _ in range(2))
    out = op(a, b)
    with torch.no_grad():
        a.add_(1)
        b.add_(1)
    try:
        torch.autograd.grad(out.sum(), (a, b))
    except RuntimeError as error:
        return Result(False, f"add(a, b), then a and b written in place (buffers used again), then backward: "
                             f"{str(error).splitlines()[0][:160].rstrip('.')}. torch's own a + b lets its inputs "
                             "change after the call, since its backward reads neither; yours kept them (saved for "
                             "backward?), which it does not need (lesson 04, section 1: what forward saves)")
    # Two forwards before their backwards, as a model does: what one call's backward needs is its own.
    first = [torch.randn(3, 4, requires_grad=True) for _ in range(2)]
    second = [torch.randn(2, 5, requires_grad=True) for _ in range(2)]
    out = op(*first)
    op(*second)
    try:
        grads = torch.autograd.grad(out.sum(), first)
    except RuntimeError as error:
        return Result(False, f"two calls (shapes [3, 4], then [2, 5]), then the first call's backward: "
                             f"{str(error).splitlines()[0][:160].rstrip('.')}. What backward needs comes from its "
                             "own call's ctx, not from something the next call overwrites (lesson 04, section 1)"
                             + hint)
    if any(grad.shape != (3, 4) for grad in grads):
        return Result(False, "two calls (shapes [3, 4], then [2, 5]), then the first call's backward: gradients of "
                             f"shapes {[list(grad.shape) for grad in grads]}: what backward needs comes from its own "
                             "call's ctx (lesson 04, section 1)" + hint)
    # And of two dtypes: a float64 call, a bfloat16 one, then the float64 call's backward, in float64's precision.
    first = [torch.randn(3, 4, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    out = op(*first)
    op(*(torch.randn(3, 4, dtype=torch.bfloat16, requires_grad=True) for _ in range(2)))
    grad_output = torch.randn(3, 4, dtype=torch.float64)
    grads = torch.autograd.grad(out, first, grad_output)
    if any(grad.dtype != torch.float64 or not torch.equal(grad, grad_output) for grad in grads):
        error = max((grad.double() - grad_output).abs().max().item() for grad in grads)
        return Result(False, "a float64 call, then a bfloat16 call, then the float64 call's backward (a random "
                             f"grad_output): its gradients are off by up to {error:.2g}, as if computed in the second "
                             "call's dtype: what backward needs comes from its own call's ctx (lesson 04, section 1)"
                             + hint)
    # And of two patterns of requires_grad: each backward gives gradients to its own call's inputs that need them.
    first = [torch.randn(3, 4, requires_grad=True), torch.randn(3, 4)]
    out = op(*first)
    op(torch.randn(3, 4), torch.randn(3, 4, requires_grad=True))
    out.sum().backward()
    if first[0].grad is None:
        return Result(False, "add(x, y) with x requiring grad, then add(p, q) with q alone requiring grad, then the "
                             "first call's backward: x.grad is None, where it is all ones: which inputs need a "
                             "gradient is the first call's own (ctx.needs_input_grad), not something the second call "
                             "overwrote (lesson 04, section 1)" + hint)
    # Cheap checks first: opcheck's matrix, last, costs a second.
    inputs = [torch.randn(1000, requires_grad=True) for _ in range(2)]
    if _outlives_its_last_reference(lambda: op(*inputs)):
        return Result(False, "an output of add, dropped by the caller, is still alive until Python's cycle collector "
                             "runs: the graph refers back to it (ctx.output = output, say: output -> grad_fn -> ctx -> "
                             "output), so each step's outputs, and their memory, outlive the step. What backward needs "
                             "is saved with ctx.save_for_backward, which makes no cycle (lesson 04, section 1)" + hint)
    # The graph lives on (a loss made from the output), and the output and its inputs, intermediates of a model (sin
    # and cos of a leaf, whose backwards keep the leaf alone), are dropped: their memory goes at once, since add's
    # backward reads no tensor.
    leaf = torch.randn(1000, requires_grad=True)
    a, b = leaf.sin(), leaf.cos()
    out = op(a, b)
    memory = {"an output of add": out.untyped_storage()._weak_ref(), "`self`": a.untyped_storage()._weak_ref(),
              "`other`": b.untyped_storage()._weak_ref()}
    total = out.sum()  # noqa: F841 - the graph that holds whatever ctx saved; sum's backward keeps no tensor
    del out, a, b
    try:
        kept = [name for name, reference in memory.items() if not torch.UntypedStorage._expired(reference)]
    finally:
        for reference in memory.values():
            torch.UntypedStorage._free_weak_ref(reference)
    if "an output of add" in kept:
        return Result(False, "an output of add, dropped by the caller while the graph lives on (a loss made from "
                             "it), still holds its memory: the graph keeps it (saved for backward?), which add's "
                             "backward does not need. torch's own a + b frees it at once, so a model's "
                             "intermediates do not stay until backward (lesson 04, section 1: what forward saves)"
                             + hint)
    if kept:
        held = ("still hold their memory: the graph keeps them" if len(kept) > 1 else
                "still holds its memory: the graph keeps it")
        return Result(False, f"add(a, b), a and b intermediates (sin and cos of a leaf), dropped by the caller while "
                             f"the graph lives on (a loss made from the output): {' and '.join(kept)} {held} (saved "
                             "for backward?), which add's backward does not need. torch's own a + b frees them at "
                             "once (lesson 04, section 1: what forward saves)" + hint)
    if problem := (_stable_add_unbacked(op, path) or _stable_add_backward_symbolic(op, path)):
        return Result(False, f"{problem}\nLook again at lesson 08, section 2, and lesson 06, section 5.")
    for what, a, b, grads in _stable_add_opcheck_cases():
        a_, b_ = a.detach().requires_grad_(grads[0]), b.detach().requires_grad_(grads[1])  # fresh leaves, same strides
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results = torch.library.opcheck(op, (a_, b_), raise_exception=False)
        failed = {test: outcome for test, outcome in results.items() if outcome != "SUCCESS"}
        if failed:
            # opcheck's first line, without the real output's strides where it gives them: they are the answer.
            first = str(next(iter(failed.values()))).splitlines()[0].split(" Strides are ")[0][:200]
            return Result(False, f"{what}: opcheck's {', '.join(failed)} failed" + (f" ({first})" if first else "")
                                 + hint)
        if any(FALLBACK_WARNING in str(w.message) for w in caught):
            return Result(False, f"{what}: the gradient came from torch's autograd fallback, not from a formula" + hint)
    if problem := _accepted_under_python_o(path, [
            ("`self` of shape [3, 4] and `other` of shape [4, 3]",
             "torch.ones(3, 4, device='meta'), torch.ones(4, 3, device='meta')"),
            ("two complex64 tensors", "torch.ones(3, 4, dtype=torch.complex64, device='meta'), "
                                      "torch.ones(3, 4, dtype=torch.complex64, device='meta')"),
            ("a float32 `self` and a float64 `other`",
             "torch.ones(3, 4, device='meta'), torch.ones(3, 4, dtype=torch.float64, device='meta')"),
            ("a meta `self` and a CPU `other`", "torch.ones(3, 4, device='meta'), torch.ones(3, 4)")],
            "the CPU kernel's TORCH_CHECKs do"):
        return problem
    # Every stride, those of dimensions of size 1 too (which opcheck's comparison skips): a compiled program reads the
    # fake kernel's, where eager reads the CPU kernel's (x.stride(), a view by as_strided, a C++ kernel's checks).
    # A channels_last tensor of 1 x 1 images is contiguous too, with its own strides on the two dimensions of size 1.
    pooled = torch.randn(2, 3, 1, 1).to(memory_format=torch.channels_last)
    for what, a, b in (("a channels_last `self` of shape [2, 3, 1, 1] (contiguous too: strides [3, 1, 3, 3])",
                        pooled, torch.randn(2, 3, 1, 1)),
                       ("a channels_last `other` of shape [2, 3, 1, 1]", torch.randn(2, 3, 1, 1), pooled)):
        real, out = op(a, b), op(a.to("meta"), b.to("meta"))
        if out.stride() != real.stride():
            return Result(False, f"on {what}, on meta tensors, your fake kernel returned strides {list(out.stride())}, "
                                 f"where the CPU kernel returns {list(real.stride())}: they differ on dimensions of "
                                 "size 1, which opcheck's comparison skips, and a compiled program reads them where "
                                 "eager reads the CPU kernel's (x.stride(), as_strided). The fake kernel returns what "
                                 f"the CPU kernel returns, strides and all.\nLook again at {meta}.")
    # Calls the CPU kernel takes that the samples above have not made: two 0-dim tensors, and 2**21 elements. A fake
    # kernel refuses what the CPU kernel refuses, and nothing more.
    for what, a, b in (("two 0-dim float32 tensors", torch.tensor(1.5), torch.tensor(2.0)),
                       ("two float32 tensors of shape [2048, 1024] (2**21 elements)", torch.ones(2048, 1024),
                        torch.ones(2048, 1024))):
        real = op(a, b)
        try:
            out = op(a.to("meta"), b.to("meta"))
        except Exception as error:  # noqa: BLE001 - the reader's fake may raise anything; that is the diagnosis
            return Result(False, f"on {what}, on meta tensors, your fake kernel raised {_raised(error, path)}, where "
                                 "the CPU kernel adds them: torch.compile and torch.export would refuse a call that "
                                 "eager runs. A fake kernel refuses what the CPU kernel refuses, and nothing more."
                                 f"\nLook again at {meta}.")
        if (out.shape, out.dtype, out.stride()) != (real.shape, real.dtype, real.stride()):
            return Result(False, f"on {what}, on meta tensors, your fake kernel returned shape {list(out.shape)}, "
                                 f"{out.dtype}, strides {list(out.stride())}: not what the CPU kernel returns "
                                 f"({list(real.shape)}, {real.dtype}, {list(real.stride())}).\nLook again at {meta}.")
    # What a refusal says: on meta tensors (a model built on the meta device, a memory plan) the message is all the
    # caller gets, with no operator named, so it names the operator, as every message of the CPU kernel's does.
    for what, a, b in (("a `self` of shape [3, 4] and an `other` of shape [3, 5]", torch.ones(3, 4), torch.ones(3, 5)),
                       ("a float32 `self` and a float64 `other`", torch.ones(3), torch.ones(3, dtype=torch.float64))):
        try:
            op(a, b)
        except RuntimeError as error:  # the CPU kernel's refusal, always
            said = str(error).strip().splitlines()[0]
        try:
            op(a.to("meta"), b.to("meta"))
        except RuntimeError as error:  # the fake kernel's (that it refuses, and how, is checked above)
            if "workbook_stable::add" not in str(error):
                return Result(False, f"on meta tensors, {what}: your fake kernel refused with RuntimeError: "
                                     f"{str(error).strip().splitlines()[0][:160]!r}, where the CPU kernel says "
                                     f"{said!r}. On meta tensors (a model built on the meta device) that message is "
                                     "all the caller gets, with no operator named: it names the operator and what is "
                                     "wrong, as the CPU kernel's messages do.\nLook again at " + meta + ".")
    if told := _module_keeps_no_tensor(answer):  # a gradient, an input or an output kept in a variable of the file's
        return Result(False, told + hint)
    return Result(True, "opcheck and gradcheck pass for every dtype, layout and requires_grad, float64 gradients stay "
                        "exact; the fake kernel keeps sizes symbolic, works on meta tensors, and refuses what the CPU "
                        "kernel refuses")


# ---------------------------------------------------------------------------------------------
# 09: a backend of your own


@exercise("09.served", "easy")
def served(path: Path) -> Result:
    device.enable()
    generator = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(shape, generator=generator).to(device.NAME) for shape in ((4, 5), (5, 3), (3,)))
    with trace.recording() as events:
        torch.relu(x @ w + b).sum()
    actual = device.served(events)
    answer = [tuple(call) for call in read_literal(
        path, "SERVED", "a list of (operator, server) pairs of strings",
        lambda value: isinstance(value, list) and all(
            isinstance(call, (list, tuple)) and len(call) == 2 and all(isinstance(part, str) for part in call)
            for call in value))]
    if answer == actual:
        return Result(True, "calls: " + ", ".join(f"{op} ({server})" for op, server in actual))
    if (i := first_difference(answer, actual)) is not None:
        yours, theirs = answer[i], actual[i]
        called = {op for op, _ in actual}
        inside = {event.op for event in events if event.key == "PrivateUse1"} - called  # calls kernels made inside
        overloads = {op for op in called | inside if op.split(".")[0] == yours[0].split(".")[0]} - {yours[0]}
        if yours[0] == theirs[0] and yours[1] not in ("native", "fallback"):
            where = (f"your call {i + 1}, {yours[0]}, names its server {yours[1]!r}: a server is 'native' or "
                     "'fallback', as the task writes them")
        elif yours[0] == theirs[0]:
            where = (f"your call {i + 1}, {yours[0]}, does reach the device, but its server there is not the one you "
                     "name: whether the device has a kernel of its own for an operator is in its registrations")
        elif yours[0] in [op for op, _ in actual[i + 1:]]:
            where = (f"your call {i + 1}, {yours[0]!r}, does reach the device, but later: your calls are out of order "
                     "(the order in which the expression's operators run)")
        elif yours[0].endswith(".default") and yours[0].removesuffix(".default") in called | inside:
            where = (f"your call {i + 1}, {yours[0]!r}, spells a default overload with its name: the trace recorder "
                     "names a default overload without one, as the task's examples are written")
        elif yours[0] in inside:
            where = (f"your call {i + 1}, {yours[0]!r}, is not the operator of a call that reaches the device from "
                     "outside: it runs at PrivateUse1 only inside another operator's kernel, and calls a kernel makes "
                     "inside don't count")
        elif overloads and "." not in yours[0].split("::")[-1]:
            where = (f"your call {i + 1}, {yours[0]!r}, names an operator but not its overload: the dispatcher runs a "
                     "kernel of one overload, and the trace recorder names it operator.overload (only a default "
                     "overload goes without one)")
        elif overloads:
            where = f"your call {i + 1}, {yours[0]!r}, is another overload than the one called there"
        else:
            where = f"your call {i + 1}, {yours[0]!r}, is not the operator whose kernel runs there at PrivateUse1"
    else:
        where = (f"after your {len(answer)} call(s) more reach the device" if len(actual) > len(answer)
                 else f"only {len(actual)} call(s) reach the device from outside")
    return Result(False, f"{where}.\nLook again at lesson 09, sections 4 and 6: which operators reach a backend's key "
                         "(composite ones do not), and which of them have kernels of ours.")


def _value_mismatch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Where two tensors of one shape and dtype hold different values, as a bool tensor: NaN matches NaN, and -0.0 does
    not match 0.0 (torch.equal says otherwise of both; 1 / -0.0 is -inf)."""
    if a.is_complex():
        return _value_mismatch(torch.view_as_real(a), torch.view_as_real(b)).any(-1)
    if not a.is_floating_point():
        return a != b
    nan_a, nan_b = a.isnan(), b.isnan()
    return (nan_a != nan_b) | (~nan_a & ~nan_b & ((a != b) | (a.signbit() != b.signbit())))


def _mul_out_cases() -> tuple[dict, dict, dict]:
    """09.inplace_kernel's calls, each a function of `to`, which puts a CPU tensor where the call is made (the device,
    or a copy on the CPU for aten's answer) and returns (self, other, out). A tensor given without `to` stays on the CPU
    in both. Three groups: the plain calls; those that tell a product computed or stored in the wrong dtype, or
    `other` read against its strides; the calls to refuse, with the argument on the CPU where that is why."""
    generator = torch.Generator().manual_seed(0)
    shapes = ((4, 5), (4, 5), (4, 5), (5,), (5, 4))
    x, y, z, row, columns = (torch.randn(shape, generator=generator) for shape in shapes)
    large, small = torch.arange(20).view(4, 5) + 2**40 + 1, torch.arange(20).view(4, 5) % 3 + 1
    huge = torch.arange(20).view(4, 5) + 2**53 + 1
    huge[0, 1] = 2**62 + 1  # times 2: past 2**63
    images = torch.randn(2, 3, 4, 5, generator=generator).to(memory_format=torch.channels_last)
    plain = {
        "two 4 x 5 tensors into a 4 x 5 `out`": lambda to: (to(x), to(y), to(z)),
        "a row that broadcasts as `other`": lambda to: (to(x), to(row), to(z)),
        "a row that broadcasts as `self`": lambda to: (to(row), to(x), to(z)),
        "a 4 x 1 `self` and a 1 x 5 `other`, both broadcast, into an empty `out`": lambda to: (
            to(x[:, :1].clone()), to(row[None]), to(torch.empty(0))),
        "a 0-dim CPU tensor as `other` (a scalar)": lambda to: (to(x), torch.tensor(3.0), to(z)),
        "a 0-dim CPU tensor as `self` (a scalar)": lambda to: (torch.tensor(3.0), to(y), to(z)),
        "a transposed view as `out`": lambda to: (to(x), to(y), to(columns).t()),
        "`out` that is `self` itself": lambda to: ((same := to(x)), to(y), same),
        "`out` that is `other` itself": lambda to: (to(x), (same := to(y)), same),
        "an empty `out` (0 elements)": lambda to: (to(x), to(y), to(torch.empty(0))),
        "a 2 x 3 `out`": lambda to: (to(x), to(y), to(torch.ones(2, 3))),
        "a 3 x 4 x 5 `out` (the product broadcasts into it)": lambda to: (to(x), to(y), to(torch.ones(3, 4, 5))),
        "a 5 x 4 `out` (as many elements as the product, another shape)": lambda to: (
            to(x), to(y), to(torch.ones(5, 4))),
        "an empty 0 x 5 `self` (an empty batch) times a row, into an empty `out`": lambda to: (
            to(torch.empty(0, 5)), to(row), to(torch.empty(0))),
    }
    harder = {
        "a transposed view as `other`": lambda to: (to(x), to(columns).t(), to(z)),
        "two float32 tensors into a float64 `out`": lambda to: (to(x / 3), to(y / 7), to(z.double())),
        "two float32 tensors whose product is subnormal (1e-20 times 1e-19: aten keeps it, flushes nothing)":
            lambda to: (to(torch.full((4,), 1e-20)), to(torch.full((4,), 1e-19)), to(torch.zeros(4))),
        "two int64 tensors with values near 2**40": lambda to: (to(large), to(small), to(torch.zeros_like(large))),
        # Whole numbers that float64 rounds (above 2**53), and products that wrap (int64 past 2**63, int32 past 2**31)
        "two int64 tensors whose products pass 2**53, one 2**63": lambda to: (
            to(huge), to(small), to(torch.zeros_like(huge))),
        "two int32 tensors whose products pass 2**31": lambda to: (
            to(torch.tensor([2**30, -2**30 - 1, 7], dtype=torch.int32)), to(torch.tensor([4, 5, 3], dtype=torch.int32)),
            to(torch.zeros(3, dtype=torch.int32))),
        "a float16 self times a float32 other into a float16 `out`": lambda to: (
            to(torch.arange(1000.0, 1020.0).view(4, 5).half()), to(torch.full((4, 5), 1.0003)), to(z.half())),
        "an int32 self times a float32 other into a float32 `out`": lambda to: (
            to(torch.arange(6, dtype=torch.int32)), to(torch.full((6,), 0.5)), to(torch.zeros(6))),
        "a float32 self times a 0-dim float64 CPU tensor (1/3) into a float32 `out`": lambda to: (
            to(x), torch.tensor(1 / 3, dtype=torch.float64), to(z)),
        "a float32 self times a float64 other, both of 4 x 5, into a float64 `out`, right after the call "
        "above": lambda to: (
            to(x / 3), to(y.double() / 7), to(z.double())),
        "an int32 self times a 0-dim float64 CPU tensor (0.1) into a float64 `out`": lambda to: (
            to(torch.tensor([3, 7], dtype=torch.int32)), torch.tensor(0.1, dtype=torch.float64),
            to(torch.zeros(2, dtype=torch.float64))),
        "two channels_last 2 x 3 x 4 x 5 tensors into an empty `out` (aten lays out a resized `out` as the product)":
            lambda to: (to(images), to(images * 2), to(torch.empty(0))),
        "two transposed 4 x 5 views into a 2 x 3 `out` (aten lays out a resized `out` as the product)": lambda to: (
            to(columns).t(), to(columns * 3).t(), to(torch.ones(2, 3))),
        "two 2 x 2 tensors into an `out` that is a view at offset 5 of 14 elements (resized where it is)": lambda to: (
            to(x[:2, :2].clone()), to(y[:2, :2].clone()), to(torch.zeros(14))[5:]),
        "a row expanded to 4 x 5 (stride 0) as `self`, a transposed view as `other`, into an empty `out` (aten lays "
        "out a resized `out` by the inputs' strides)": lambda to: (
            to(row[None]).expand(4, 5), to(columns).t(), to(torch.empty(0))),
        "two transposed 4 x 5 views into an `out` that is a view at offset 3 of 30 elements (resized where it is, "
        "laid out as the product)": lambda to: (to(columns).t(), to(columns * 3).t(), to(torch.zeros(30))[3:]),
        "a `self` and an `out` carved from one buffer, apart (self its first 4 elements, out a 2 x 2 view of its "
        "elements 8 to 11): `out` is not `self`, and is resized where it is": lambda to: (
            (arena := to(torch.arange(16.0)))[0:4], to(torch.full((4,), 3.0)), arena[8:12].view(2, 2)),
        "a `self` and an empty `out` carved from one buffer, where both start (self its first 4 elements, out its "
        "first 0): `out` is not `self`, though it starts where `self` does, and is resized where it is": lambda to: (
            (arena := to(torch.arange(16.0)))[0:4], to(torch.full((4,), 3.0)), arena[:0]),
        "two contiguous 1 x 3 x 4 x 5 tensors into a channels_last 1 x 3 x 2 x 2 `out` (aten lays out an `out` it "
        "resizes by the inputs, not by the `out` it was)": lambda to: (
            to(images[:1].contiguous()), to(images[1:].contiguous()),
            to(torch.zeros(1, 3, 2, 2).contiguous(memory_format=torch.channels_last))),
        _MUL_BY_ZERO: lambda to: (to(torch.tensor([-1.0, math.inf, math.nan, 2.0])), torch.tensor(0.0), to(z[0, :4])),
        "a `self` of every other element of a buffer (not dense) and a 1-element `out` carved where it starts: `out` "
        "is not `self`, though it starts where `self` does, and is resized where it is": lambda to: (
            (arena := to(torch.arange(6.0)))[::2], to(torch.full((3,), 2.0)), arena[:1]),
        "two transposed 4 x 5 views into a 2 x 10 `out` (as many elements as the product, another shape: aten lays "
        "out the `out` it resizes as the product)": lambda to: (
            to(columns).t(), to(columns * 3).t(), to(torch.ones(2, 10))),
        "two channels_last 2 x 3 x 4 x 5 tensors into an `out` of 120 elements in one dimension (as many elements as "
        "the product, another shape: aten lays out the `out` it resizes as the product)": lambda to: (
            to(images), to(images * 2), to(torch.ones(120))),
        "a transposed 4 x 5 view as `self` beside a contiguous `other`, into an empty `out` (where the inputs' "
        "layouts differ, aten lays out a resized `out` as the first one)": lambda to: (
            to(columns).t(), to(x), to(torch.empty(0))),
        "two int8 tensors whose product overflows int8 (100 times 100), into an int16 `out` (the product wraps in "
        "int8, its dtype, and is then stored)": lambda to: (
            to(torch.tensor([100, 7], dtype=torch.int8)), to(torch.tensor([100, 3], dtype=torch.int8)),
            to(torch.zeros(2, dtype=torch.int16))),
    }
    refused = {
        "a 4 x 5 CPU tensor as `other`": ("other", lambda to: (to(x), y, to(z))),
        "a (1,)-shaped CPU tensor as `self`": ("self", lambda to: (torch.tensor([3.0]), to(y), to(z))),
        "a 0-dim CPU tensor as `self` and a (1,)-shaped CPU tensor as `other`, `out` on the device": (
            "other", lambda to: (torch.tensor(2.0), torch.tensor([3.0]), to(z))),
        "a 4 x 5 CPU tensor as `out`": ("out", lambda to: (to(x), to(y), z.clone())),
        "an empty CPU tensor as `out` (0 elements: there is nothing to move, and still it is on the CPU)": (
            "out", lambda to: (to(x), to(y), torch.empty(0))),
        "a 0-dim CPU tensor as `out`, 0-dim `self` and `other` on the device": (
            "out", lambda to: (to(torch.tensor(2.0)), to(torch.tensor(3.0)), torch.tensor(0.0))),
        "a float32 product into an int64 `out`": (None, lambda to: (to(x), to(y), to(torch.zeros_like(large)))),
        "a float32 product into an empty int64 `out`": (
            None, lambda to: (to(x), to(y), to(torch.empty(0, dtype=torch.int64)))),
        "a float32 product into an int64 `out` of another shape ([4]: a product it could hold would resize it)": (
            None, lambda to: (to(x), to(y), to(torch.arange(4)))),
        "an int16 self times a 0-dim CPU 2.5 into an int16 `out`": (None, lambda to: (
            to(torch.arange(6, dtype=torch.int16)), torch.tensor(2.5), to(torch.zeros(6, dtype=torch.int16)))),
        "`out` that is `self` itself, which the product would have to grow (self [5], other [4, 5])": (
            None, lambda to: ((same := to(row)), to(x), same)),
        "`out` that is `other` itself, which the product would have to grow (self [4, 5], other [1, 5])": (
            None, lambda to: (to(x), (same := to(row[None])), same)),
        "`out` that is `self` itself, of another shape than the product with as many elements (self [5], other "
        "[1, 5])": (None, lambda to: ((same := to(row)), to(row[None] * 2), same)),
        "an int64 product into a bool `out`": (None, lambda to: (
            to(torch.arange(6)), to(torch.arange(6)), to(torch.zeros(6, dtype=torch.bool)))),
        "`out` that is a float16 `self` itself, which the product with a float32 `other` would have to grow (self [3], "
        "other [2, 3])": (None, lambda to: ((same := to(row[:3].half())), to(x[:2, :3].clone()), same)),
        # Values the `out` could hold: aten refuses by dtype, whatever the values (the next batch's may not fit).
        "a float32 product of whole numbers (0, 2, 4, 6) into an int64 `out`": (None, lambda to: (
            to(torch.arange(4.0)), to(torch.full((4,), 2.0)), to(torch.zeros(4, dtype=torch.int64)))),
        "an empty 0 x 5 float32 `self` times a row into an int64 `out` (an empty batch: refused by dtype all the "
        "same)": (None, lambda to: (to(torch.zeros(0, 5)), to(torch.ones(5)), to(torch.zeros(3, dtype=torch.int64)))),
        "an int64 product of 0s and 1s into a bool `out`": (None, lambda to: (
            to(torch.tensor([0, 1, 1, 0])), to(torch.tensor([1, 1, 0, 0])), to(torch.zeros(4, dtype=torch.bool)))),
        "a 0-dim meta tensor as `other` (a scalar of another device than the CPU: as a CUDA scalar beside the device's "
        "tensors reaches this kernel, whose key outranks CUDA's)": (
            "other", lambda to: (to(x), torch.tensor(3.0, device="meta"), to(z))),
        "a float32 self times a complex64 other into a float32 `out`": (None, lambda to: (
            to(torch.ones(6)), to(torch.full((6,), 1j)), to(torch.zeros(6)))),
        "a 0-dim CUDA tensor as `other` (a CUDA scalar beside the device's tensors, which reaches this kernel: "
        "PrivateUse1 outranks CUDA)": ("other", lambda to: (to(x), _cuda_scalar(3.0), to(z))),
        "a CPU `other` beside a float64 `self` and `out`": ("other", lambda to: (
            to(torch.ones(3, dtype=torch.float64)), torch.ones(3, dtype=torch.float64),
            to(torch.zeros(3, dtype=torch.float64)))),
        # In place through out= (torch.mul(x, 2.5, out=x)): x.mul_(2.5) is refused above this kernel, this is not.
        "an int64 `out` that is `self` itself, times a 0-dim CPU 2.5 (torch.mul(x, 2.5, out=x)): a float32 product": (
            None, lambda to: ((same := to(torch.arange(4))), torch.tensor(2.5), same)),
        "an int64 `out` that is `other` itself, a float32 `self` times it: a float32 product": (
            None, lambda to: (to(torch.full((4,), 2.5)), (same := to(torch.arange(4))), same)),
    }
    return plain, harder, refused


class _CudaScalarStandIn(torch.Tensor):
    """A 0-dim float32 tensor on cuda:0 where no GPU is: what a kernel reads of a real one (its device, dtype,
    shape; its value once copied to the CPU), and torch's refusal of it beside CPU tensors."""

    @staticmethod
    def __new__(cls, value: torch.Tensor):
        stand_in = torch.Tensor._make_wrapper_subclass(cls, (), dtype=value.dtype, device=torch.device("cuda", 0))
        stand_in.value = value
        return stand_in

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.ops.aten._to_copy.default, torch.ops.aten.clone.default, torch.ops.aten.detach.default,
                    torch.ops.aten.alias.default):
            value = func(args[0].value, **{name: setting for name, setting in kwargs.items() if name != "device"})
            to = kwargs.get("device") if func is torch.ops.aten._to_copy.default else None
            return value if to is not None and torch.device(to).type == "cpu" else cls(value)
        if func is torch.ops.aten._local_scalar_dense.default:
            return args[0].value.item()
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, cuda:0 and "
                           "cpu!")


def _cuda_scalar(value: float) -> torch.Tensor:
    """A 0-dim float32 tensor on the GPU, or its stand-in where none is."""
    if torch.cuda.is_available():
        return torch.tensor(value, device="cuda")
    return _CudaScalarStandIn(torch.tensor(value))


_MUL_BY_ZERO = "a tensor of -1, inf, nan and 2 times a 0-dim CPU 0.0"


def _mul_out_problems() -> list[str]:
    """What a kernel for aten::mul.out at PrivateUse1 must do on the device: [] when it does."""
    problems = []
    kernel_only = torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1)
    repointed = []  # once your kernel was seen to call aten::set_ on the device
    grad_mode = torch.is_grad_enabled()
    # The process's settings too (the random numbers aside: the check draws its inputs between the calls).
    process = {what: setting for what, setting in _process_state().items() if "random" not in what}

    def settings_left(case: str) -> None:  # the process's settings and grad mode: a kernel restores what it changes
        if (changed := _process_state_changed(process)) and not any("was not as before" in p for p in problems):
            problems.append(f"after your kernel ran ({case}), {changed} was not as before: a setting of the whole "
                            "process, which every later call, the caller's own too, runs with. A kernel changes "
                            "nothing but its output (lesson 00, section 2)")
        if torch.is_grad_enabled() != grad_mode:
            if not any("grad mode was left" in problem for problem in problems):
                problems.append(f"after your kernel ran ({case}), grad mode was left "
                                f"{'on' if torch.is_grad_enabled() else 'off'}, where it was "
                                f"{'on' if grad_mode else 'off'} before the call: a kernel that changes thread-local "
                                "state must restore it, or every later call runs changed (lesson 00, section 2)")
            torch.set_grad_enabled(grad_mode)

    def on_device(tensor):
        return tensor.to(device.NAME)

    def on_cpu(tensor):
        return tensor.clone()

    def call(arguments):  # straight to your kernel: the autograd kernel above it returns out whatever yours returns
        self, other, out = arguments
        with trace.recording() as events:
            returned = torch.ops.aten.mul.out.redispatch(kernel_only, self, other, out=out)
        # A tensor pointed at other memory (set_): the device's fallback serves set_ by running it on CPU copies and
        # writing the result back into the tensor's own memory, so out holds the product here all the same.
        if not repointed and any(event.op.startswith("aten::set_") and event.key == "PrivateUse1" for event in events):
            repointed.append(None)
            problems.append("your kernel called aten::set_ on the device, which points a tensor at other memory: here "
                            "the device's boxed fallback serves set_, and writes what it computed back into out's own "
                            "memory, so out holds the product all the same; on a backend with a set_ kernel of its "
                            "own (CPU's, CUDA's, your device's once it has one) out is pointed at the product's "
                            "memory, and a caller's buffer that out is a view of is never written. An out= kernel "
                            "resizes out where it is and writes into it")
        return returned

    def raised(case: str, error: Exception) -> str:
        if isinstance(error, RecursionError):
            return (f"on {case}: your kernel called itself until Python's recursion limit: on the device, mul_ and "
                    "torch.mul(..., out=) reach aten::mul.out, which is your kernel now (lesson 09, section 7: "
                    "aten's structured kernels call the out= form)")
        return f"on {case}: your kernel raised {type(error).__name__}: {(str(error).splitlines() or [''])[0][:160]}"

    def snapshot(tensors):  # each argument as the CPU sees it now, once per tensor object (out may be self)
        return [(t.shape, t.stride(), None if t.is_meta else t.cpu().clone()) for t in tensors]  # meta: no values

    def unchanged(before, tensors):
        return all((t.shape, t.stride()) == (shape, strides)
                   and (values is None or not _value_mismatch(t.cpu(), values).any())
                   for (shape, strides, values), t in zip(before, tensors))

    strided_other = ("out holds the wrong values, though they were right with contiguous arguments: `other` is a "
                     "transposed view here, and its elements were not read where its strides put them")
    far = ("out holds values far from those aten's mul writes (at {at}: {got} for {want}): the product was computed, "
           "or an argument converted, in another dtype than aten computes self * other in")
    near = ("out holds values near the product but not those aten's mul writes (at {at}: {got} for {want}): the "
            "product was computed, or an argument rounded, in another dtype than aten computes self * other in")
    plain, harder, refused = _mul_out_cases()
    after_the_call_above = ("out holds values other than those aten's mul writes (at {at}: {got} for {want}), right "
                            "after a call on other tensors of the same shape: the product was computed in another "
                            "dtype than aten computes self * other in, or from something kept from that call (a copy "
                            "kept by the argument's address or version?)")
    by_zero = ("out holds {got} at {at}, where aten's mul writes {want}: a product with 0 is not always +0 (IEEE 754: "
               "-1 * 0 is -0.0, inf * 0 and nan * 0 are nan, the nan that shows an overflow upstream): each element is "
               "computed, whatever the scalar")
    wrong_values = {"a transposed view as `other`": strided_other, _MUL_BY_ZERO: by_zero,
                    "a float32 self times a float64 other, both of 4 x 5, into a float64 `out`, right after the call "
                    "above": after_the_call_above}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # aten warns when it resizes an `out` that had elements: not the point here
        for group in (plain, harder):
            if problems:  # the harder cases once the plain ones pass
                break
            for case, build_arguments in group.items():
                expected = build_arguments(on_cpu)
                aten_inputs = [t for t in expected[:2] if t is not expected[2]]
                aten_inputs_before = snapshot(aten_inputs)
                torch.mul(expected[0], expected[1], out=expected[2])
                # An `out` resized over an input's memory (both carved from one buffer) writes that input, in aten too.
                aten_wrote_an_input = not unchanged(aten_inputs_before, aten_inputs)
                arguments = build_arguments(on_device)
                self, other, out = arguments
                inputs = [t for t in (self, other) if t is not out]
                inputs_before = snapshot(inputs)
                storage = out.data_ptr() if out.numel() == expected[2].numel() else None  # None: out must grow
                resized = out.shape != expected[2].shape
                try:
                    returned = call(arguments)
                except Exception as error:  # noqa: BLE001 - any error of the reader's code is a diagnosis
                    problems.append(raised(case, error))
                    settings_left(f"on {case}")
                    continue
                settings_left(f"on {case}")
                want = expected[2]
                values = out.cpu()
                if not aten_wrote_an_input and not unchanged(inputs_before, inputs):
                    problems.append(f"on {case}: your kernel changed `self` or `other`, which is not `out`: only `out` "
                                    "is written")
                elif storage is not None and out.data_ptr() != storage:
                    problems.append(f"on {case}: out's memory was replaced, not written into")
                elif values.shape != want.shape:
                    problems.append(f"on {case}: out has shape {list(values.shape)} after the call, not the "
                                    "product's: an `out` of another shape is resized")
                elif values.dtype != want.dtype or _value_mismatch(values, want).any():
                    wrong = wrong_values.get(case, near if group is harder else None)
                    if wrong is near and not torch.allclose(values.double(), want.double(), rtol=1e-2):
                        wrong = far  # not a rounding: an argument or the product cast to an integer dtype, say
                    if wrong:
                        at = next(zip(*torch.nonzero(_value_mismatch(values, want), as_tuple=True)), ())
                        at = tuple(int(i) for i in at)
                        problems.append(f"on {case}: " + wrong.format(at=list(at), got=values[at].item(),
                                                                      want=want[at].item()))
                    else:
                        as_it_was = torch.equal(values, build_arguments(on_cpu)[2])
                        problems.append(f"on {case}: out {'did not change' if as_it_was else 'holds the wrong values'}"
                                        ": the product must be written into out's own memory, on the device")
                elif out.storage_offset() != want.storage_offset():
                    problems.append(f"on {case}: out holds the product, at offset {out.storage_offset()} of its "
                                    f"storage, where aten's is at {want.storage_offset()}: an `out` is resized where "
                                    "it is, and the caller's other views of that memory see the product there")
                elif out.stride() != want.stride() and resized:
                    problems.append(f"on {case}: out holds the product, with strides {list(out.stride())} where aten's "
                                    f"has {list(want.stride())}: aten lays out an `out` it resizes as it lays out the "
                                    "product, by the inputs' strides (channels_last, transposed or expanded inputs), "
                                    "whatever out's own were")
                elif out.stride() != want.stride():
                    problems.append(f"on {case}: out holds the product, with strides {list(out.stride())} where aten's "
                                    f"has {list(want.stride())}: out's memory is written as it is laid out")
                elif returned is not out:
                    what = (f"a new tensor on {returned.device}" if isinstance(returned, torch.Tensor)
                            else type(returned).__name__)
                    problems.append(f"on {case}: out holds the product, but your kernel returned {what}, not out: an "
                                    "out= kernel returns the tensor it wrote into (torch.mul(..., out=o) hides this: "
                                    "the autograd kernel above yours returns o whatever yours returns)")
        # Refusals: each must raise, and leave every argument as it was.
        for case, (on_the_cpu, build_arguments) in refused.items():
            if problems:
                break
            arguments = build_arguments(on_device)
            before = snapshot(arguments)
            try:
                call(arguments)
            except RuntimeError as error:
                settings_left(f"on {case}")
                if isinstance(error, RecursionError):
                    problems.append(raised(case, error))
                    continue
                # The argument's name as a word: "out" inside "mul.out" or "output" does not name it.
                if on_the_cpu and not re.search(rf"(?<![.\w]){on_the_cpu}\b", str(error)):
                    problems.append(f"{case} was refused, but the error does not name `{on_the_cpu}`: "
                                    f"{str(error).splitlines()[0]}")
                elif not unchanged(before, arguments):
                    problems.append(f"{case} was refused, but only after your kernel had changed an argument: a "
                                    "refused call must leave every argument as it was")
                continue
            except Exception as error:  # noqa: BLE001 - any error of the reader's code is a diagnosis
                settings_left(f"on {case}")
                problems.append(raised(case, error) + ", where aten's kernels raise a RuntimeError")
                continue
            settings_left(f"on {case}")
            self, other, out = arguments
            product = torch.result_type(self, other)
            problems.append(f"{case} was accepted: " + (
                "mixed devices must be refused" if on_the_cpu else
                f"out can't hold the {product} product, and aten's out= kernels refuse it"
                + (", `out` an input too" if out is self or out is other else "")
                if not torch.can_cast(product, out.dtype) else
                "aten's out= kernels will not resize an `out` that is also an input"))
    if not problems:  # a call made inside torch.no_grad() leaves grad mode off, as the caller has it
        with torch.no_grad():
            x = torch.randn(3, 4).to(device.NAME)
            call((x, x, torch.empty(0).to(device.NAME)))
            if torch.is_grad_enabled():
                problems.append("called inside torch.no_grad(), your kernel left grad mode on: a kernel that changes "
                                "thread-local state restores what it found, not what it expects (lesson 00, section "
                                "2)")
    if not problems:  # the same tensors again, after self changed in place: each call reads what they hold now
        x, y = torch.ones(4).to(device.NAME), torch.full((4,), 3.0).to(device.NAME)
        out = torch.empty(4).to(device.NAME)
        call((x, y, out))
        x.fill_(2.0)
        call((x, y, out))
        if not torch.equal(out.cpu(), torch.full((4,), 6.0)):
            problems.append(f"mul_out(x, y, out=out) with x all 1s and y all 3s, then x.fill_(2.0), then the same call "
                            f"again: out holds {out.cpu().tolist()}, where x * y is now all 6s: the second call used "
                            "something the first one kept (a copy of x, by its address?). A kernel reads its arguments "
                            "as they are at each call")
    if not problems:  # again, after a write through .data, which leaves y's version counter as it was
        y.data.fill_(5.0)  # as optimizers and weight loaders write
        call((x, y, out))
        if not torch.equal(out.cpu(), torch.full((4,), 10.0)):
            problems.append(f"the same call once more, after y.data.fill_(5.0) (a write through .data, as optimizers "
                            f"and weight loaders make, which leaves y's version counter as it was): out holds "
                            f"{out.cpu().tolist()}, where x * y is now all 10s: the call used something an earlier one "
                            "kept. A kernel reads its arguments as they are at each call")
    if not problems:  # tensors made inside torch.inference_mode(), as a server makes them: no version counter
        with torch.inference_mode():
            x, y = torch.full((4,), 2.0).to(device.NAME), torch.full((4,), 3.0).to(device.NAME)
            out = torch.empty(4).to(device.NAME)
            try:
                call((x, y, out))
            except Exception as error:  # noqa: BLE001 - any error of the reader's code is a diagnosis
                problems.append(raised("tensors made inside torch.inference_mode() (they have no version counter)",
                                       error))
            else:
                if not torch.equal(out.cpu(), torch.full((4,), 6.0)):
                    problems.append("on tensors made inside torch.inference_mode(): out holds "
                                    f"{out.cpu().tolist()}, where x * y is all 6s")
    if not problems:  # the whole way from Python: the autograd and ADInplaceOrView kernels above yours, then yours
        x, y = torch.randn(3, 4), torch.randn(3, 4)
        out = torch.empty(0).to(device.NAME)
        torch.mul(x.to(device.NAME), y.to(device.NAME), out=out)
        if not torch.equal(out.cpu(), x * y):
            problems.append("torch.mul(x, y, out=out) on the device, from Python, left out without the product")
    if not problems:  # the same two tensors again, each transposed in place since (t_): their layout is new
        x, y = torch.randn(3, 4), torch.randn(3, 4)
        on_x, on_y = on_device(x), on_device(y)
        call((on_x, on_y, on_device(torch.empty(0))))
        for t in (x, y, on_x, on_y):
            t.t_()
        out, want = on_device(torch.empty(0)), torch.empty(0)
        try:
            call((on_x, on_y, out))
        except Exception as error:  # noqa: BLE001 - any error of the reader's code is a diagnosis
            problems.append(raised("two tensors multiplied, then both transposed in place (t_) and multiplied again",
                                   error))
        else:
            torch.mul(x, y, out=want)
            if out.shape != want.shape or out.stride() != want.stride() or not torch.equal(out.cpu(), want):
                problems.append(f"two tensors multiplied, then both transposed in place (t_) and multiplied again: "
                                f"out has shape {list(out.shape)}, strides {list(out.stride())}, where aten's has "
                                f"{list(want.shape)}, {list(want.stride())} (or other values): something kept from the "
                                "first call (by the arguments' ids?) described the tensors as they were")
    # A number: x.mul_(2) and torch.mul(x, 2.5, out=out) hand a Python kernel the number itself, not a tensor.
    # A float16 x scaled by a number: aten computes in float32 (a number keeps its precision), then rounds once.
    # A float64 x times 0.1, which float32 cannot hold: a number keeps a double's precision.
    half = torch.tensor([0.0010004, 0.3, -2.0], dtype=torch.float16)
    for number, how, x in ((2, "x.mul_(2)", torch.randn(3, 4)), (2.5, "torch.mul(x, 2.5, out=out)", torch.randn(3, 4)),
                           (1e5, "x.mul_(100000.0), x in float16", half),
                           (0.1, "torch.mul(x, 0.1, out=out), x in float64",
                            torch.tensor([3.0, 7.0, 1e10], dtype=torch.float64)),
                           (2.5, "torch.mul(2.5, x, out=out), the number as `self`", torch.randn(3, 4)),
                           (1j, "x.mul_(1j), x in complex64", torch.tensor([1 + 2j, -3j, 0.5], dtype=torch.complex64)),
                           (2j, "torch.mul(x, 2j, out=out), x in complex128",
                            torch.tensor([1 + 1j, 2, -1j], dtype=torch.complex128)),
                           (0, "x.mul_(0), x holding -1, inf, nan and 2",
                            torch.tensor([-1.0, math.inf, math.nan, 2.0]))):
        if problems:
            break
        on_device = x.to(device.NAME)
        try:
            if how.startswith("x.mul_"):
                on_device.mul_(number)
                got = on_device
            elif how.startswith("torch.mul(2.5, x"):
                got = torch.mul(number, on_device, out=torch.empty(0, dtype=x.dtype).to(device.NAME))
            else:
                got = torch.mul(on_device, number, out=torch.empty(0, dtype=x.dtype).to(device.NAME))
        except Exception as error:  # noqa: BLE001 - any error of the reader's code is a diagnosis
            problems.append(raised(f"{how} on the device, a Python {type(number).__name__} among the arguments (a "
                                   "number reaches the kernel as it is)", error))
            continue
        if (got.dtype != (want := x.clone().mul_(number)).dtype or got.shape != want.shape
                or _value_mismatch(got.cpu(), want).any()):
            computes = ("computes with it in float32 for a float16 x, then rounds once" if x.dtype == torch.float16
                        else f"and computes in x's dtype, {_dtype_names([x.dtype])}, with the number at that precision")
            why = ("a product with 0 is not always +0: -1 * 0 is -0.0, inf * 0 and nan * 0 are nan" if number == 0 else
                   f"a Python number is not a tensor of x's dtype, nor of the default dtype: aten keeps it a double, "
                   f"{computes}")
            problems.append(f"{how} on the device: {got.cpu().tolist()}, where aten's mul gives {want.tolist()} "
                            f"({why})")
    # Two numbers, `out` on the device: aten multiplies them in the dtype torch computes them in (the default float
    # dtype for a float), then stores the product in out, resized to 0 dimensions.
    # Products that float32 rounds, and that int64 wraps (2**40 * 2**40 is 0 in int64): computed in that dtype.
    for self, other, dtype in ((2, 3.5, torch.float32), (3, 7, torch.int64), (0.5, 4, torch.float64),
                               (4.765969541523559, 5.833820394550312, torch.float32), (2**40, 2**40, torch.int64)):
        if problems:
            break
        how = (f"torch.mul({self}, {other}, out=out), two Python numbers and a {_dtype_names([dtype])} `out` on the "
               "device")
        want = torch.mul(self, other, out=torch.empty(0, dtype=dtype))
        try:
            got = torch.mul(self, other, out=(out := torch.empty(0, dtype=dtype).to(device.NAME)))
        except Exception as error:  # noqa: BLE001 - any error of the reader's code is a diagnosis
            problems.append(raised(how, error) + ", where aten's mul writes their product into out")
            continue
        if got is not out or out.shape != want.shape or not torch.equal(out.cpu(), want):
            problems.append(f"{how}: out is {out.cpu()}, where aten's mul makes it {want}")
    # A number beside a 0-dim tensor of the device, into a wider `out`: torch wraps the number, and a wrapped number
    # ranks below any tensor, a 0-dim one too: it changes the dtype only by a higher kind (int64 times 0.1: float32).
    for x, dtype in ((torch.tensor(3.0, dtype=torch.float16), torch.float32),
                     (torch.tensor(3.0), torch.float64), (torch.tensor(3), torch.float64)):
        if problems:
            break
        how = (f"torch.mul(x, 0.1, out=out), x a 0-dim {_dtype_names([x.dtype])} tensor on the device and a "
               f"{_dtype_names([dtype])} `out`")
        want = torch.mul(x, 0.1, out=torch.empty((), dtype=dtype))
        try:
            torch.mul(x.to(device.NAME), 0.1, out=(out := torch.empty((), dtype=dtype).to(device.NAME)))
        except Exception as error:  # noqa: BLE001 - any error of the reader's code is a diagnosis
            problems.append(raised(how, error))
            continue
        if out.shape != want.shape or not torch.equal(out.cpu(), want):
            problems.append(f"{how}: out is {out.cpu().item()!r}, where aten's mul gives {want.item()!r}: torch "
                            "wraps a Python number, and a wrapped number ranks below every tensor, a 0-dim one "
                            "too: it changes the product's dtype only by a higher kind (an integer x times 0.1 is the "
                            "default float dtype's), never to float64 by its own precision; and the product is "
                            "computed, and rounded, in that dtype before `out` stores it in its own")
    return problems


@exercise("09.inplace_kernel", "hard")
def inplace_kernel(path: Path) -> Result:
    device.enable()
    answer = load_python(path)
    library = torch.library.Library("aten", "IMPL")
    library.impl("mul.out", answer.mul_out, "PrivateUse1")
    problems = _mul_out_problems()
    if not problems:
        return Result(True, "mul.out writes into out on the device, as aten's does, and refuses what it refuses")
    more = f"\n(and {len(problems) - 3} more cases)" if len(problems) > 3 else ""
    return Result(False, "\n".join(problems[:3]) + more + "\nLook again at lesson 09, section 7: mixed devices, and a "
                                                        "kernel that writes into its argument, in place of aten's.")


# ---------------------------------------------------------------------------------------------
# 10: the Python key


_HALF = (torch.float16, torch.bfloat16)


# 10.upcast_mode's operators an output of which is a view of x
_UPCAST_VIEWS = ("row_view", "first_row_counted", "sum_and_first_row")


def _upcast_operators(received: list) -> torch.library.Library:
    """10.upcast_mode's operators, in namespace `exercise`: Python kernels at CPU that refuse float16 and bfloat16, and
    note the dtypes they receive in `received`."""
    def refusing(name, *tensors):
        dtypes = tuple(t.dtype for t in tensors if isinstance(t, torch.Tensor))
        received.append((name, dtypes))
        if any(dtype in _HALF for dtype in dtypes):
            raise RuntimeError(f"exercise::{name}: no float16 or bfloat16 kernel, got {dtypes}")

    def fp32_only(a, b, *, bias=None, alpha=1.0):
        refusing("fp32_only", a, b, bias)
        return a * b * alpha + (0 if bias is None else bias)

    def scale_(x, s):
        refusing("scale_", x)
        return x.mul_(s)

    def mul_out(a, b, *, out):
        refusing("mul_out", a, b, out)
        return torch.mul(a, b, out=out)

    def count_above(x, t):
        refusing("count_above", x)
        return (x > t).sum()

    def split_signs(x):
        refusing("split_signs", x)
        return x.clamp(min=0), x.clamp(max=0)

    def take_rows(index, x):
        refusing("take_rows", index, x)
        return x[index]

    def row_view(x, i):  # a view: it computes nothing, and takes any dtype
        received.append(("row_view", (x.dtype,)))
        return x[i]

    def first_row_counted(x, count):  # a view of x that writes `count` too: its schema is no view's by torch's test
        received.append(("first_row_counted", (x.dtype,)))
        count.fill_(x.shape[1])
        return x[0]

    def sum_and_first_row(x):  # a new tensor first, then a view of x: a view in a later output, as no aten op has it
        received.append(("sum_and_first_row", (x.dtype,)))
        return x.sum(0), x[0]

    def minmax_out(x, *, min, max):
        refusing("minmax_out", x, min, max)
        torch.amin(x, 1, out=min)
        torch.amax(x, 1, out=max)
        return min, max

    def scale_all_(xs, s):
        refusing("scale_all_", *xs)
        for x in xs:
            x.mul_(s)

    def total(xs):
        refusing("total", *xs)
        return sum(x.sum() for x in xs)

    def scale_both_(x, y, s):
        refusing("scale_both_", x, y)
        x.mul_(s)
        y.mul_(s)

    def cast_sum(x, *, out_dtype):  # names its output's dtype by a keyword of its own
        refusing("cast_sum", x)
        return x.sum(dtype=out_dtype)

    def fill_then_fail_(x):  # writes part of x, then raises, as a kernel that fails half way does
        refusing("fill_then_fail_", x)
        x[:2] = 1
        raise RuntimeError("exercise::fill_then_fail_: failed after writing x[:2]")

    def fill_then_fail_out(x, *, out):  # writes the first half of out, then raises
        refusing("fill_then_fail_out", x, out)
        out[:out.shape[0] // 2] = x[:out.shape[0] // 2]
        raise RuntimeError("exercise::fill_then_fail_out: failed after writing the first half of out")

    def resize_then_fail_out(x, *, out):  # resizes out to x's shape, writes its first two elements, then raises
        refusing("resize_then_fail_out", x, out)
        out.resize_(x.shape)
        out[:2] = x[:2]
        raise ValueError("exercise::resize_then_fail_out: failed after writing out[:2]")

    def relayout_out(x, *, out):  # lays out an out of x's shape as x is laid out: its shape kept, its strides not
        refusing("relayout_out", x, out)
        channels_last = x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)
        out.resize_(x.shape, memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        return out.copy_(x * 2)

    def accumulate_(acc, x):  # writes acc, whatever its floating dtype, and returns it
        refusing("accumulate_", acc, x)
        return acc.add_(x)

    def scale_both_swapped_(x, y, s):  # returns the two it writes in the other order: y first
        refusing("scale_both_swapped_", x, y)
        return y.mul_(s), x.mul_(s)

    def cast_twice(x, dtype):  # names its output's dtype by an argument given by position
        refusing("cast_twice", x)
        return (x * 2).to(dtype)

    def double_sum(x):  # accumulates in float64, and returns it: a floating-point output all the same
        refusing("double_sum", x)
        return x.double().sum(0)

    def double_then_add_(x, y):  # writes x, then reads y: where y is x, it reads what it wrote
        refusing("double_then_add_", x, y)
        return x.mul_(2).add_(y)

    def mean_number(x):  # a Python number, computed in float64: 1/3, say, which no half dtype holds
        refusing("mean_number", x)
        return x.double().mean().item()

    def centre_(mean, x):  # writes `mean`, returns a new tensor, as batch norm writes its running statistics
        refusing("centre_", mean, x)
        mean.copy_(x.mean(0))
        return x - mean

    library = torch.library.Library("exercise", "FRAGMENT")
    for schema, kernel, tags in [
            ("fp32_only(Tensor a, Tensor b, *, Tensor? bias=None, float alpha=1.0) -> Tensor", fp32_only, ()),
            ("scale_(Tensor(a!) x, float s) -> Tensor(a!)", scale_, (torch.Tag.inplace,)),
            ("mul_out(Tensor a, Tensor b, *, Tensor(a!) out) -> Tensor(a!)", mul_out, (torch.Tag.out,)),
            ("count_above(Tensor x, float t) -> Tensor", count_above, ()),
            ("split_signs(Tensor x) -> (Tensor, Tensor)", split_signs, ()),
            ("take_rows(Tensor index, Tensor x) -> Tensor", take_rows, ()),
            ("row_view(Tensor(a) x, int i) -> Tensor(a)", row_view, ()),
            ("first_row_counted(Tensor(a) x, Tensor(b!) count) -> Tensor(a)", first_row_counted, ()),
            ("sum_and_first_row(Tensor(a) x) -> (Tensor, Tensor(a))", sum_and_first_row, ()),
            ("minmax_out(Tensor x, *, Tensor(a!) min, Tensor(b!) max) -> (Tensor(a!), Tensor(b!))", minmax_out,
             (torch.Tag.out,)),
            ("scale_all_(Tensor(a!)[] xs, float s) -> ()", scale_all_, ()),
            ("total(Tensor[] xs) -> Tensor", total, ()),
            ("scale_both_(Tensor(a!) x, Tensor(b!) y, float s) -> ()", scale_both_, ()),
            ("centre_(Tensor(a!) mean, Tensor x) -> Tensor", centre_, ()),
            ("mean_number(Tensor x) -> float", mean_number, ()),
            ("double_then_add_(Tensor(a!) x, Tensor y) -> Tensor(a!)", double_then_add_, (torch.Tag.inplace,)),
            ("accumulate_(Tensor(a!) acc, Tensor x) -> Tensor(a!)", accumulate_, (torch.Tag.inplace,)),
            ("fill_then_fail_(Tensor(a!) x) -> ()", fill_then_fail_, ()),
            ("fill_then_fail_out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)", fill_then_fail_out, (torch.Tag.out,)),
            ("relayout_out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)", relayout_out, (torch.Tag.out,)),
            ("resize_then_fail_out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)", resize_then_fail_out,
             (torch.Tag.out,)),
            ("cast_sum(Tensor x, *, ScalarType out_dtype) -> Tensor", cast_sum, ()),
            ("double_sum(Tensor x) -> Tensor", double_sum, ()),
            ("cast_twice(Tensor x, ScalarType dtype) -> Tensor", cast_twice, ()),
            ("scale_both_swapped_(Tensor(a!) x, Tensor(b!) y, float s) -> (Tensor(b!), Tensor(a!))",
             scale_both_swapped_, ())]:
        library.define(schema, tags=tags)
        for key in ("CPU", "Meta"):  # torch operations only: they run on meta tensors too
            library.impl(schema.split("(")[0], kernel, key)
    return library


def _upcast_cases(half: torch.dtype) -> list[tuple[str, Callable, Callable, Callable]]:
    """(what, make, call, check): `make(dtype)` makes fresh inputs in that dtype, (args, kwargs), outside any mode;
    `call` is the operator; `check(out, args)` says what is wrong with out beyond its dtype and values, or None."""
    ops = torch.ops.exercise
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    a, b, bias, x, empty = randn(3, 4), randn(3, 4), randn(3, 4), randn(2, 5), randn(5, 0)
    c = randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    index = torch.tensor([1, 0, 1])
    name = str(half).removeprefix("torch.")

    def fresh(tensor, dtype):  # a copy, even in the tensor's own dtype: calls write into their inputs
        return tensor.to(dtype, copy=True)

    def same(out, args):
        return None

    def number_as_returned(out, args):  # the kernel's number, from the half inputs made float32
        returned = args[0][0].double().mean().item()
        if out != returned:
            return (f"the call returned {out!r}, where the kernel returns {returned!r}: a Python number comes back as "
                    "the kernel returned it, not rounded to the call's half dtype")
        return None

    def returns(position: int, keyword: str | None = None):
        def written_and_returned(out, args):
            target = args[1][keyword] if keyword else args[0][position]
            if out is not target:
                return ("the output is not the tensor the operator wrote (the caller's own), as it is without the "
                        "mode")
            return None
        return written_and_returned

    def y_then_x(out, args):
        x, y = args[0][:2]
        if not (out[0] is y and out[1] is x):
            return ("the outputs are not the caller's y, then x, as the schema's returns say (Tensor(b!), then "
                    "Tensor(a!)) and the call gives without the mode")
        return None

    def views_of_x(out, args):
        if any(piece.untyped_storage().data_ptr() != args[0][0].untyped_storage().data_ptr() for piece in out):
            return ("a piece shares no memory with the caller's `x`: an operator whose outputs alias an input (a list "
                    "of views, Tensor(a)[]) runs as it is")
        return None

    def points_at_source(out, args):
        x, source = args[0]
        if out is not x or x.untyped_storage().data_ptr() != source.untyped_storage().data_ptr():
            return ("x does not share source's memory afterwards, as set_ makes it: an operator that changes an "
                    "argument's view of memory in place (torch.Tag.inplace_view) runs as it is")
        return None

    def view_of_x(out, args):
        if out.untyped_storage().data_ptr() != args[0][0].untyped_storage().data_ptr():
            return "the output shares no memory with the caller's `x`: a view of a float32 copy is not a view of x"
        return None

    def second_a_view_of_x(out, args):
        if out[1].untyped_storage().data_ptr() != args[0][0].untyped_storage().data_ptr():
            return ("the second output shares no memory with the caller's `x`, though the schema says it may "
                    "(-> (Tensor, Tensor(a))): an operator any of whose outputs aliases an input runs as it is")
        return None

    return [
        (f"fp32_only(a, b) in {name}", lambda d: ((fresh(a, d), fresh(b, d)), {}), ops.fp32_only, same),
        (f"fp32_only(a, b, bias=..., alpha=0.5) in {name}, bias a keyword argument of type Tensor?",
         lambda d: ((fresh(a, d), fresh(b, d)), {"bias": fresh(bias, d), "alpha": 0.5}), ops.fp32_only, same),
        (f"scale_(x, 3.0) in {name}: x written in place, and returned", lambda d: ((fresh(x, d), 3.0), {}),
         ops.scale_, returns(0)),
        (f"mul_out(a, b, out=out) in {name}: out written, and returned",
         lambda d: ((fresh(a, d), fresh(b, d)), {"out": torch.empty(3, 4, dtype=d)}), ops.mul_out,
         returns(0, "out")),
        (f"count_above(x, 0.0) in {name}: an int64 count", lambda d: ((fresh(x, d), 0.0), {}), ops.count_above,
         same),
        (f"split_signs(x) in {name}: two outputs", lambda d: ((fresh(x, d),), {}), ops.split_signs, same),
        (f"take_rows(index, x) in {name}: an int64 index first, then x", lambda d: ((index, fresh(x, d)), {}),
         ops.take_rows, same),
        (f"row_view(x, 1) in {name}: a view of x", lambda d: ((fresh(x, d), 1), {}), ops.row_view, view_of_x),
        (f"first_row_counted(x, count) in {name}: a view of x, and an int64 count written (OpOverload.is_view is "
         "False: an argument is written)", lambda d: ((fresh(x, d), torch.zeros((), dtype=torch.int64)), {}),
         ops.first_row_counted, view_of_x),
        (f"torch.mm(a, b.t()) in {name}: one of aten's", lambda d: ((fresh(a, d), fresh(b.t(), d)), {}), torch.mm,
         same),
        (f"fp32_only(a, b) in {name}, both transposed", lambda d: ((fresh(a, d).t(), fresh(b, d).t()), {}),
         ops.fp32_only, same),
        (f"fp32_only(a, b, bias=...) with a and b in float32 and bias alone in {name}",
         lambda d: ((fresh(a, torch.float32), fresh(b, torch.float32)), {"bias": fresh(bias, d)}), ops.fp32_only,
         same),
        (f"mul_out(a, b, out=out) in {name}, out empty (0 elements): resized, as out= operators do",
         lambda d: ((fresh(a, d), fresh(b, d)), {"out": torch.empty(0, dtype=d)}), ops.mul_out, returns(0, "out")),
        (f"scale_(base[:2], 3.0) in {name}: x a view of a larger tensor, written through it",
         lambda d: ((fresh(x, d)[:1], 3.0), {}), ops.scale_, returns(0)),
        (f"minmax_out(x, min=..., max=...) in {name}: two written arguments",
         lambda d: ((fresh(x, d),), {"min": torch.empty(2, dtype=d), "max": torch.empty(2, dtype=d)}),
         ops.minmax_out, same),
        (f"scale_all_([a, x], 3.0) in {name}: a list of tensors, each written", lambda d: (([fresh(a, d), fresh(x, d)],
                                                                                           3.0), {}),
         ops.scale_all_, same),
        (f"scale_both_(a, b, 3.0) in {name}: two positional arguments written",
         lambda d: ((fresh(a, d), fresh(b, d), 3.0), {}), ops.scale_both_, same),
        (f"scale_all_([x, x], 3.0) in {name}: one tensor twice in a written list (written twice: 9x)",
         lambda d: (([(same := fresh(x, d)), same], 3.0), {}), ops.scale_all_, same),
        (f"total([a, x]) in {name}: a list of tensors, a 0-dim output", lambda d: (([fresh(a, d), fresh(x, d)],), {}),
         ops.total, same),
        (f"torch.sum(x) in {name}: one of aten's, a 0-dim output", lambda d: ((fresh(x, d),), {}), torch.sum, same),
        (f"fp32_only(s, s.t()) in {name}: one tensor and its transpose, the same memory",
         lambda d: ((square := fresh(torch.arange(16.0).view(4, 4), d), square.t()), {}), ops.fp32_only, same),
        (f"centre_(mean, x) in {name}: mean written, a new tensor returned",
         lambda d: ((torch.zeros(5, dtype=d), fresh(x, d)), {}), ops.centre_, same),
        (f"accumulate_(acc, x) with acc in float32 and x in {name}: a float32 argument written, and returned",
         lambda d: ((fresh(x, torch.float32), fresh(x, d)), {}), ops.accumulate_, returns(0)),
        (f"double_then_add_(x, x) in {name}: x written, and read again as y (the kernel reads what it wrote)",
         lambda d: (lambda t: ((t, t), {}))(fresh(x, d)), ops.double_then_add_, returns(0)),
        (f"x.sum().item() in {name}: a Python number", lambda d: ((fresh(x, d),), {}), lambda t: t.sum().item(),
         same),
        (f"x.to(dtype=torch.float32) from {name}: the call names its output's dtype",
         lambda d: ((fresh(x, d),), {"dtype": torch.float32}), torch.Tensor.to, same),
        (f"torch.sum(x, dtype=torch.float32) in {name}: the call names its output's dtype",
         lambda d: ((fresh(x, d),), {"dtype": torch.float32}), torch.sum, same),
        (f"fp32_only(a, b) in {name}, on the meta device", lambda d: ((fresh(a, d).to("meta"), fresh(b, d).to("meta")),
                                                                    {}), ops.fp32_only, same),
        (f"fp32_only(a, b) in {name}, a expanded from one row (stride 0)",
         lambda d: ((fresh(a[:1], d).expand(3, 4), fresh(b, d)), {}), ops.fp32_only, same),
        (f"torch.gt(x, 0) in {name}: a bool output", lambda d: ((fresh(x, d), 0), {}), torch.gt, same),
        (f"torch.unsafe_split(x, 1) in {name}: a list of outputs", lambda d: ((fresh(x, d), 1), {}),
         torch.unsafe_split, same),
        (f"torch.polar(abs, angle) in {name}: a complex output stays complex",
         lambda d: ((fresh(x.abs(), d), fresh(x, d)), {}), torch.polar, same),
        (f"mul_out(a, b, out=out) in {name}, channels_last inputs, out empty: resized as the kernel lays it out",
         lambda d: ((fresh(c, d), fresh(c, d)), {"out": torch.empty(0, dtype=d)}), ops.mul_out, returns(0, "out")),
        (f"mul_out(a, b, out=out) in {name}, both transposed, out empty: resized as the kernel lays it out",
         lambda d: ((fresh(a, d).t(), fresh(b, d).t()), {"out": torch.empty(0, dtype=d)}), ops.mul_out,
         returns(0, "out")),
        (f"fp32_only(a, b) in {name}, both empty (shape [5, 0])", lambda d: ((fresh(empty, d), fresh(empty, d)), {}),
         ops.fp32_only, same),
        (f"torch.split(x, 1) in {name}: a list of views of x", lambda d: ((fresh(x, d), 1), {}), torch.split,
         views_of_x),
        (f"mul_out(a, b, out=ws[2:2]) in {name}: out carved from a workspace, resized within its memory, where it "
         "starts", lambda d: ((fresh(a, d), fresh(b, d)), {"out": torch.zeros(20, dtype=d)[2:2]}), ops.mul_out,
         returns(0, "out")),
        (f"torch.mul(a, b) in {name}: one of aten's", lambda d: ((fresh(a, d), fresh(b, d)), {}), torch.mul, same),
        (f"torch.mul(a, b, out=out) in {name}: the out= overload of the operator just called",
         lambda d: ((fresh(a, d), fresh(b, d)), {"out": torch.empty(3, 4, dtype=d)}), torch.mul, returns(0, "out")),
        (f"aten.mm.dtype(a, b.t(), torch.float32) in {name}, on meta: out_dtype, a positional argument, names the "
         "output's dtype", lambda d: ((fresh(a, d).to("meta"), fresh(b.t(), d).to("meta"), torch.float32), {}),
         torch.ops.aten.mm.dtype, same),
        (f"x.to(torch.bfloat16) from {name}: the call names its output's dtype",
         lambda d: ((fresh(x, d), torch.bfloat16), {}), torch.Tensor.to, same),
        (f"x.to(dtype=torch.float64) from {name}: the call names its output's dtype",
         lambda d: ((fresh(x, d),), {"dtype": torch.float64}), torch.Tensor.to, same),
        (f"cast_sum(x, out_dtype=torch.float32) in {name}: a keyword of its own names the output's dtype",
         lambda d: ((fresh(x, d),), {"out_dtype": torch.float32}), ops.cast_sum, same),
        (f"mul_out(a, b, out=out) in {name}, out of shape [4, 3] (as many elements, another shape): resized",
         lambda d: ((fresh(a, d), fresh(b, d)), {"out": torch.empty(4, 3, dtype=d)}), ops.mul_out,
         returns(0, "out")),
        (f"mul_out(a, b, out=out) in {name}, a and b empty ([5, 0]), out of shape [4, 3]: resized to no element",
         lambda d: ((fresh(empty, d), fresh(empty, d)), {"out": torch.ones(4, 3, dtype=d)}), ops.mul_out,
         returns(0, "out")),
        (f"x.add_(row.expand(3, 4)) in {name}: a read-only, expanded argument beside the written one",
         lambda d: ((fresh(a, d), fresh(b[:1], d).expand(3, 4)), {}), torch.Tensor.add_, returns(0)),
        (f"scale_(base[:, ::2], 3.0) in {name}: x a view with gaps (strides [5, 2]), written through it",
         lambda d: ((fresh(x, d)[:, ::2], 3.0), {}), ops.scale_, returns(0)),
        (f"centre_(mean, x) in {name}, on the meta device: every data pointer is 0",
         lambda d: ((torch.zeros(5, dtype=d, device="meta"), fresh(x, d).to("meta")), {}), ops.centre_, same),
        (f"fp32_only(a, s) in {name}, s a 0-dim tensor", lambda d: ((fresh(a, d), torch.tensor(2.0, dtype=d)), {}),
         ops.fp32_only, same),
        ("take_rows(index, x) with x in float8_e4m3fn: no float16 or bfloat16 tensor in the call",
         lambda d: ((index, x.to(torch.float8_e4m3fn)), {}), ops.take_rows, same),
        (f"base[1:4].as_strided_([2], [1], 2) in {name}: an in-place view operator (torch.Tag.inplace_view), which "
         "changes x's view of base, not any values", lambda d: ((fresh(torch.arange(6.0), d)[1:4], (2,), (1,), 2), {}),
         torch.Tensor.as_strided_, returns(0)),
        (f"x.set_(source) in {name}: x made to share source's memory (torch.Tag.inplace_view)",
         lambda d: ((fresh(x, d), fresh(b, d)), {}), torch.Tensor.set_, points_at_source),
        (f"x.transpose_(0, 1) in {name}, x a square view of a flat tensor: an in-place view operator "
         "(torch.Tag.inplace_view), which changes x's strides, not the memory it shares with that tensor",
         lambda d: ((fresh(torch.arange(9.0), d).view(3, 3), 0, 1), {}), torch.Tensor.transpose_, returns(0)),
        (f"x.unsqueeze_(0) in {name}, x a view with gaps (base[:, ::2], strides [6, 2]): an in-place view operator "
         "(torch.Tag.inplace_view)", lambda d: ((fresh(torch.arange(12.0).view(2, 6), d)[:, ::2], 0), {}),
         torch.Tensor.unsqueeze_, returns(0)),
        (f"scale_both_swapped_(x, y, 3.0) in {name}: x and y written, returned as y then x",
         lambda d: ((fresh(x, d), fresh(a, d), 3.0), {}), ops.scale_both_swapped_, y_then_x),
        (f"cast_twice(x, torch.float32) in {name}: an argument given by position names the output's dtype",
         lambda d: ((fresh(x, d), torch.float32), {}), ops.cast_twice, same),
        (f"double_sum(x) in {name}: a kernel that sums in float64 and returns float64",
         lambda d: ((fresh(x, d),), {}), ops.double_sum, same),
        ("torch.div(a, b) on int16 tensors: no float16 or bfloat16 tensor in the call",
         lambda d: ((torch.tensor([7, 9], dtype=torch.int16), torch.tensor([2, 4], dtype=torch.int16)), {}), torch.div,
         same),
        (f"torch.frexp(x) in {name}: a floating-point mantissa and an int32 exponent, which stays int32",
         lambda d: ((fresh(x, d),), {}), torch.frexp, same),
        (f"mul_out(a, b, out=ws[2:2]) in {name}, channels_last inputs: out carved from a workspace, resized to the "
         "kernel's layout within its memory, where it starts",
         lambda d: ((fresh(c, d), fresh(c, d)), {"out": torch.zeros(200, dtype=d)[2:2]}), ops.mul_out,
         returns(0, "out")),
        (f"mean_number(x) in {name}, x = [0, 0, 1]: a Python number the kernel computes in float64 (1/3)",
         lambda d: ((torch.tensor([0.0, 0.0, 1.0], dtype=d),), {}), ops.mean_number, number_as_returned),
        (f"centre_(mean, x), mean in float32 and x in {name}, both empty (every data pointer 0): a new output beside a "
         "written float32 argument", lambda d: ((torch.zeros(0), fresh(torch.zeros(0, 0), d)), {}), ops.centre_, same),
        (f"sum_and_first_row(x) in {name}: a new tensor, then a view of x (-> (Tensor, Tensor(a)))",
         lambda d: ((fresh(x, d),), {}), ops.sum_and_first_row, second_a_view_of_x),
        (f"relayout_out(x, out=out) in {name}, x channels_last, out contiguous of x's shape: a kernel that keeps out's "
         "shape and lays it out as x", lambda d: ((fresh(c, d),), {"out": torch.empty(2, 3, 4, 5, dtype=d)}),
         ops.relayout_out, returns(0, "out")),
    ]


def _upcast_after_a_redefinition(mode) -> str | None:
    """One operator name defined again with another schema (a notebook's cell run again, a test's fixture), a call of
    each under the mode: the second writes its argument, and the caller's tensor must hold the write."""
    def written(x):
        x.mul_(2)
        return x

    for schema, kernel in (("redefined(Tensor x) -> Tensor", lambda x: x * 2),
                           ("redefined(Tensor(a!) x) -> Tensor(a!)", written)):
        with operator(schema, kernel) as library:
            x = torch.ones(3, dtype=torch.float16)
            try:
                with mode:
                    torch.ops.exercise.redefined.default(x)
            finally:
                library._destroy()
    if not torch.equal(x, torch.full((3,), 2.0, dtype=torch.float16)):
        return (f"exercise::redefined(Tensor x) called under the mode, then the Library destroyed and the name defined "
                f"again as redefined(Tensor(a!) x), which writes x: after a call, x holds {x.tolist()}, where the "
                "kernel wrote 2s: your mode used what it had kept of the first schema. It keeps nothing between calls")
    # A view first (run as it is), then the same name a plain operator, whose kernel takes no half tensor.
    import contextlib

    seen = []

    def no_half(x):
        seen.append(x.dtype)
        return x * 2

    for schema, kernel in (("redefined_view(Tensor(a) x) -> Tensor(a)", lambda x: x.view(-1)),
                           ("redefined_view(Tensor x) -> Tensor", no_half)):
        with operator(schema, kernel) as library:
            try:
                with contextlib.suppress(Exception), mode:
                    torch.ops.exercise.redefined_view.default(torch.ones(3, dtype=torch.float16))
            finally:
                library._destroy()
    if seen != [torch.float32]:
        return (f"exercise::redefined_view(Tensor(a) x), a view, called under the mode, then the name defined again "
                f"as redefined_view(Tensor x), a plain operator: its kernel received {seen or 'nothing'}, where a "
                "float32 copy is due: your mode used what it had kept of the first schema (a view runs as it is). "
                "It keeps nothing between calls")
    return None


def _upcast_arguments_differ(args, ref_args) -> str | None:
    """Where the tensor arguments of a call under the mode (and the tensors they are views of) hold other values than
    those of the same call in float32 without it: a written argument not written, or written elsewhere."""
    from torch.utils._pytree import tree_flatten

    tensors, ref_tensors = (tree_flatten(a)[0] for a in (args, ref_args))
    for i, (t, r) in enumerate(zip(tensors, ref_tensors)):
        if not isinstance(t, torch.Tensor):
            continue
        for what, mine, theirs in (("an argument", t, r), ("the tensor an argument is a view of", t._base, r._base)):
            if mine is not None and theirs is not None and mine.device.type != "meta" and not torch.allclose(
                    mine.float(), theirs.float(), rtol=1e-2, atol=1e-2):
                return f"{what} (tensor {i + 1} of the call) holds other values"
        if t.numel() > 1 and t.stride() != r.stride():
            return (f"an argument (tensor {i + 1} of the call) has strides {list(t.stride())}, where the call "
                    f"leaves it with {list(r.stride())}")
        if t.storage_offset() != r.storage_offset():
            return (f"an argument (tensor {i + 1} of the call) starts at element {t.storage_offset()} of its memory, "
                    f"where the call leaves it at {r.storage_offset()}")
    return None


def _upcast_difference(out, ref, half, named: torch.dtype | None = None, args=()) -> str | None:
    """How `out` (under the mode, from half inputs; `half` None where the call had none) differs from `ref` (float32,
    no mode): None where it does not. A call that names its output's dtype (`named`) gets it; an output that is one of
    the call's `args` (written and returned) keeps its own."""
    from torch.utils._pytree import tree_flatten

    callers = tree_flatten(args)[0]
    outs, refs = (list(v) if isinstance(v, (tuple, list)) else [v] for v in (out, ref))
    if len(outs) != len(refs):
        return f"{len(outs)} output(s) where there are {len(refs)}"
    for i, (o, r) in enumerate(zip(outs, refs)):
        if r is None:  # an operator that returns nothing
            if o is not None:
                return f"the operator returns nothing, and the call returned {type(o).__name__}"
            continue
        if not isinstance(r, torch.Tensor):  # a Python number
            if type(o) is not type(r) or abs(o - r) > 1e-2 * max(1.0, abs(r)):
                return f"output {i + 1} is {o!r}, where the call gives {r!r}"
            continue
        if not isinstance(o, torch.Tensor):
            return f"output {i + 1} is {type(o).__name__}, not a tensor"
        want = (named or half) if r.is_floating_point() and half is not None else r.dtype
        if any(o is tensor for tensor in callers):  # the caller's own tensor, written and returned
            want = o.dtype
        if o.device != r.device:
            return f"output {i + 1} is on {o.device}, where the call gives {r.device}"
        if o.device.type == "meta":
            if (o.dtype, o.shape) != (want, r.shape):
                return f"output {i + 1} is {o.dtype} of shape {list(o.shape)}, where {want} of {list(r.shape)} is right"
            continue
        if o.dtype != want:
            wider = (f" (the kernel returns {r.dtype} from float32: a floating-point output all the same)"
                     if r.dtype == torch.float64 and want != r.dtype else "")
            return f"output {i + 1} is {o.dtype}, where the call without the mode gives {want}{wider}"
        if o.shape != r.shape or not torch.allclose(o.float(), r.to(want).float(), rtol=1e-2, atol=1e-2):
            return f"output {i + 1} has other values (or shape {list(o.shape)}) than the call computed in float32"
        if o.numel() > 1 and o.stride() != r.stride():
            return (f"output {i + 1} has strides {list(o.stride())}, where the call without the mode gives "
                    f"{list(r.stride())}: a tensor on the way (a copy of an input, an output cast back, a buffer "
                    f"resized) was not laid out as the call lays it out")
    return None


def _upcast_across_calls(mode) -> str | None:
    """One weight in two calls, written into between them outside the mode (an optimizer step): the second call reads
    its new values; and the mode keeps none of the caller's tensors alive after the calls."""
    import gc
    import weakref

    weight, x = torch.full((3, 4), 2.0, dtype=torch.float16), torch.ones(3, 4, dtype=torch.float16)
    with mode:
        torch.ops.exercise.fp32_only(weight, x)
    weight.data.fill_(5.0)  # through .data: a write that leaves w's version counter as it was
    with mode:
        second = torch.ops.exercise.fp32_only(weight, x)
    if not torch.equal(second, torch.full((3, 4), 5.0, dtype=torch.float16)):
        return (f"fp32_only(w, x), then w.data.fill_(5.0) outside the mode (a write that leaves w's version counter "
                f"as it was), then fp32_only(w, x) again: the second call "
                f"gave {second[0, 0].item()} where w * x is 5.0: a float32 copy kept from the first call was used for "
                "w's new values. A copy is made for the call that needs it")
    kept = weakref.ref(weight)
    del weight, second
    gc.collect()
    if kept() is not None:
        return ("after two calls, the caller dropped its weight, and your mode still holds it (or its copy holds it): "
                "a mode that keeps every tensor it sees keeps a model's activations and weights alive for as long as "
                "the mode lives")
    # The same inside one `with` block, w a parameter (a leaf that requires grad, which autograd's own cast cache
    # keeps casts of), written through .data between the two calls (an EMA update, a weight loader).
    weight = torch.full((3, 4), 2.0, dtype=torch.float16, requires_grad=True)
    with torch.no_grad(), mode:
        torch.ops.exercise.fp32_only(weight, x)
        weight.data.fill_(5.0)
        second = torch.ops.exercise.fp32_only(weight, x)
    if not torch.equal(second, torch.full((3, 4), 5.0, dtype=torch.float16)):
        return (f"inside one `with` block, fp32_only(w, x), w a parameter (a leaf that requires grad), then "
                f"w.data.fill_(5.0) (a write that leaves w's version counter as it was), then fp32_only(w, x) again: "
                f"the second call gave {second[0, 0].item()} where w * x is 5.0: a float32 copy kept from the first "
                "call was used for w's new values. A copy is made for the call that needs it")
    return None


def _upcast_outputs_ordinary(mode) -> str | None:
    """Under the mode, torch.mul(w, x) with w a float16 parameter: an ordinary tensor comes back (not an inference one,
    which the caller could neither write into nor differentiate), and autograd, above the mode, records the call."""
    w = torch.ones(3, dtype=torch.float16, requires_grad=True)
    x = torch.full((3,), 2.0, dtype=torch.float16)
    with mode:
        out = torch.mul(w, x)
    what = "under your mode, out = torch.mul(w, x), w a float16 parameter (it requires grad)"
    if out.is_inference():
        return (f"{what}: out is an inference tensor (made under torch.inference_mode()): outside inference mode the "
                "caller cannot write into it (out.add_(1) raises), nor save it for a backward. A mode hands back what "
                "the call gives, in the call's dtype, nothing else changed")
    if not out.requires_grad:
        return f"{what}: out does not require grad, where without the mode it does: autograd records above your mode"
    out.sum().backward()
    if not torch.equal(w.grad, x):
        return f"{what}: the gradient of out.sum() with respect to w is {w.grad.tolist()}, where it is x, [2, 2, 2]"
    return None


def _upcast_on_fake_cuda(mode, received: list) -> str | None:
    """fp32_only on float16 fake tensors on a GPU (FakeTensorMode: a model traced for CUDA, on a machine without
    one): the kernel that runs (the Meta one, for fake tensors) must receive float32, as on any device."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    received.clear()
    with FakeTensorMode():
        a, b = (torch.ones(3, 4, dtype=torch.float16, device="cuda") for _ in range(2))
        try:
            with mode:
                torch.ops.exercise.fp32_only(a, b)
        except RuntimeError:
            pass  # said below, from what the kernel received
    if any(dtype in _HALF for _, dtypes in received for dtype in dtypes):
        return (f"fp32_only on float16 fake tensors on cuda (FakeTensorMode, as torch.compile traces a GPU model, no "
                f"GPU needed): its kernel received {_dtype_names(received[-1][1])}: your mode upcast on some devices "
                "only. A CUDA kernel written for float32 refuses float16 as the CPU one does")
    return None


def _upcast_traced(mode) -> str | None:
    """make_fx traces a function that calls fp32_only under the mode: the graph must compute from its inputs. The
    mode's own casts reach the tracing mode below it (they are calls like any other); hidden from it, the float32
    copies of the example inputs become constants of the graph."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def under_the_mode(a, b):
        with mode:
            return torch.ops.exercise.fp32_only(a, b)

    graph = make_fx(under_the_mode)(torch.ones(3, dtype=torch.float16), torch.ones(3, dtype=torch.float16))
    a, b = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16), torch.full((3,), 7.0, dtype=torch.float16)
    out = graph(a, b)
    if not torch.equal(out, a * b):
        return (f"make_fx traced a function that calls fp32_only under your mode, on ones; the graph, run on new "
                f"inputs, gave {out.tolist()} where a * b is {(a * b).tolist()}: the graph holds the example inputs' "
                "float32 copies as constants. Your mode made its casts where the modes below it (make_fx's tracer, "
                "FakeTensorMode) could not see them; made plainly inside __torch_dispatch__, they reach those modes")

    def written_in_place(x):  # a call that writes its argument, then a read of it
        with mode:
            torch.ops.exercise.scale_(x, 2.0)
        return x + 1

    graph = make_fx(written_in_place)(torch.ones(3, dtype=torch.float16))
    out = graph(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16))
    if not torch.equal(out, right := torch.tensor([3.0, 5.0, 7.0], dtype=torch.float16)):
        return (f"make_fx traced a function that calls scale_(x, 2.0) under your mode, then returns x + 1; the graph, "
                f"run on [1, 2, 3], gave {out.tolist()} where x * 2 + 1 is {right.tolist()}: the graph has no write "
                "into x. Your mode wrote the result back into the caller's tensor where the modes below it could not "
                "see it; made plainly inside __torch_dispatch__, the write reaches them")

    def subtracted(a, b):
        with mode:
            return torch.sub(a, b)

    # As torch.compile and torch.export trace: fake tensors (no data, no data pointer), their sizes symbols.
    what = ("make_fx(tracing_mode=\"symbolic\") (fake tensors with symbolic sizes, as torch.compile and torch.export "
            "trace) traced a function that calls torch.sub(a, b) under your mode")
    try:
        graph = make_fx(subtracted, tracing_mode="symbolic")(torch.ones(3, dtype=torch.float16),
                                                             torch.ones(3, dtype=torch.float16))
    except Exception as error:  # noqa: BLE001 - the reader's mode may raise anything: said with its call
        return (f"{what}, on ones: it raised {type(error).__name__}: {str(error).strip().splitlines()[0][:200]}. A "
                "fake tensor has no data: what your mode does with a tensor must not need its memory")
    a, b = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16), torch.tensor([10.0, 20.0, 30.0], dtype=torch.float16)
    if not torch.equal(out := graph(a, b), a - b):
        return (f"{what}, on ones; the graph, run on {a.tolist()} and {b.tolist()}, gave {out.tolist()} where a - b is "
                f"{(a - b).tolist()}")
    return None


@exercise("10.upcast_mode", "medium")
def upcast_mode(path: Path) -> Result:
    import contextlib

    from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack
    from torch.utils._pytree import tree_flatten

    answer = load_python(path)
    received: list = []
    library = _upcast_operators(received)
    hint = "\nLook again at lesson 10, section 1: what a mode's __torch_dispatch__ gets, and what it hands on."
    mode = answer.Upcast()  # one mode, entered again for each call, as a program reuses one
    try:
        for half in _HALF:
            for what, make, call, check in _upcast_cases(half):
                ref_args = make(torch.float32)
                received.clear()
                ref = call(*ref_args[0], **ref_args[1])
                ref_received = list(received)  # what the kernel gets without the mode
                args = make(half)
                received.clear()
                try:
                    with mode:
                        out = call(*args[0], **args[1])
                except RecursionError:
                    return Result(False, f"{what}: RecursionError: the call came back to your mode again and again. "
                                         "Inside __torch_dispatch__ the mode is off; entering it again (with self:) "
                                         "turns it back on for the calls below (lesson 10, section 6)")
                except Exception as error:  # noqa: BLE001 - the reader's code may raise anything; that is the diagnosis
                    seen = "; ".join(f"{name} got {', '.join(str(d).removeprefix('torch.') for d in dtypes)}"
                                     for name, dtypes in received) or "no kernel of the check's ran"
                    return Result(False, f"{what}: {type(error).__name__}: {str(error).strip().splitlines()[0][:200]} "
                                         f"({seen}){hint}")
                if _get_current_dispatch_mode_stack():
                    return Result(False, f"{what}: a mode is still on the stack after the `with` block: {hint}")
                half_seen = [name for name, dtypes in received if any(d in _HALF for d in dtypes)
                             and name not in _UPCAST_VIEWS]
                if half_seen:
                    return Result(False, f"{what}: {half_seen[0]}'s kernel received a {half} tensor{hint}")
                if received and received[0][0] in _UPCAST_VIEWS and received[0][1] != (half,):
                    return Result(False, f"{what}: the view operator's kernel received {received[0][1][0]}, a copy "
                                         "of x: its output is a view of the copy, and shares no memory with the "
                                         f"caller's x. An operator whose output aliases an input runs as it is{hint}")
                has_half = any(isinstance(t, torch.Tensor) and t.dtype in _HALF for t in tree_flatten(args)[0])
                named = next((v for v in tree_flatten(args)[0] if isinstance(v, torch.dtype)), None)
                if problem := (_upcast_difference(out, ref, half if has_half else None, named, args)
                               or check(out, args)):
                    return Result(False, f"{what}: {problem}{hint}")
                if not has_half and received != ref_received:
                    got = ", ".join(str(d).removeprefix("torch.") for _, dtypes in received[:1] for d in dtypes)
                    return Result(False, f"{what}: the kernel received {got or 'nothing'}, where the call without the "
                                         "mode hands it its tensors as they are: a call with no float16 or bfloat16 "
                                         f"tensor runs as it is{hint}")
                if differs := _upcast_arguments_differ(args, ref_args):
                    return Result(False, f"{what}: after the call, {differs}, where the call without the mode left "
                                         f"the result there: the operator writes it (its schema's (a!)), so the "
                                         f"caller reads it there{hint}")
            # A call its kernel refuses (two shapes), then a call that must be upcast as before.
            try:
                with mode:
                    torch.ops.exercise.fp32_only(torch.ones(3, dtype=half), torch.ones(4, dtype=half))
            except Exception:  # noqa: BLE001 - the kernel's refusal, whatever your mode makes of it
                pass
            # A call that writes an argument and raises (two shapes), a write of the caller's into that argument,
            # then another call: nothing of the failed call may come back and undo the write.
            buffer = torch.zeros(3, dtype=half)
            try:
                with mode:
                    torch.ops.exercise.mul_out(torch.ones(3, dtype=half), torch.ones(4, dtype=half), out=buffer)
            except Exception:  # noqa: BLE001 - the kernel's refusal, whatever your mode makes of it
                pass
            buffer.fill_(7.0)
            received.clear()
            try:
                with mode:
                    torch.ops.exercise.fp32_only(torch.ones(3, dtype=half), torch.ones(3, dtype=half))
            except RuntimeError:
                pass  # the kernel's refusal of a half tensor: said below
            if not torch.equal(buffer, torch.full((3,), 7.0, dtype=half)):
                return Result(False, f"mul_out(..., out=buffer) raised (two shapes), then the caller wrote 7 into "
                                     f"buffer, then another call under the mode: buffer holds {buffer.tolist()}: your "
                                     f"mode kept the failed call's written arguments and copied them back at the next "
                                     f"call (a list cleared only when a call returns?){hint}")
            if any(d in _HALF for _, dtypes in received for d in dtypes):
                return Result(False, f"after a call whose kernel raised (two shapes), the next call in {half} "
                                     f"reached its kernel in {half}: your mode was left in another state by the "
                                     f"error (a flag set and not reset?){hint}")
            # The same input after a failed call, written by the caller between: its copy is made anew.
            given = torch.ones(3, dtype=half)
            with contextlib.suppress(Exception), mode:  # the kernel's refusal, whatever your mode makes of it
                torch.ops.exercise.mul_out(given, torch.ones(4, dtype=half), out=torch.zeros(3, dtype=half))
            given.fill_(3.0)
            with mode:
                again = torch.ops.exercise.fp32_only(given, torch.ones(3, dtype=half))
            if not torch.equal(again.float(), torch.full((3,), 3.0)):
                return Result(False, f"mul_out(a, b, out=...) raised (two shapes), then the caller wrote 3 into a, "
                                     f"then fp32_only(a, ones) under the mode gave {again.tolist()}, where a * 1 is "
                                     f"3: a copy of a made for the failed call was used again (copies kept on the "
                                     f"mode, cleared only when a call returns?){hint}")

            # A kernel that writes part of its argument, then raises: what it wrote is the caller's, as it is
            # without the mode.
            written, reference = torch.zeros(4, dtype=half), torch.zeros(4)
            for target, context in ((reference, contextlib.nullcontext()), (written, mode)):
                with contextlib.suppress(RuntimeError), context:
                    torch.ops.exercise.fill_then_fail_(target)
            if not torch.equal(written.float(), reference):
                return Result(False, f"fill_then_fail_(x) in {str(half).removeprefix('torch.')}: its kernel writes "
                                     f"x[:2], then raises: afterwards x holds {written.tolist()}, where without the "
                                     f"mode it holds {reference.tolist()}: what a kernel wrote into an argument before "
                                     f"it raised is in the caller's tensor, mode or not{hint}")
            # The same with out=: the rest of out holds what it held (an out= buffer is read too, where a kernel
            # writes only part of it). Memory just freed, full of -123, is what a new buffer would get.
            for _ in range(3):
                out = torch.full((1000,), 7.0, dtype=half)
                torch.full((1000,), -123.0).add_(0)
                with contextlib.suppress(RuntimeError), mode:
                    torch.ops.exercise.fill_then_fail_out(torch.ones(1000, dtype=half), out=out)
                if not (torch.equal(out[:500].float(), torch.ones(500)) and torch.equal(out[500:].float(),
                                                                                         torch.full((500,), 7.0))):
                    kept = sorted({value for value in out[500:].tolist() if value != 7.0})[:3]
                    return Result(False, f"fill_then_fail_out(ones, out=out), out 1000 sevens in "
                                         f"{str(half).removeprefix('torch.')}: its kernel writes the first half of "
                                         f"out, then raises: afterwards the second half holds {kept} among its "
                                         f"values, where without the mode it holds the sevens it held: the float32 "
                                         f"copy of an out= argument holds its values too, since a kernel may write "
                                         f"part of it{hint}")
            # The kernel's error reaches the caller as the kernel raised it (an `except IndexError`, a fallback on
            # NotImplementedError), and the caller's thread as it was: grad mode on, after every call that raised.
            raised = []
            for context in (contextlib.nullcontext(), mode):
                try:
                    with context:
                        torch.index_select(torch.ones(3, dtype=half), 0, torch.tensor([5]))
                except Exception as error:  # noqa: BLE001 - which error: that is the point
                    raised.append(type(error))
                else:
                    raised.append(None)
            if raised[0] is not raised[1]:
                got = raised[1].__name__ if raised[1] else "nothing"
                return Result(False, f"torch.index_select(x, 0, [5]) in {str(half).removeprefix('torch.')} (row 5 of "
                                     f"3): without the mode it raises {raised[0].__name__}, under yours {got}: a "
                                     f"caller's `except {raised[0].__name__}:` no longer catches it. The kernel's "
                                     f"error is the caller's, as it was raised{hint}")
            # A kernel that resizes an out= argument, writes part of it, then raises: the caller's buffer is resized
            # and holds what was written, and the error is the kernel's, as in float32 without the mode.
            outcomes = []
            for context, dtype in ((contextlib.nullcontext(), torch.float32), (mode, half)):
                out = torch.empty(0, dtype=dtype)
                try:
                    with context:
                        torch.ops.exercise.resize_then_fail_out(torch.tensor([1.0, 2.0, 3.0], dtype=dtype), out=out)
                except Exception as error:  # noqa: BLE001 - which error: that is the point
                    outcomes.append((type(error).__name__, list(out.shape), out[:2].tolist()))
                else:
                    outcomes.append(("nothing", list(out.shape), out[:2].tolist()))
            if outcomes[0] != outcomes[1]:
                (error, shape, written), (got, got_shape, got_written) = outcomes
                dtype = str(half).removeprefix("torch.")
                return Result(False, f"resize_then_fail_out(x, out=out), out empty, in {dtype}: its kernel resizes "
                                     f"out to [3], writes out[:2], then raises {error}: without the mode (in float32) "
                                     f"the caller gets {error} and out of shape {shape} starting {written}; under "
                                     f"yours {got}, and out of shape {got_shape}"
                                     + (f" starting {got_written}" if got_written else "") + ": what a kernel did to "
                                     f"an argument before it raised, a resize too, is the caller's, and so is its "
                                     f"error{hint}")
            if not torch.is_grad_enabled():
                return Result(False, "after calls under your mode whose kernels raised, grad mode is off in the "
                                     "caller's thread: its next training step builds no graph. A mode that changes "
                                     f"thread-local state sets it back however the call ends (try/finally){hint}")

            class Outer(TorchDispatchMode):  # a mode of the caller's, entered outside yours (a profiler, say)
                def __init__(self):
                    super().__init__()
                    self.saw = []

                def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                    self.saw.append(str(func))
                    return func(*args, **(kwargs or {}))

            with Outer() as outer, mode:
                torch.ops.exercise.fp32_only(torch.ones(3, dtype=half), torch.ones(3, dtype=half))
            if "exercise.fp32_only.default" not in outer.saw:
                return Result(False, f"a mode of the caller's, entered outside yours (a profiler, a FlopCounter), "
                                     f"never saw fp32_only: your mode hid the calls it made from the modes below it "
                                     f"on the stack. func(...) hands the call on to them (lesson 10, section 1: "
                                     f"modes stacked){hint}")
        # A new instance too: a cache of the caller's tensors, bounded, is full by now in the one all calls used.
        if problem := (_upcast_across_calls(mode) or _upcast_across_calls(answer.Upcast()) or _upcast_traced(mode)
                       or _upcast_on_fake_cuda(mode, received) or _upcast_after_a_redefinition(mode)
                       or _upcast_outputs_ordinary(mode)):
            return Result(False, f"{problem}{hint}")
        # float64 and integer calls: nothing to cast, so nothing cast.
        received.clear()
        with mode:
            wide = torch.ops.exercise.fp32_only(torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
        if received != [("fp32_only", (torch.float64, torch.float64))] or wide.dtype != torch.float64:
            got = received[0][1] if received else "nothing"
            return Result(False, f"fp32_only on two float64 tensors: the kernel received {got} "
                                 f"and the output is {wide.dtype}: a call with no float16 or bfloat16 tensor runs as "
                                 f"it is{hint}")
        # A float64 accumulator beside a half addend: the half one is copied, the float64 one reaches the kernel as it
        # is (written in place, its precision is the caller's).
        received.clear()
        accumulator = torch.tensor([1 + 1e-12, 16777217.0], dtype=torch.float64)
        with mode:
            torch.ops.exercise.accumulate_(accumulator, torch.zeros(2, dtype=torch.bfloat16))
        if received != [("accumulate_", (torch.float64, torch.float32))] or accumulator.tolist() != [1 + 1e-12,
                                                                                                      16777217.0]:
            got = _dtype_names(received[0][1]) if received else "nothing"
            return Result(False, f"accumulate_(acc, x) with acc in float64 ([1 + 1e-12, 16777217]) and x zeros in "
                                 f"bfloat16: the kernel received {got}, and acc holds {accumulator.tolist()}: only "
                                 f"float16 and bfloat16 arguments are copied; a float64 one beside them reaches the "
                                 f"kernel as it is, and keeps its precision{hint}")
        # A float8 tensor beside a half one (a scaled matmul's operands): only the half one is copied.
        received.clear()
        with contextlib.suppress(Exception), mode:  # what the kernel received is the point
            torch.ops.exercise.fp32_only(torch.ones(2, dtype=torch.bfloat16), torch.ones(2).to(torch.float8_e4m3fn))
        if received[:1] != [("fp32_only", (torch.float32, torch.float8_e4m3fn))]:
            got = _dtype_names(received[0][1]) if received else "nothing"
            return Result(False, f"fp32_only(a in bfloat16, b in float8_e4m3fn): the kernel received {got}: only "
                                 f"float16 and bfloat16 arguments are copied; a float8 one reaches the kernel as it "
                                 f"is (a kernel may read its bytes){hint}")
        # A project whose default dtype is float64 (torch.set_default_dtype): a float32 copy all the same.
        received.clear()
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            with contextlib.suppress(Exception), mode:  # what the kernel received is the point
                torch.ops.exercise.fp32_only(torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.float16))
        finally:
            torch.set_default_dtype(default)
        if received[:1] != [("fp32_only", (torch.float32, torch.float32))]:
            got = ", ".join(str(d).removeprefix("torch.") for d in received[0][1]) if received else "nothing"
            return Result(False, f"fp32_only on two float16 tensors, in a project whose default dtype is float64 "
                                 f"(torch.set_default_dtype): the kernel received {got}: a float32 copy is float32, "
                                 f"whatever the default dtype{hint}")
        # A write autograd must see: x saved by weight * x, then a call that writes x. Without the mode, the kernel's
        # own write (x.mul_, an out= product, x[:2] = 1) moves x's version counter, and backward refuses the changed
        # x; under a mode the kernel runs with every key above Python excluded, ADInplaceOrView among them, so its
        # writes, and the mode's copy back into x, move nothing: a silent wrong gradient. A float32 call, which the
        # mode hands on as it is, loses its bump so too (under any mode that hands calls on): the caller notices.
        for dtype in _HALF:
            half = str(dtype).removeprefix("torch.")
            for what, x_dtype, write in [
                    ("scale_(x, 3.0)", dtype, lambda x: torch.ops.exercise.scale_(x, 3.0)),
                    ("mul_out(a, b, out=x)", dtype,
                     lambda x: torch.ops.exercise.mul_out(torch.full((3,), 2.0, dtype=dtype),
                                                          torch.ones(3, dtype=dtype), out=x)),
                    ("fill_then_fail_(x) (it writes x[:2], then raises)", dtype, torch.ops.exercise.fill_then_fail_),
                    (f"accumulate_(x, h), h {half} (a call the mode casts, x written beside it)", torch.float32,
                     lambda x: torch.ops.exercise.accumulate_(x, torch.ones(3, dtype=dtype))),
                    ("scale_all_([x], 3.0) (x written as an element of a Tensor(a!)[] list)", dtype,
                     lambda x: torch.ops.exercise.scale_all_([x], 3.0)),
                    ("scale_both_(y, x, 3.0) (x the second argument written)", dtype,
                     lambda x: torch.ops.exercise.scale_both_(torch.ones(3, dtype=dtype), x, 3.0))]:
                weight = torch.ones(3, dtype=x_dtype, requires_grad=True)
                x = torch.tensor([1.0, 2.0, 3.0], dtype=x_dtype)
                product = weight * x
                before = x._version
                with contextlib.suppress(RuntimeError), mode:  # fill_then_fail_'s own error
                    write(x)
                if x._version == before:
                    return Result(False, f"{what} on a {str(x_dtype).removeprefix('torch.')} x that autograd had saved "
                                         "(weight * x, weight requiring grad): x's version counter did not move, so "
                                         "product.sum().backward() runs on the new x and gives weight a wrong "
                                         "gradient, where the same call on a float32 x without the mode moves it (the "
                                         "kernel's write counts there), and backward refuses. Every argument the "
                                         "schema marks written counts, a float32 one beside half ones, out= buffers "
                                         "and a call that raises included. "
                                         "While __torch_dispatch__ runs, which keys are excluded, and what does that "
                                         f"make of a write?{hint}")
                del product
            # And only those: an x the call only reads keeps its version, which a backward that saved it compares.
            weight = torch.ones(3, dtype=dtype, requires_grad=True)
            x = torch.tensor([1.0, 2.0, 3.0], dtype=dtype)
            product = weight * x
            before = x._version
            with mode:
                torch.ops.exercise.mul_out(x, torch.ones(3, dtype=dtype), out=torch.empty(3, dtype=dtype))
            if x._version != before:
                return Result(False, f"mul_out(x, b, out=o) on a {half} x that autograd had saved (weight * x, weight "
                                     "requiring grad), x only read: x's version counter moved, so "
                                     "product.sum().backward() refuses, where the same call without the mode moves "
                                     "nothing of x's, and backward runs. An argument counts as written where the "
                                     f"schema marks it written (`!`), not because the operator writes something{hint}")
            del product
        weight, x = torch.ones(3, requires_grad=True), torch.tensor([1.0, 2.0, 3.0])
        product = weight * x
        before = x._version
        with mode:
            torch.ops.exercise.scale_(x, 3.0)
        if x._version == before:
            return Result(False, "scale_(x, 3.0) on a float32 x that autograd had saved (weight * x, weight requiring "
                                 "grad), a call with no half tensor: x's version counter did not move, so "
                                 "product.sum().backward() runs on the new x and gives weight a wrong gradient, where "
                                 "the same call without the mode moves it (the kernel's write counts there), and "
                                 "backward refuses. A call the mode hands on as it is loses that count too. While "
                                 "__torch_dispatch__ runs, which keys are excluded, and what does that make of a "
                                 f"write?{hint}")
        del product
        # And a call with no half tensor that writes, then raises: its write counts all the same.
        weight, x = torch.ones(3, requires_grad=True), torch.tensor([1.0, 2.0, 3.0])
        product = weight * x
        before = x._version
        with contextlib.suppress(RuntimeError), mode:  # fill_then_fail_'s own error
            torch.ops.exercise.fill_then_fail_(x)
        if x._version == before:
            return Result(False, "fill_then_fail_(x) (it writes x[:2], then raises) on a float32 x that autograd had "
                                 "saved (weight * x, weight requiring grad), a call with no half tensor: x's version "
                                 "counter did not move, so product.sum().backward() runs on the new x and gives weight "
                                 "a wrong gradient, where the same call without the mode moves it, and backward "
                                 "refuses. A write counts whether the call then returns or raises" + hint)
        del product
    finally:
        library._destroy()
    return Result(True, "no kernel saw a float16 or bfloat16 tensor; outputs in the call's dtype (counts as they "
                        "were), written arguments written and returned, views left alone, float64 untouched")


def _positives_on_symbolic_sizes(op, path: Path) -> str | None:
    """The fake kernel on fake tensors whose sizes are symbols: a 1-D output of x's dtype and device, whose size is
    none of x's sizes, and no guard that pins a size of x."""
    from torch.utils._sympy.numbers import int_oo

    from helpers import shapes

    for what, x in (("a float32 x of shape [4, 3]", torch.randn(4, 3)),
                    ("an int64 x of shape [6]", torch.arange(-3, 3))):
        mode, fakes = shapes.symbolic(x=x)
        try:
            with mode:
                out = op(fakes["x"])
        except Exception as error:  # noqa: BLE001 - the reader's kernel may raise anything; that is the diagnosis
            data = isinstance(error, torch._subclasses.fake_tensor.DataDependentOutputException) or (
                "DataDependent" in type(error).__name__)  # torch's ShapeEnv says so: the kernel read values
            symbolic = "sym" in str(error).lower() or isinstance(error, (TypeError, ValueError))
            why = (": the count of positive elements is not in x's metadata, and a fake tensor has no data to count"
                   if data else ": its sizes are symbols (SymInts), not numbers" if symbolic else "")
            return (f"on {what} whose sizes are symbols (as torch.export with a Dim traces it), your fake kernel "
                    f"raised {_raised(error, path)}{why} (lesson 10, section 6)")
        if out.dim() != 1 or out.dtype != x.dtype or out.device != x.device:
            return (f"on {what} whose sizes are symbols, your fake kernel returns {out.dim()}-D {out.dtype} on "
                    f"{out.device}: the operator returns a 1-D tensor of x's dtype on x's device")
        size = shapes.named(out.shape, mode)[0]
        if pinned := [guard for guard in shapes.guards(mode) if re.search(r"== \d+$|^\d+ ==", guard)]:
            return (f"on {what} whose sizes are symbols, your fake kernel pinned a size to a number ({pinned[0]}): "
                    "the traced code would hold for that size only (lesson 10, section 2: symbolic sizes)")
        if size in shapes.named(fakes["x"].shape, mode) or size.isdigit() or "*" in size:
            return (f"on {what} whose sizes are symbols, your fake kernel's output has {size} elements: a number or "
                    "an expression of x's sizes, where the count depends on x's values")
        bound = mode.shape_env.var_to_range[out.shape[0].node.expr].upper
        # x's sizes are symbols without an upper bound: so is its count of positive elements. (torch's own fake kernel
        # for x[x > 0] bounds it by sys.maxsize - 1, more than any tensor holds.)
        if bound != int_oo and bound < sys.maxsize - 1:
            return (f"on {what} whose sizes are symbols, the count your fake kernel gives is at most {bound}: x may "
                    "have more elements than that, all positive, and compiled code then refuses an input eager takes "
                    "(lesson 10, section 6)")
    return None


@exercise("10.dynamic_fake", "hard")
def dynamic_fake(path: Path) -> Result:
    answer = load_python(path)
    hint = "\nLook again at lesson 10, sections 2 and 6 (fake kernels, and what they cannot read)."
    generator = torch.Generator().manual_seed(0)
    samples = [("a float32 x of shape [3, 4]", torch.randn(3, 4, generator=generator)),
               ("an int64 x from -3 to 4", torch.arange(-3, 5)),
               ("an empty x", torch.zeros(0)),
               ("an x with no positive element", -torch.ones(4)),
               ("a transposed float64 x", torch.randn(4, 3, generator=generator, dtype=torch.float64).t()),
               ("a bfloat16 x", torch.randn(5, generator=generator).bfloat16()),
               ("an int32 x", torch.arange(-2, 4, dtype=torch.int32)),
               ("a 0-d x, negative", torch.tensor(-2.0)), ("a 0-d x, positive", torch.tensor(3.0)),
               ("an x of one element, negative", torch.tensor([-1.0])),
               ("a uint8 x", torch.arange(0, 6, dtype=torch.uint8)),
               ("an int8 x", torch.arange(-3, 3, dtype=torch.int8)),
               ("a bool x", torch.tensor([True, False, True])),
               ("a float16 x", torch.randn(5, generator=generator).half())]
    with operator("positives(Tensor x) -> Tensor", lambda x: x[x > 0]) as library:
        torch.library.register_fake("exercise::positives", answer.fake, lib=library)
        op = torch.ops.exercise.positives.default
        if problem := _positives_on_symbolic_sizes(op, path):  # the quick cases first, opcheck's after them
            return Result(False, problem + hint)
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        from helpers import shapes

        with FakeTensorMode(shape_env=ShapeEnv()):
            on_cuda = op(torch.empty(4, 3, device="cuda:1"))  # a GPU model traced on a machine without one
        if on_cuda.device != torch.device("cuda:1"):
            return Result(False, f"on a fake x on cuda:1, your fake kernel's output is on {on_cuda.device}: a fake "
                                 f"kernel's output lives where the real one's would, on x's device{hint}")
        # A FakeTensorMode with no ShapeEnv has no symbol to give: the kernel must say so, not claim a size. (So does
        # Dynamo's ShapeEnv without fullgraph, capture_dynamic_output_shape_ops off: torch/_dynamo/output_graph.py
        # sets allow_dynamic_output_shape_ops=False; the refusal breaks the graph there and runs the call eagerly, and
        # a size claimed instead goes into the compiled code.)
        try:
            with FakeTensorMode():
                claimed = op(torch.empty(2, 3))
        except Exception:  # noqa: BLE001 - a refusal (DynamicOutputShapeException), as it should be
            claimed = None
        if claimed is not None:
            return Result(False, f"under a FakeTensorMode with no ShapeEnv, where no size can be left unknown (as in "
                                 f"torch.compile without fullgraph, whose ShapeEnv allows none by default), your fake "
                                 f"kernel claimed "
                                 f"{list(claimed.shape)} for a 2 x 3 x: a size it cannot know, which compiled code "
                                 f"then relies on. Where no size can be left unknown, what does torch do with a call "
                                 f"whose output size depends on the data (lesson 10, section 6)?{hint}")
        try:  # a plain meta tensor (shape inference on device="meta"): no size to give, as x[x > 0] there has none
            on_meta = op(torch.empty(4, 3, device="meta"))
        except Exception:  # noqa: BLE001 - refused, as torch's own nonzero and masked_select refuse there
            on_meta = None
        if on_meta is not None:
            return Result(False, f"on a plain meta tensor (no FakeTensorMode: shape inference with device=\"meta\", "
                                 f"a model built on meta), your fake kernel returned shape {list(on_meta.shape)}: a "
                                 f"size it cannot know, where torch's own x[x > 0] refuses. Let the refusal "
                                 f"through{hint}")
        # x's own size unknown while tracing: x the output of positives, or of nonzero (two such calls chained).
        mode, (count,) = shapes.unbacked()
        with mode:
            try:
                op(torch.empty(count))
            except Exception as error:  # noqa: BLE001 - the reader's kernel may raise anything; that is the diagnosis
                return Result(False, f"on a fake x whose own size is unknown while tracing (the output of positives "
                                     f"itself, or of nonzero: positives(positives(x) - 0.5), which eager runs), your "
                                     f"fake kernel raised {_raised(error, path)}: a condition on x's size that no "
                                     f"trace can decide (x.numel() == 0, say) stops torch.compile and torch.export "
                                     f"there (lesson 10, section 6){hint}")
        for what, x in samples:
            results = torch.library.opcheck(op, (x,), test_utils=("test_schema", "test_faketensor"),
                                            raise_exception=False)
            if failed := next(((test, outcome) for test, outcome in results.items() if outcome != "SUCCESS"), None):
                first = str(failed[1]).strip().splitlines()[0][:240] if str(failed[1]).strip() else ""
                if failed[0] == "test_faketensor" and first.startswith("Expected cond to be True"):
                    # torch._check's message, and that of a symbol's bounds checked against the real size
                    first = ("torch raised \"Expected cond to be True, but got False\": a condition your fake kernel "
                             "states (a torch._check, or a min= or max= on the output's size) is false here, where "
                             f"the real kernel returns {x[x > 0].numel()} elements")
                return Result(False, f"on {what}: opcheck's {failed[0]} failed: {first}{hint}")


        class Doubled(torch.nn.Module):
            def forward(self, x):
                return op(x) * 2

        doing = "torch.export with a Dim, of a function that calls positives, on 5 rows"  # for an error's diagnosis
        try:
            program = torch.export.export(Doubled(), (torch.randn(5, 3, generator=generator),),
                                          dynamic_shapes={"x": {0: torch.export.Dim("rows")}})
            # More rows, then more positive elements than the example had elements at all: a bound taken from the
            # example refuses them.
            for doing, x in [("the exported program, run on 7 rows", torch.randn(7, 3, generator=generator)),
                             ("the exported program, run on 7 rows of positive elements only", torch.ones(7, 3))]:
                if not torch.equal(program.module()(x), x[x > 0] * 2):
                    return Result(False, f"{doing}: other values than eager" + hint)
            inputs = [*((f"{rows} rows", torch.randn(rows, 3, generator=generator)) for rows in (4, 6)),
                      ("8 rows of positive elements only", torch.ones(8, 3)),
                      ("23334 rows of positive elements only (70002 of them: more than any round bound, 2**16 "
                       "included)", torch.ones(23334, 3)),
                      ("a 3-D x, 2 x 3 x 4, of positive elements only", torch.ones(2, 3, 4)),
                      ("an x with no positive element", -torch.ones(2, 3)),
                      ("an x with one positive element", torch.tensor([[-1.0, 2.0, -3.0], [-4.0, -5.0, -6.0]])),
                      ("a 2 x 3 x of positive elements only", torch.ones(2, 3)),
                      ("a transposed x, 5 x 3, of positive elements only", torch.ones(3, 5).t()),
                      ("an x expanded from one row (stride 0), 6 x 3, of positive elements only",
                       torch.ones(1, 3).expand(6, 3))]
            for dynamic in (True, False):
                torch._dynamo.reset()  # a compile of its own: the other setting's graphs would serve these calls
                compiled = torch.compile(Doubled(), backend="aot_eager", fullgraph=True, dynamic=dynamic)
                for what, x in inputs:
                    doing = f"torch.compile(fullgraph=True, dynamic={dynamic}) of it, called on {what}"
                    if not torch.equal(compiled(x), x[x > 0] * 2):
                        return Result(False, f"torch.compile(fullgraph=True, dynamic={dynamic}): other values than "
                                             f"eager on {what}{hint}")

            # A plain torch.compile (no fullgraph, torch's default config): where no size can be left unknown, torch
            # refuses inside the fake kernel (DynamicOutputShapeException), Dynamo breaks the graph there and runs
            # the call eagerly. An error of the kernel's own instead fails the compile.
            torch._dynamo.reset()
            doing = "a plain torch.compile (no fullgraph) of it, called on 4 rows"
            x = torch.randn(4, 3, generator=generator)
            if not torch.equal(torch.compile(Doubled(), backend="aot_eager")(x), x[x > 0] * 2):
                return Result(False, f"{doing}: other values than eager{hint}")

            def two_counts(x):  # one trace, two calls, x changed in between: two sizes
                first = op(x)
                x.neg_()
                return torch.tensor(first.shape[0] * 10 + op(x).shape[0])

            x = torch.tensor([1.0, 2.0, -3.0])
            want = two_counts(x.clone())
            doing = "torch.compile of positives(x), then x.neg_(), then positives(x) again"
            if not torch.equal(got := torch.compile(two_counts, backend="aot_eager", fullgraph=True)(x.clone()), want):
                return Result(False, f"torch.compile of positives(x), then x.neg_(), then positives(x) again, "
                                     f"returning 10 * the first count + the second: {got.item():g} where eager gives "
                                     f"{want.item():g}: the two calls' counts are two sizes, even on one tensor "
                                     f"(something kept between calls?){hint}")

            def two_rows(x):  # two views of one tensor: one storage, one shape, one stride, other elements
                return torch.tensor(op(x[0]).shape[0] * 10 + op(x[1]).shape[0])

            x = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 2.0, -3.0]])
            doing = "torch.compile of positives(x[0]) and positives(x[1])"
            if not torch.equal(got := torch.compile(two_rows, backend="aot_eager", fullgraph=True)(x), two_rows(x)):
                return Result(False, f"torch.compile of positives(x[0]) and positives(x[1]), returning 10 * the first "
                                     f"count + the second: {got.item():g} where eager gives {two_rows(x).item():g}: "
                                     f"two views of one tensor (one storage, one shape, other elements) have two "
                                     f"counts (something kept between calls?){hint}")
        except Exception as error:  # noqa: BLE001 - export and compile wrap whatever the fake kernel raised
            cause = _innermost(error)
            said = str(cause).strip().splitlines()[0][:240]
            if "memo disaster" in said or re.fullmatch(r"u\d+ -> u\d+", said):  # torch's internal assertions
                said += (" (torch found one size symbol standing for two outputs: a fake kernel makes a new size for "
                         "each call, never one kept from an earlier call: something kept between calls?)")
            elif "Runtime assertion failed" in said:
                said += (" (a bound your fake kernel gave the size, or a check it made on it, does not hold for this "
                         "input, which eager takes)")
            elif isinstance(cause, AssertionError) and "Expected op to be" in said:  # torch's own, while exporting
                said += (" (torch's own assertion, raised while it worked out a range of the Dim to suggest: your "
                         "fake kernel bounded x's sizes, a torch._check on them, and export refuses a bound the Dim "
                         "does not state; of a simpler one, it says so: \"Constraints violated\")")
            return Result(False, f"{doing}: failed: {type(cause).__name__}: {said}{hint}")
    return Result(True, "opcheck passes on every input; on symbolic sizes a 1-D output of its own size, no size "
                        "pinned; on x's device; exported with a Dim and compiled with fullgraph=True")
