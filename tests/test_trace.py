"""helpers/trace.py: the predicted path equals the recorded one, for many keysets."""

import warnings
from contextlib import nullcontext

import pytest
import torch

from torch.utils._python_dispatch import TorchDispatchMode

from helpers import isolated, plot, trace


def make(kind):
    torch.manual_seed(0)
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    if kind == "requires_grad":
        x.requires_grad_()
    return x, y


CONTEXTS = {
    "plain": nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
    "autocast": lambda: torch.autocast("cpu", dtype=torch.bfloat16),
}


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("kind", ["plain", "requires_grad"])
@pytest.mark.parametrize("op_name", ["add", "matmul", "sum"])
def test_predicted_path_matches_recorded_path(workbook, op_name, kind, context):
    x, y = make(kind)
    args = (x,) if op_name == "sum" else (x, y.T.contiguous() if op_name == "matmul" else y)
    with CONTEXTS[context]():
        t = trace.call(getattr(workbook, op_name), *args)
    assert t.error is None
    # All three have Autograd kernels (csrc/autograd.cpp); inference_mode excludes that key.
    # add and matmul also have AutocastCPU kernels (csrc/autocast.cpp), which only an autocast region turns on.
    through_autocast = op_name in ("add", "matmul") and context == "autocast"
    through_autograd = context != "inference_mode"
    assert t.recorded_path == (["AutocastCPU"] if through_autocast else []) + (
        ["AutogradCPU"] if through_autograd else []) + ["CPU"]
    assert [e.depth for e in t.recorded] == list(range(len(t.recorded)))
    assert t.agrees


def test_recorded_event_has_op_keyset_depth_and_dtypes(workbook):
    x, y = make("plain")
    t = trace.call(workbook.add, x, y)
    autograd, cpu = t.recorded
    assert (autograd.op, autograd.key, autograd.depth, autograd.dtypes) == ("add", "AutogradCPU", 0, ["Float", "Float"])
    assert (cpu.op, cpu.key, cpu.depth, cpu.dtypes) == ("add", "CPU", 1, ["Float", "Float"])
    assert "AutogradCPU" in autograd.keyset and "AutogradCPU" not in cpu.keyset


def test_keyset_of_cpu_tensor_and_tls_sets():
    x = torch.ones(2)
    keys = trace.keyset_of(x)
    assert trace.key_names(keys.from_tensors) == ["AutocastCPU", "AutogradCPU", "ADInplaceOrView", "CPU"]
    assert "AutocastCPU" not in trace.key_names(keys.effective)  # excluded until autocast is on
    with torch.autocast("cpu"):
        assert "AutocastCPU" in trace.key_names(trace.keyset_of(x).effective)
    with torch.inference_mode():
        # Autograd keys are excluded; x was made outside the mode, so it still carries ADInplaceOrView.
        assert trace.keyset_of(x).excluded == ["AutocastCPU", "AutogradCPU"]
        assert trace.key_names(trace.keyset_of(x).effective) == ["ADInplaceOrView", "BackendSelect", "CPU"]


@pytest.mark.parametrize(
    "context, expected",
    [
        (CONTEXTS["plain"], ["AutogradCPU", "CPU"]),
        (CONTEXTS["inference_mode"], ["CPU"]),
        (CONTEXTS["autocast"], ["AutocastCPU", "AutogradCPU", "CPU"]),
    ],
)
def test_predicts_native_aten_ops(context, expected):
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    with context():
        assert trace.call(torch.ops.aten.mm.default, a, b).predicted_path == expected


def test_missing_kernel_is_predicted_and_the_error_kept(workbook):
    # Nothing is registered at SparseCPU for workbook ops, and torch has no fallback there.
    x = torch.eye(2).to_sparse()
    t = trace.call(workbook.add, x, x)
    assert [(s.key, s.status) for s in t.predicted][-1] == ("SparseCPU", "missing")
    assert t.predicted_path == ["AutogradCPU"]
    assert isinstance(t.error, NotImplementedError) and "SparseCPU" in str(t.error)
    assert t.recorded_path == ["AutogradCPU"]  # our autograd kernel ran, then the dispatcher found nothing


def test_dispatch_table_marks_our_kernels_and_fallthroughs(workbook):
    table = trace.dispatch_table(workbook.add)
    assert table["CPU"].ours and table["CPU"].where.startswith("csrc/cpu.cpp:")
    assert table["ADInplaceOrView"].fallthrough
    assert "CUDA" not in table


def test_torchs_own_registrations_show_their_file_without_a_line(workbook):
    # torch's line numbers move with every release; stored outputs must survive one (README: supported range).
    assert trace.dispatch_table(torch.ops.aten.add.Tensor)["AutogradCPU"].where.startswith("VariableType_")
    assert ":" not in trace.dispatch_table(torch.ops.aten.add.Tensor)["AutogradCPU"].where


def test_the_cuda_column_depends_on_the_torch_build_not_on_a_gpu():
    # Lesson 00: a CUDA build of torch registers its CUDA kernels with or without a GPU; the CPU-only build has none.
    entry = trace.dispatch_table(torch.ops.aten.add.Tensor)["CUDA"]
    if torch.version.cuda:
        assert (entry.kind, entry.where) == ("kernel", "RegisterCUDA_0.cpp")
    else:
        assert entry.kind == "default backend kernel"


def test_op_name_forms(workbook):
    assert trace.op_name(workbook.add) == trace.op_name(workbook.add.default) == "workbook::add"
    assert trace.op_name(torch.ops.aten.add.Tensor) == "aten::add.Tensor"
    with pytest.raises(ValueError, match="overloads"):
        trace.op_name(torch.ops.aten.sub_)


def test_plots_draw_one_panel_per_trace_and_a_table(workbook):
    x, y = make("plain")
    fig = plot.ladders([trace.call(workbook.add, x, y), trace.call(torch.ops.aten.add.Tensor, x, y)])
    assert len(fig.axes) == 2
    fig = plot.table_map([workbook.add, torch.ops.aten.add.Tensor], keys=["AutogradCPU", "CPU", "Meta"])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["AutogradCPU", "CPU", "Meta"]


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("kind", ["plain", "requires_grad"])
def test_a_composite_ops_nested_calls_are_named_and_do_not_spoil_agrees(workbook, kind, context):
    x, _ = make(kind)
    with CONTEXTS[context]():
        t = trace.call(workbook.mean, x)  # mean's kernel (composite.cpp) calls workbook::sum
    assert t.error is None and t.agrees
    # mean's Autograd kernel (autograd.cpp) runs first, outside inference_mode; its CPU kernel calls sum below autograd.
    own_path = ["CPU"] if context == "inference_mode" else ["AutogradCPU", "CPU"]
    assert [e.op for e in t.own_events] == ["mean"] * len(own_path) and t.recorded_path == own_path
    assert [(e.op, e.key) for e in t.nested] == [("sum", "CPU")]
    assert t.nested[0].depth > t.own_events[-1].depth  # called from inside mean's CPU kernel
    recorded = " -> ".join([f"{key}(Float)" for key in own_path] + ["sum@CPU(Float)"])
    assert f"recorded:  {recorded}" in repr(t) and "nested:    sum" in repr(t)


def test_ours_without_a_named_folder_means_registered_outside_torch(workbook, monkeypatch):
    monkeypatch.setattr(trace, "OURS", None)  # as in a reader's project, where nobody names csrc/
    table = trace.dispatch_table(workbook.add)
    assert table["CPU"].ours and table["CPU"].where.startswith("cpu.cpp:")
    assert not trace.dispatch_table(torch.ops.aten.add.Tensor)["CPU"].ours
    assert table["AutocastCPU"].ours and not table["ADInplaceOrView"].ours  # ours; torch's fallthrough


def test_the_recorder_is_off_outside_recording_and_on_inside(workbook):
    x, y = make("plain")
    workbook.add(x, y)  # recorder off: this call logs nothing
    with trace.recording() as events:
        pass
    assert events == []
    with trace.recording() as events:
        workbook.add(x, y)
    assert [(e.op, e.key) for e in events] == [("add", "AutogradCPU"), ("add", "CPU")]


def test_the_log_is_handed_only_to_a_library_of_the_same_layout(workbook):
    # trace.h's kLogLayout is 1: a library built from another trace.h gets an error, not the address of a log it
    # would read with the wrong layout.
    assert torch.ops.workbook_trace.log_address(1) != 0
    with pytest.raises(RuntimeError, match="log layout 2 asked for the log, which has layout 1.*Rebuild both"):
        torch.ops.workbook_trace.log_address(2)


def test_a_quantized_factory_call_on_meta_is_predicted_at_quantized_meta():
    # A key torch._C cannot parse (Library.impl refuses it, so no kernel of ours can be put there): its name is still
    # ordered and predicted, and the call makes a quantized meta tensor, as QuantizedMeta's kernel does.
    steps = trace.predict(torch.ops.aten.empty.memory_format, [2], dtype=torch.qint8, device="meta")
    assert trace.path(steps) == ["BackendSelect", "QuantizedMeta"]
    made = torch.ops.aten.empty.memory_format([2], dtype=torch.qint8, device="meta")
    assert made.is_quantized and made.is_meta


@pytest.mark.parametrize("layout, dtype, device, backend", [
    (torch.strided, None, "meta", "Meta"), (torch.sparse_coo, None, "meta", "SparseMeta"),
    (torch.strided, torch.qint8, "cpu", "QuantizedCPU"), (torch._mkldnn, None, "cpu", "MkldnnCPU"),
    (torch.sparse_csr, None, "cpu", "SparseCsrCPU"), (torch.sparse_bsc, None, "meta", "SparseCsrMeta"),
    # c10::computeDispatchKey gives MAIA, FPGA and Vulkan no Quantized key: a quantized factory there is dense.
    (torch.strided, torch.qint8, "maia", "MAIA"), (torch.strided, torch.qint8, "fpga", "FPGA"),
    (torch.strided, torch.qint8, "vulkan", "Vulkan"),
    # A quantized dtype picks the Quantized key with the strided layout only: a sparse one keeps its Sparse key.
    (torch.sparse_coo, torch.qint8, "cpu", "SparseCPU")])
def test_a_factory_call_goes_from_backend_select_to_the_backend_of_its_arguments(layout, dtype, device, backend):
    # A kernel of ours at that backend, for one of aten's factory functions: it runs only if BackendSelect's kernel
    # hands the call on to the backend the device, layout and dtype arguments name.
    ran = []

    def zeros(size, *, dtype=None, layout=None, device=None, pin_memory=None):
        ran.append(backend)
        return torch.empty(0, device="meta")

    library = torch.library.Library("aten", "IMPL")
    library.impl("zeros", zeros, backend)
    try:
        t = trace.call(torch.ops.aten.zeros.default, [2], layout=layout, dtype=dtype, device=device)
        assert t.predicted_path == ["BackendSelect", backend] and ran == [backend], t
    finally:
        library._destroy()


@pytest.mark.parametrize("layout, device", [(torch.sparse_coo, "maia"), (torch.sparse_coo, "vulkan"),
                                            (torch.sparse_csr, "fpga"), (torch._mkldnn, "meta"),
                                            (torch._mkldnn, "maia")])
def test_a_factory_call_whose_layout_its_device_lacks_ends_at_backend_select(layout, device):
    # c10::computeDispatchKey refuses a sparse or mkldnn layout on a device without that key: BackendSelect's kernel
    # raises, and the walk ends there, with no key below it tried (not even one found missing).
    steps = trace.predict(torch.ops.aten.zeros.default, [2], layout=layout, device=device)
    with pytest.raises(NotImplementedError, match="Unsupported device type for"):
        torch.ops.aten.zeros.default([2], layout=layout, device=device)
    assert [(step.key, step.status) for step in steps][-1] == ("BackendSelect", "kernel")


def test_a_backend_select_kernel_of_an_operator_s_own_ends_the_walk():
    # prims' factories register a BackendSelect kernel from Python (torch/_prims/__init__.py, _backend_select_impl)
    # that computes the result itself: unlike torchgen's, it hands nothing on, so the CPU kernel never runs.
    import torch._prims  # noqa: F401 - defines the prims operators

    ran = []

    def full(shape, fill_value, *, dtype, device, requires_grad):
        ran.append("CPU")
        return torch.empty(0)

    with torch.library._scoped_library("prims", "IMPL") as library:
        library.impl("full", full, "CPU")
        steps = trace.predict(torch.ops.prims.full.default, [2], 1.0, dtype=torch.float32, device=torch.device("cpu"),
                              requires_grad=False)
        made = torch.ops.prims.full.default([2], 1.0, dtype=torch.float32, device=torch.device("cpu"),
                                            requires_grad=False)
    assert trace.path(steps) == ["BackendSelect"] and ran == [] and made.tolist() == [1.0, 1.0], steps


def test_inside_vmap_a_functorch_hack_kernel_ends_the_walk():
    # aten::linear has a kernel of its own at FuncTorchDynamicLayerFrontMode (functorch's PyTorchOperatorHacks.cpp),
    # which computes linear from other operators: linear's own Autograd kernel, below, never runs inside vmap.
    ran, weight = [], torch.randn(2, 3)

    def autograd_linear(x, w, b=None):
        ran.append("AutogradCPU")
        with torch._C._AutoDispatchBelowAutograd():
            return torch.ops.aten.linear.default(x, w, b)

    def row(x):
        ran.append(trace.path(trace.predict(torch.ops.aten.linear.default, x, weight)))
        return torch.ops.aten.linear.default(x, weight)

    with torch.library._scoped_library("aten", "IMPL") as library:
        library.impl("linear", autograd_linear, "AutogradCPU")
        torch.ops.aten.linear.default(torch.randn(3), weight)  # outside vmap: it runs
        torch.func.vmap(row)(torch.randn(4, 3))
    assert ran == ["AutogradCPU", ["FuncTorchDynamicLayerFrontMode"]]


def test_backend_select_hands_a_factory_on_past_the_threads_sets_and_a_tensor_call_through_them():
    # torchgen/gen.py, ComputeBackendSelect: with no tensor argument the key computed from the call's options is handed
    # on as it is; with tensors too, c10::impl::computeDispatchKeySet applies the thread's include and exclude sets.
    reached, marker, x = [], torch.zeros(1), torch.ones(2)  # made before any guard

    def kernel_of(name):
        return lambda *args, **kwargs: reached.append(name) or marker

    with torch.library._scoped_library("aten", "IMPL") as library:
        for name in ("empty.memory_format", "_to_copy"):
            library.impl(name, kernel_of(name), "PrivateUse3")  # a backend nothing else registers at
        with torch._C._IncludeDispatchKeyGuard(torch._C.DispatchKey.PrivateUse3):
            torch.ops.aten.empty.memory_format([2])
            torch.ops.aten._to_copy.default(x, dtype=torch.float64)
    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)):
        made = torch.ops.aten.empty.memory_format([2])  # empty has no Undefined kernel to fall to, were CPU excluded
    assert reached == ["_to_copy"] and made.device.type == "cpu"


def test_a_factory_call_without_a_device_goes_to_cpu_whatever_python_s_default_device():
    # torch.set_default_device fills in the device of torch's Python functions (torch.zeros), not of an operator's
    # call: c10 picks CPU for a device left out.
    with torch.device("meta"):
        t = trace.call(torch.ops.aten.zeros.default, [2])
    assert t.predicted_path == ["BackendSelect", "CPU"] and t.result.device.type == "cpu"


@pytest.mark.parametrize("key", ["CompositeExplicitAutograd", "CompositeImplicitAutograd", "CPU"])
def test_an_operator_without_tensor_arguments_runs_the_undefined_entry_or_fails(key):
    # No tensor, no BackendSelect kernel: the keyset is empty, and the dispatcher takes the table's Undefined entry,
    # which a composite kernel fills and a CPU kernel does not (lesson 00, 'Underneath trace.call').
    with torch.library._scoped_library("trace_test", "FRAGMENT") as library:
        library.define("answer(int n) -> int")
        library.impl("answer", lambda n: n + 1, key)
        t = trace.call(torch.ops.trace_test.answer.default, 41)
    if key == "CPU":
        assert (t.predicted[-1].key, t.predicted[-1].status, t.predicted_path) == ("Undefined", "missing", [])
        assert "There were no tensor arguments to this function" in str(t.error)
    else:
        assert t.predicted_path == ["Undefined"] and t.result == 42


def test_the_recorder_is_unseen_by_a_mode_even_at_a_librarys_first_recorded_call():
    # A fresh process: each library's first recorded kernel looks the log up through the dispatcher (trace.h, log()),
    # here inside a mode, which must not see that lookup, nor the recorder's start and stop.
    done = isolated.run("""
        import torch
        from helpers import build, trace
        build.load_all("schemas", "cpu", "autograd")
        ones = torch.ones(2)
        with trace.op_calls() as names:
            t = trace.call(torch.ops.workbook.add, ones, ones)
        print(names, t.recorded_path, t.agrees)
    """)
    assert done.stdout.strip() == "['workbook.add.default'] ['AutogradCPU', 'CPU'] True", done.stderr


def test_under_a_mode_the_python_step_names_it_and_the_walk_goes_on_below(workbook):
    x, y = make("requires_grad")
    with trace.op_calls():
        t = trace.call(workbook.add, x, y)
    python = next(step for step in t.predicted if step.key == "Python")
    assert python.handled_by == "_OpCalls.__torch_dispatch__"
    assert t.predicted_path == ["PythonTLSSnapshot", "AutogradCPU", "Python", "CPU"] and t.agrees


def test_fake_tensors_go_from_the_python_key_to_the_meta_kernel(workbook):
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    a, b = mode.from_tensor(torch.randn(2, 3)), mode.from_tensor(torch.randn(3, 4))
    with mode:
        t = trace.call(workbook.matmul, a, b)
    assert next(step for step in t.predicted if step.key == "Python").handled_by == "FakeTensorMode: on to Meta"
    assert t.recorded_path == ["AutogradCPU", "Meta"] and t.agrees and t.result.shape == (2, 4)
    # A FakeTensor outside its mode takes the same path: its class sends the call to its mode.
    assert trace.call(workbook.matmul, a, b).recorded_path == ["AutogradCPU", "Meta"]


def test_a_fake_kernel_in_python_ends_the_walk_at_the_python_key():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with torch.library._scoped_library("trace_test", "FRAGMENT") as library:
        library.define("twice(Tensor x) -> Tensor")
        library.impl("twice", lambda x: x * 2, "CPU")
        torch.library.register_fake("trace_test::twice", lambda x: torch.empty_like(x), lib=library)
        with FakeTensorMode() as mode:
            t = trace.call(torch.ops.trace_test.twice.default, mode.from_tensor(torch.ones(3)))
    python = next(step for step in t.predicted if step.key == "Python")
    assert python.handled_by == "FakeTensorMode: its fake kernel"
    assert t.predicted_path[-1] == "Python" and t.result.shape == (3,)


def test_a_register_torch_dispatch_rule_is_named_at_the_python_step(workbook):
    rules = []

    def matmul_rule(mode, func, types, args, kwargs):
        rules.append(func)
        return func(*args, **kwargs)

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with torch.library._scoped_library("workbook", "FRAGMENT") as library:
        torch.library.register_torch_dispatch("workbook::matmul", Mode, matmul_rule, lib=library)
        with Mode():
            t = trace.call(workbook.matmul, torch.randn(2, 3), torch.randn(3, 4))
    python = next(step for step in t.predicted if step.key == "Python")
    assert python.handled_by == "matmul_rule (register_torch_dispatch)"
    assert rules == [workbook.matmul.default] and t.agrees


def test_a_user_mode_runs_before_fake_tensor_mode_whichever_was_entered_first(workbook):
    # torch keeps its own modes (FakeTensorMode) below the user's: the user's mode sees the call, then FakeTensorMode.
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    a, b = mode.from_tensor(torch.randn(2, 3)), mode.from_tensor(torch.randn(3, 4))
    for outer, inner in ((trace.op_calls(), mode), (mode, trace.op_calls())):
        with outer as first, inner as second:
            t = trace.call(workbook.matmul, a, b)
        names = first if isinstance(first, list) else second
        python = next(step for step in t.predicted if step.key == "Python")
        assert python.handled_by == "_OpCalls.__torch_dispatch__ -> FakeTensorMode: on to Meta"
        assert names == ["workbook.matmul.default"] and t.recorded_path == ["AutogradCPU", "Meta"] and t.agrees


def test_under_the_python_dispatcher_a_walk_ends_and_every_kernel_below_still_holds_its_key(workbook):
    # torch.compile's and export's tracing turn torch's Python dispatcher on. c10's mask of the keys below a key
    # (FULL_AFTER) always keeps PythonDispatcher, so every redispatch goes back through it: a walk that did not drop it
    # would pick it again forever, and the recorder names each kernel by the key below it.
    from torch._dispatch.python import enable_python_dispatcher

    a, b = torch.randn(3, requires_grad=True), torch.randn(3)
    with enable_python_dispatcher():
        assert trace.key_names(trace.keyset_of(a, b).effective)[0] == "PythonDispatcher"
        t = trace.call(torch.ops.workbook.add.default, a, b)
        # add_ with nothing to record redispatches below autograd (its guard excludes the Autograd keys for the
        # calls below, whose keysets the Python dispatcher computes again from the thread's sets).
        in_place = trace.call(torch.ops.workbook.add_.default, torch.randn(3), torch.randn(3))
    assert t.predicted_path == ["PythonDispatcher", "AutogradCPU", "CPU"] and t.agrees, t
    assert all("PythonDispatcher" in event.keyset for event in t.own_events), t.own_events
    assert in_place.predicted_path == ["PythonDispatcher", "AutogradCPU", "ADInplaceOrView", "CPU"], in_place
    assert in_place.agrees, in_place
    # Autocast excluded, AutogradCPU and Meta after BackendSelect: ordered without merging two backends' keys.
    with enable_python_dispatcher():
        moved = trace.predict(torch.ops.aten._to_copy.default, torch.randn(2, requires_grad=True), device="meta")
    assert trace.path(moved) == ["PythonDispatcher", "AutogradCPU", "BackendSelect", "Meta"], moved


def test_a_tensor_given_for_an_int_argument_brings_no_keys():
    """The dispatcher reads keys from the arguments its schema types Tensor (c10's DispatchKeyExtractor); torch.ops
    takes a 0-dim integer tensor for a SymInt, as a number. Kernels that log themselves show which ran."""
    ran = []
    with torch.library._scoped_library("trace_test", "FRAGMENT") as library:
        library.define("pick(Tensor x, SymInt i) -> Tensor")

        def autograd_kernel(x, i):
            ran.append("AutogradCPU")
            with torch._C._AutoDispatchBelowAutograd():
                return torch.ops.trace_test.pick.default(x, i)

        library.impl("pick", autograd_kernel, "AutogradCPU")
        library.impl("pick", lambda x, i: ran.append("CPU") or x[i].clone(), "CPU")
        with torch.inference_mode():
            x = torch.randn(4, 3)  # no autograd key
        index = torch.tensor(1)  # a tensor made outside the mode: it has AutogradCPU
        predicted = trace.path(trace.predict(torch.ops.trace_test.pick.default, x, index))
        torch.ops.trace_test.pick.default(x, index)
    assert predicted == ran == ["CPU"]


def _refusing(ran: list, key: str):
    """A kernel that notes it was reached and stops the call there."""
    def kernel(*args, **kwargs):
        ran.append(key)
        raise RuntimeError(f"reached {key}")
    return kernel


def test_a_nested_decomposition_ends_the_walk():
    # CompositeImplicitAutogradNestedTensor fills AutogradNestedTensor ("nested kernel"): reshape of a nested tensor is
    # computed from other operators there, and the AutogradCPU key, also in a nested tensor's keyset, is never reached.
    ran, nested = [], torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(2, 3)], layout=torch.strided)
    with torch.library._scoped_library("aten", "IMPL") as library:
        library.impl("reshape", _refusing(ran, "AutogradCPU"), "AutogradCPU")
        predicted = trace.path(trace.predict(torch.ops.aten.reshape.default, nested, [2, 6]))
        torch.ops.aten.reshape.default(nested, [2, 6])
    assert predicted == ["AutogradNestedTensor"] and ran == []


def _add_handed_on(ran: list, key: str):
    """A kernel for aten::add.Tensor at an autograd key that notes it ran, then hands the call on below autograd."""
    def kernel(keyset, a, b, alpha=1):
        ran.append(key)
        with torch._C._AutoDispatchBelowAutograd():
            return torch.ops.aten.add.Tensor.redispatch(keyset & torch._C._after_autograd_keyset, a, b, alpha=alpha)
    return kernel


def test_an_autograd_kernel_hands_on_below_every_autograd_key():
    # A nested tensor's keyset holds AutogradCPU below AutogradNestedTensor. The kernel there (VariableType's,
    # generated) redispatches with ks & after_autograd_keyset, every autograd key masked, not only the keys above
    # AutogradCPU: a kernel at AutogradCPU that logs itself and hands the call on never runs for a nested tensor, that
    # requires grad or not; it does for a dense one.
    ran = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "The PyTorch API of nested tensors is in prototype stage"
        nested = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)])
    with torch.library._scoped_library("aten", "IMPL") as library:
        library.impl("add.Tensor", _add_handed_on(ran, "AutogradCPU"), "AutogradCPU", with_keyset=True)
        for x in (nested, nested.detach().requires_grad_()):
            assert "AutogradCPU" in trace.key_names(torch._C._dispatch_keys(x))
            predicted = trace.path(trace.predict(torch.ops.aten.add.Tensor, x, x))
            torch.ops.aten.add.Tensor(x, x)
            assert predicted == ["AutogradNestedTensor", "NestedTensorCPU"] and ran == []
        dense = torch.randn(3)
        assert trace.path(trace.predict(torch.ops.aten.add.Tensor, dense, dense)) == ["AutogradCPU", "CPU"]
        torch.ops.aten.add.Tensor(dense, dense)
        assert ran == ["AutogradCPU"]


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="a torch built without oneDNN has no mkldnn tensors")
def test_an_autograd_kernel_hands_on_below_autograd_other_too():
    # A CPU tensor beside an mkldnn one: the keyset holds AutogradOther below AutogradCPU. AutogradCPU's kernel masks
    # it too: a kernel at AutogradOther that logs itself and hands the call on never runs (the call then fails in
    # MkldnnCPU's kernel); for two mkldnn tensors, whose keyset holds AutogradOther alone, it runs.
    ran = []
    dense, mkldnn = torch.randn(2, 3), torch.randn(2, 3).to_mkldnn()
    with torch.library._scoped_library("aten", "IMPL") as library:
        library.impl("add.Tensor", _add_handed_on(ran, "AutogradOther"), "AutogradOther", with_keyset=True)
        assert trace.path(trace.predict(torch.ops.aten.add.Tensor, dense, mkldnn)) == ["AutogradCPU", "MkldnnCPU"]
        with pytest.raises(RuntimeError):
            torch.ops.aten.add.Tensor(dense, mkldnn)
        assert ran == []
        torch.ops.aten.add.Tensor(mkldnn, mkldnn)  # AutogradOther alone: the kernel there runs
    assert ran == ["AutogradOther"]


def test_a_batched_decomposition_ends_the_walk():
    # FuncTorchBatchedDecomposition fills FuncTorchBatched ("batched kernel"): inside vmap, flatten of a batched tensor
    # is computed from other operators there, and its AutogradCPU entry is never reached.
    ran, predicted = [], []

    def flat(t):
        predicted.append(trace.path(trace.predict(torch.ops.aten.flatten.using_ints, t, 0, -1)))
        return torch.ops.aten.flatten.using_ints(t, 0, -1)

    with torch.library._scoped_library("aten", "IMPL") as library:
        library.impl("flatten.using_ints", _refusing(ran, "AutogradCPU"), "AutogradCPU")
        torch.func.vmap(flat)(torch.randn(3, 2, 2))
    assert predicted == [["FuncTorchDynamicLayerFrontMode", "FuncTorchBatched"]] and ran == []


def test_a_kernel_registered_through_the_legacy_api_is_read():
    # torch::RegisterOperators' rows say "registered by RegisterOperators" (torch's own _test:: operators): a math kernel
    # at AutogradCPU here, which the call runs.
    x = torch.randn(3)
    assert trace.path(trace.predict(torch.ops._test.cat.default, [x, x])) == ["AutogradCPU"]
    assert torch.equal(torch.ops._test.cat.default([x, x]), torch.cat([x, x]))
