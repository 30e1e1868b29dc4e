"""The mistakes each check must catch: a reference solution with one mistake edited in.

A mistake is (exercise, name, what is wrong, words its diagnosis must contain, edits): each edit replaces text that
stands once in the solution, so a mistake cannot silently stop applying when a solution changes. tests/test_exercises.py
writes each one out and proves its check fails with that diagnosis. They are the errors learners make, and where a
check once passed a wrong answer, that answer is here.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import checks  # noqa: F401 - registers the exercises
from .toolkit import EXERCISES, FOLDER


@dataclass(frozen=True)
class Mistake:
    exercise: str
    name: str
    why: str
    expect: str
    edits: list

    def text(self) -> str:
        """The reference solution with this mistake's edits made."""
        solution = (FOLDER / "solutions" / EXERCISES[self.exercise].file).read_text()
        for old, _ in self.edits:
            assert solution.count(old) == 1, f"{self.exercise} {self.name}: {old!r} no longer stands once in the solution"
        text, done = "", 0
        for old, new in sorted(self.edits, key=lambda edit: solution.index(edit[0])):
            start = solution.index(old)
            text += solution[done:start] + new
            done = start + len(old)
        return text + solution[done:]


# 01.alias_annotations' solution, as its mistakes edit it
ALIAS_DIAG = '    "diag_sum": "diag_sum(Tensor(a) x) -> (Tensor(a), Tensor)",\n'
ALIAS_CLAMP = '    "clamp_count_": "clamp_count_(Tensor(a!) x, float lo, float hi) -> Tensor",\n'
ALIAS_MINMAX = ('    "minmax_out": "minmax_out(Tensor x, *, Tensor(a!) min, Tensor(b!) max) '
                '-> (Tensor(a!), Tensor(b!))",\n')
ALIAS_TAGS = 'TAGS = {"diag_sum": [], "clamp_count_": [], "minmax_out": [torch.Tag.out]}\n'
# 02.meta_kernel's solution, likewise
OUTER_SIZES = ("  std::vector<c10::SymInt> sizes(a.sym_sizes().begin(), a.sym_sizes().end());\n"
               "  sizes.insert(sizes.end(), b.sym_sizes().begin(), b.sym_sizes().end());\n")
OUTER_RETURN = "  return at::empty_symint(sizes, a.options().dtype(at::result_type(a, b)));\n"

# 09.inplace_kernel's solution, as mistakes edit it
MUL_CAST_CHECK = ("    if not torch.can_cast(computed_in, out.dtype):\n"
                  "        raise RuntimeError(f\"mul.out: the product's type {computed_in} can't be cast to `out`'s "
                  "{out.dtype}\")\n")
MUL_RESIZE = ("    if out.shape != product.shape:\n"
              "        out.resize_(product.shape)  # our resize_ kernel: out's own storage, grown\n")
MUL_COPY = "    out.copy_(product)  # our _copy_from: into out's memory, by its strides, converted to its dtype\n"
MUL_PRODUCT = "    product = self * other\n" + MUL_RESIZE + MUL_COPY + "    return out\n"
FAKE_RETURN = "    return torch.cat([a, b]).view(2, *a.shape)\n"  # 06.fake_kernel's solution, as mistakes edit it
STABLE_FAKE = ("    return self.new_empty(self.shape)  # the CPU kernel's output: new, contiguous, self's dtype and "
               "device\n")
STABLE_CHECKS = """\
    # add.cpp's checks, as torch._check: on symbolic sizes it compares the symbols, and fixes no size to a number.
    torch._check(self.layout == other.layout == torch.strided, lambda: "workbook_stable::add: dense tensors only")
    torch._check(self.dtype in SUPPORTED, lambda: f"workbook_stable::add: `self` has dtype {self.dtype}")
    torch._check(other.dtype == self.dtype, lambda: f"workbook_stable::add: dtypes {other.dtype} and {self.dtype}")
    torch._check(other.shape == self.shape, lambda: f"workbook_stable::add: shapes {other.shape} and {self.shape}")
"""  # 08.stable_autograd's solution, as mistakes edit it
# 07.layer_cost's solution, likewise
LAYER_DIFFERENCES = ("    # Both sides in every round, one after the other: a slow moment of the machine hits both "
                     "alike.\n    differences = [time_with() - time_without() for _ in range(rounds)]\n")
LAYER_QUANTILES = '    q1, median, q3 = statistics.quantiles(differences, n=4, method="inclusive")\n'
LAYER_RETURN = ("    return (median, q1, q3) if q1 > 0 else None  # a cost only where the whole interquartile range is "
                "above zero\n")
# 08.load_before_aoti's solution, likewise
AOTI_IMPORT = "    import workbook_ops  # noqa: F401 - registers the operators the package calls by name\n"
AOTI_RUN = "    model = torch._inductor.aoti_load_package(model_pt2)\n    return model(x)\n"
VMAP_INPUTS = ('    xs, ys = (t.movedim(dim, 0) if dim is not None else t.expand(size, *t.shape) for t, dim in '
               'zip((x, y), in_dims))\n')  # 06.vmap_rule's solution, likewise
VMAP_RETURN = 'rowdot(xs.reshape(size * n, m), ys.reshape(size * n, m)).reshape(size, n), 0'

# 03.inplace_autograd's solution, as mistakes edit it: the call below autograd, mark_dirty, backward's gradients
ADD_REDISPATCH = ("        torch.ops.exercise.add_.default.redispatch(keyset & torch._C._after_autograd_keyset, x, "
                  "other)\n")
ADD_MARK_DIRTY = "        ctx.mark_dirty(x)  # autograd bumps x's version and moves x's history onto this node\n"
ADD_GRADIENTS = "        return None, grad, grad  # d(x + other) is grad for both\n"
SCALE2_REDISPATCH = ('        return op.redispatch(keyset & torch._C._after_autograd_keyset, x)  # the keys below '
                     'Autograd only\n')  # 04.redispatch's solution, likewise

# 05.autocast_guard's solution, likewise: the guard, the cast of one input, the call
SUM_SQUARES_GUARD = "  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);\n"
SUM_SQUARES_CAST = ("    return t.is_floating_point() && t.is_cpu() && t.scalar_type() != at::kDouble ? "
                    "t.to(at::kFloat) : t;\n")
SUM_SQUARES_CALL = "  return op.call(cast, scale ? std::optional<at::Tensor>(to_float32(*scale)) : std::nullopt);\n"


MISTAKES = [
    # 00.predict_path
    Mistake('00.predict_path', 'ad_inplace_or_view', 'ADInplaceOrView runs for every call',
            expect="your kernel 1, 'ADInplaceOrView'",
            edits=[('PATH = ["AutogradCPU", "CPU"]  # no_grad changes grad mode, not the keyset: torch\'s autograd fallback still runs\n',
             'PATH = ["ADInplaceOrView", "CPU"]\n')]),
    Mistake('00.predict_path', 'autocast_too', 'AutocastCPU, which the exclude set removes',
            expect="your kernel 1, 'AutocastCPU', is not the one the dispatcher calls there.\nLook again at lesson 00, "
                   "section 2: which keys the thread-local exclude set takes out of every call.",
            edits=[('PATH = ["AutogradCPU", "CPU"]  # no_grad changes grad mode, not the keyset: torch\'s autograd fallback still runs\n',
             'PATH = ["AutocastCPU", "AutogradCPU", "CPU"]\n')]),
    Mistake('00.predict_path', 'with_fallthroughs', 'the fallthrough keys listed as kernels',
            expect="your kernel 2, 'ADInplaceOrView', is not the one the dispatcher calls there.\nLook again at "
                   "lesson 00, sections 3 and 4: what the dispatcher does at a key whose entry is a fallthrough.",
            edits=[('PATH = ["AutogradCPU", "CPU"]  # no_grad changes grad mode, not the keyset: torch\'s autograd fallback still runs\n',
             'PATH = ["AutogradCPU", "ADInplaceOrView", "BackendSelect", "CPU"]\n')]),
    Mistake('00.predict_path', 'computed', "the path computed with the check's own tool instead of predicted",
            expect="PATH (line 15 of your file) must be written out as a list of dispatch key names",
            edits=[('PATH = ["AutogradCPU", "CPU"]  # no_grad changes grad mode, not the keyset: torch\'s autograd '
                    'fallback still runs\n',
                    'import torch\nfrom helpers import trace\n\nPATH = trace.path(trace.predict('
                    'torch.ops.workbook.add, torch.ones(3, requires_grad=True), torch.ones(3)))\n')]),
    Mistake('00.predict_path', 'one_string', 'the keys written as one string, not a list of them',
            expect="PATH (line 12 of your file) must be a list of dispatch key names",
            edits=[('PATH = ["AutogradCPU", "CPU"]  # no_grad changes grad mode, not the keyset: torch\'s autograd '
                    'fallback still runs\n', 'PATH = "AutogradCPU -> CPU"\n')]),
    # 00.walk
    Mistake('00.walk', 'first_kernel_only', 'stops at the first kernel, as if every kernel ended the call',
            expect='after your 1 kernel(s) the dispatcher calls more',
            edits=[('    path = []\n',
             ''),
            (('            path.append(name)\n'
              '            if is_backend(key):\n'
              '                break\n'),
             '            return [name]\n'),
            ('    return path\n',
             '    return []\n')]),
    Mistake('00.walk', 'no_fallthrough', 'a fallthrough entry counted as a kernel',
            expect="your kernel 2, 'ADInplaceOrView'",
            edits=[(('        row = next((line for line in table if line.startswith(f"{name}:")), "")\n'
              '        if row and "fallthrough" not in row:\n'),
             '        if any(line.startswith(f"{name}:") for line in table):\n')]),
    Mistake('00.walk', 'tensor_keys_only', "the tensors' keys alone, without the thread-local include and exclude sets",
            expect="aten::mm(a, b): your kernel 1, 'AutocastCPU'",
            edits=[('    keyset = (keyset | C._dispatch_tls_local_include_set()) - C._dispatch_tls_local_exclude_set()\n',
             '')]),
    Mistake('00.walk', 'no_include', 'the include set dropped: a TorchDispatchMode adds keys through it',
            expect="aten::mm(a, b) inside a TorchDispatchMode: your kernel 1, 'AutogradCPU'",
            edits=[(('    keyset = (keyset | C._dispatch_tls_local_include_set())'
               ' - C._dispatch_tls_local_exclude_set()\n'),
             '    keyset = keyset - C._dispatch_tls_local_exclude_set()\n')]),
    Mistake('00.walk', 'exclude_then_include', 'the exclude set taken away before the include set is added',
            expect="_AutoDispatchBelowADInplaceOrView(): your kernel 1, 'ADInplaceOrView'",
            edits=[(('    keyset = (keyset | C._dispatch_tls_local_include_set())'
               ' - C._dispatch_tls_local_exclude_set()\n'),
             ('    keyset = (keyset - C._dispatch_tls_local_exclude_set())'
              ' | C._dispatch_tls_local_include_set()\n'))]),
    Mistake('00.walk', 'handrolled_tls', 'the thread-local sets modelled by hand instead of read',
            expect="aten::mm(a, b) inside a TorchDispatchMode: your kernel 1, 'AutogradCPU'",
            edits=[(('    keyset = (keyset | C._dispatch_tls_local_include_set())'
               ' - C._dispatch_tls_local_exclude_set()\n'),
             ('    for name in ("BackendSelect", "ADInplaceOrView"):\n'
              '        keyset = keyset | C.DispatchKeySet(getattr(C.DispatchKey, name))\n'
              '    if not torch.is_autocast_enabled("cpu"):\n'
              '        keyset = keyset - C.DispatchKeySet(C.DispatchKey.AutocastCPU)\n'
              '    if torch.is_inference_mode_enabled():\n'
              '        for name in ("AutogradCPU", "AutogradMeta", "ADInplaceOrView"):\n'
              '            keyset = keyset - C.DispatchKeySet(getattr(C.DispatchKey, name))\n'))]),
    Mistake('00.walk', 'math_continues', 'a math kernel treated as a wrapper: the walk goes on below it',
            expect="aten::linear(a, w): the dispatcher stops before your kernel 2, 'CPU'",
            edits=[(('            if name in math_kernels:  # it calls other operators, each with a walk of its own\n'
              '                break\n'),
             '')]),
    Mistake('00.walk', 'missing_entry_skipped', 'a key with no entry skipped, as if it were a fallthrough',
            expect="workbook::add(dense, sparse): the dispatcher stops before your kernel 2, 'CPU'",
            edits=[(('        if name not in listed:  # no entry: the dispatcher raises "could not run" here\n'
              '            break\n'),
             '')]),
    Mistake('00.walk', 'first_tensor_only', "the first tensor's keys alone, not the union of every tensor's",
            expect="aten::add.Tensor(dense, sparse): your kernel 2, 'CPU'",
            edits=[(('    for arg in args:\n'
              '        for tensor in arg if isinstance(arg, (list, tuple)) else [arg]:'
              "  # a Tensor[] argument's tensors count too\n"
              '            if isinstance(tensor, torch.Tensor):\n'
              '                keyset = keyset | C._dispatch_keys(tensor)\n'),
             ('    tensors = [arg for arg in args if isinstance(arg, torch.Tensor)]\n'
              '    if tensors:\n'
              '        keyset = keyset | C._dispatch_keys(tensors[0])\n'))]),
    Mistake('00.walk', 'bare_tensors_only', 'bare Tensor arguments alone: a list of tensors brings no keys',
            expect="aten::cat([a, a]): a list of tensors: after your 0 kernel(s) the dispatcher calls more",
            edits=[(('    for arg in args:\n'
              '        for tensor in arg if isinstance(arg, (list, tuple)) else [arg]:'
              "  # a Tensor[] argument's tensors count too\n"
              '            if isinstance(tensor, torch.Tensor):\n'
              '                keyset = keyset | C._dispatch_keys(tensor)\n'),
             ('    for arg in args:\n'
              '        if isinstance(arg, torch.Tensor):\n'
              '            keyset = keyset | C._dispatch_keys(arg)\n'))]),
    # 01.alias_annotations
    Mistake('01.alias_annotations', 'view_unmarked', "the view's output not marked as sharing x's storage",
            expect="diag_sum: output 1 shares storage with `x`, and your schema does not say so",
            edits=[(ALIAS_DIAG, ALIAS_DIAG.replace("(Tensor(a) x) -> (Tensor(a), Tensor)",
                                                   "(Tensor x) -> (Tensor, Tensor)"))]),
    Mistake('01.alias_annotations', 'both_outputs_alias', 'the sum, a new tensor, put in the alias set of the view',
            expect="diag_sum: your schema says output 2 may share storage with `x`, and it never does",
            edits=[(ALIAS_DIAG, ALIAS_DIAG.replace("(Tensor(a), Tensor)", "(Tensor(a), Tensor(a))"))]),
    Mistake('01.alias_annotations', 'view_written', 'the view marked as a write of x, as an in-place operator',
            expect="diag_sum: your schema marks `x` written, and the kernel never writes it",
            edits=[(ALIAS_DIAG, ALIAS_DIAG.replace("(Tensor(a) x) -> (Tensor(a), Tensor)",
                                                   "(Tensor(a!) x) -> (Tensor(a!), Tensor)"))]),
    Mistake('01.alias_annotations', 'count_is_x', "shaped like add_: the count declared as x itself, tagged inplace",
            expect="clamp_count_: your schema says output 1 may share storage with `x`, and it never does",
            edits=[(ALIAS_CLAMP, ALIAS_CLAMP.replace("-> Tensor", "-> Tensor(a!)")),
                   (ALIAS_TAGS, ALIAS_TAGS.replace('"clamp_count_": []', '"clamp_count_": [torch.Tag.inplace]'))]),
    Mistake('01.alias_annotations', 'write_unmarked', 'x written in place, and the schema does not say so',
            expect="clamp_count_: the kernel writes `x`, and your schema does not mark it written",
            edits=[(ALIAS_CLAMP, ALIAS_CLAMP.replace("Tensor(a!) x", "Tensor x"))]),
    Mistake('01.alias_annotations', 'inplace_tag_on_count', 'tagged inplace, though it returns a new tensor',
            expect="clamp_count_: torch refuses the definition: Schema tagged with torch.Tag.inplace must return",
            edits=[(ALIAS_TAGS, ALIAS_TAGS.replace('"clamp_count_": []', '"clamp_count_": [torch.Tag.inplace]'))]),
    Mistake('01.alias_annotations', 'one_alias_set', 'min and max in one alias set, as if they could be one tensor',
            expect="minmax_out: your schema says output 1 may share storage with `max`, and it never does",
            edits=[(ALIAS_MINMAX, ALIAS_MINMAX.replace("(b!)", "(a!)"))]),
    Mistake('01.alias_annotations', 'no_out_tag', 'the buffers returned without the out tag',
            expect="minmax_out: it returns arguments it writes, and no tag says which kind of mutation that is",
            edits=[(ALIAS_TAGS, ALIAS_TAGS.replace("[torch.Tag.out]", "[]"))]),
    Mistake('01.alias_annotations', 'returns_nothing', 'the out= operator declared to return nothing',
            expect="minmax_out: the kernel returns 2 tensor(s); your schema declares none",
            edits=[(ALIAS_MINMAX, ALIAS_MINMAX.replace("-> (Tensor(a!), Tensor(b!))", "-> ()")),
                   (ALIAS_TAGS, ALIAS_TAGS.replace("[torch.Tag.out]", "[]"))]),
    Mistake('01.alias_annotations', 'view_tag', 'the view tagged inplace_view, as if it changed x\'s metadata',
            expect="diag_sum: tagged inplace_view, a kind of mutation its kernel does not do",
            edits=[(ALIAS_TAGS, ALIAS_TAGS.replace('"diag_sum": []', '"diag_sum": [torch.Tag.inplace_view]'))]),
    # 01.schema
    Mistake('01.schema', 'limit_positional', 'limit can be passed by position',
            expect='can only be passed by keyword',
            edits=[('SCHEMA = "scale_(Tensor(a!) x, float factor=2.0, *, float? limit=None) -> ()"\n',
             'SCHEMA = "scale_(Tensor(a!) x, float factor=2.0, float? limit=None) -> ()"\n')]),
    Mistake('01.schema', 'not_written', 'x is written in place, and the schema does not say so',
            expect='is written to, and your schema does not say so',
            edits=[('SCHEMA = "scale_(Tensor(a!) x, float factor=2.0, *, float? limit=None) -> ()"\n',
             'SCHEMA = "scale_(Tensor x, float factor=2.0, *, float? limit=None) -> ()"\n')]),
    Mistake('01.schema', 'reordered', 'factor before x',
            expect='Non-default positional argument follows default argument',
            edits=[('SCHEMA = "scale_(Tensor(a!) x, float factor=2.0, *, float? limit=None) -> ()"\n',
             'SCHEMA = "scale_(float factor=2.0, Tensor(a!) x, *, float? limit=None) -> ()"\n')]),
    Mistake('01.schema', 'returns_x', "returns the tensor, which the task's operator does not",
            expect='returns nothing',
            edits=[('SCHEMA = "scale_(Tensor(a!) x, float factor=2.0, *, float? limit=None) -> ()"\n',
             'SCHEMA = "scale_(Tensor(a!) x, float factor=2.0, *, float? limit=None) -> Tensor(a!)"\n')]),
    Mistake('01.schema', 'limit_inf', 'limit a plain float whose default is inf, which a schema cannot spell',
            expect="torch cannot parse it:\ninvalid numeric default value:\nscale_(",
            edits=[('SCHEMA = "scale_(Tensor(a!) x, float factor=2.0, *, float? limit=None) -> ()"\n',
                    'SCHEMA = "scale_(Tensor(a!) x, float factor=2.0, *, float limit=inf) -> ()"\n')]),
    Mistake('01.schema', 'no_name', "the schema without the operator's name, as torch.library.define's second argument",
            expect="your schema has no name",
            edits=[('SCHEMA = "scale_(Tensor(a!) x, float factor=2.0, *, float? limit=None) -> ()"\n',
                    'SCHEMA = "(Tensor(a!) x, float factor=2.0, *, float? limit=None) -> ()"\n')]),
    # 02.composite_key
    Mistake('02.composite_key', 'autograd_alias', 'the Autograd alias: autograd keys only, so nothing is left when inference_mode excludes them',
            expect='inside torch.inference_mode()',
            edits=[('KEY = "CompositeImplicitAutograd"  # every backend key and every Autograd key\n',
             'KEY = "Autograd"\n')]),
    Mistake('02.composite_key', 'autograd_cpu', "AutogradCPU: one backend's autograd key",
            expect='meta tensors',
            edits=[('KEY = "CompositeImplicitAutograd"  # every backend key and every Autograd key\n',
             'KEY = "AutogradCPU"\n')]),
    Mistake('02.composite_key', 'explicit', 'CompositeExplicitAutograd: every backend, but autograd sees the operator, not its insides',
            expect="torch's autograd fallback",
            edits=[('KEY = "CompositeImplicitAutograd"  # every backend key and every Autograd key\n',
             'KEY = "CompositeExplicitAutograd"\n')]),
    Mistake('02.composite_key', 'no_key', "no key named: Library.impl's default, which the reader cannot name",
            expect="KEY '' names no dispatch key",
            edits=[('KEY = "CompositeImplicitAutograd"  # every backend key and every Autograd key\n', 'KEY = ""\n')]),
    Mistake('02.composite_key', 'unknown_key', "Math, CompositeImplicitAutograd's name in old releases of torch",
            expect="torch knows no dispatch key named 'Math'",
            edits=[('KEY = "CompositeImplicitAutograd"  # every backend key and every Autograd key\n',
                    'KEY = "Math"\n')]),
    Mistake('02.composite_key', 'float32_kernel', 'the kernel computes in float32, whatever the input',
            expect="float64 CPU tensors: the output is torch.float32",
            edits=[("    return torch.log1p(torch.exp(2 * x)) / 2\n",
                    "    return torch.log1p(torch.exp(2 * x.float())) / 2\n")]),
    Mistake('02.composite_key', 'flat_view', "the kernel flattens with view(), which a transposed input refuses",
            expect="a transposed CPU tensor: RuntimeError: view size is not compatible",
            edits=[("    return torch.log1p(torch.exp(2 * x)) / 2\n",
                    "    flat = x.view(-1)\n    return (torch.log1p(torch.exp(2 * flat)) / 2).view(x.shape)\n")]),
    # 02.meta_kernel
    Mistake('02.meta_kernel', 'swapped', "b's sizes before a's",
            expect="on meta tensors [4] float32 and [3] float32 your kernel returns shape [3, 4]",
            edits=[(OUTER_SIZES, "  std::vector<c10::SymInt> sizes(b.sym_sizes().begin(), b.sym_sizes().end());\n"
                                 "  sizes.insert(sizes.end(), a.sym_sizes().begin(), a.sym_sizes().end());\n")]),
    Mistake('02.meta_kernel', 'dtype_of_a', "a's dtype, where the CPU kernel promotes",
            expect="on meta tensors [3] float32 and [4] float64 your kernel returns torch.float32",
            edits=[(OUTER_RETURN, OUTER_RETURN.replace(".dtype(at::result_type(a, b))", ""))]),
    Mistake('02.meta_kernel', 'promote_types', "promoteTypes of the two dtypes: a 0-d tensor's weighs less in a * b",
            expect="on meta tensors [] float64 and [3] float32 your kernel returns torch.float64",
            edits=[(OUTER_RETURN, OUTER_RETURN.replace("at::result_type(a, b)",
                                                       "c10::promoteTypes(a.scalar_type(), b.scalar_type())"))]),
    Mistake('02.meta_kernel', 'column_major', 'the right shape laid out column-major (the CPU kernel: row-major)',
            expect="your kernel returns strides [1, 4]; the CPU kernel [3, 1]",
            edits=[(OUTER_RETURN,
                    "  std::vector<c10::SymInt> reversed(sizes.rbegin(), sizes.rend());\n"
                    "  std::vector<int64_t> order;\n"
                    "  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) order.push_back(d);\n"
                    "  const auto options = a.options().dtype(at::result_type(a, b));\n"
                    "  return at::empty_symint(reversed, options).permute(order);\n")]),
    Mistake('02.meta_kernel', 'expanded_input', "a view of `a` expanded to the output's shape: no new tensor",
            expect="your kernel returns a view of an input, sharing its storage",
            edits=[(OUTER_RETURN,
                    "  std::vector<c10::SymInt> a_shape(a.sym_sizes().begin(), a.sym_sizes().end());\n"
                    "  a_shape.resize(sizes.size(), 1);\n"
                    "  return a.view_symint(a_shape).expand_symint(sizes);\n")]),
    Mistake('02.meta_kernel', 'cpu_device', "options without a's device: a CPU tensor for meta inputs",
            expect="your kernel returns a tensor on cpu, not on the inputs' device (meta)",
            edits=[(OUTER_RETURN, OUTER_RETURN.replace("a.options().dtype(", "at::TensorOptions().dtype("))]),
    Mistake('02.meta_kernel', 'no_checks', "the CPU kernel's checks left out: a call it refuses traces",
            expect="and the CPU kernel refuses them (exercise02::outer: float32 or float64 tensors only",
            edits=[("  check_inputs(a, b);\n  // a's sizes", "  // a's sizes")]),
    Mistake('02.meta_kernel', 'int_sizes', 'sizes() where sizes are symbols: the compiled graph specializes',
            expect='compiled 3 times for 3 sizes',
            edits=[(OUTER_SIZES, OUTER_SIZES.replace("c10::SymInt", "int64_t").replace("sym_sizes", "sizes")),
                   (OUTER_RETURN, OUTER_RETURN.replace("empty_symint", "empty"))]),
    Mistake('02.meta_kernel', 'concrete_sizes', 'each size read with size(d), a plain number where sizes are symbols',
            expect='compiled 3 times for 3 sizes',
            edits=[(OUTER_SIZES, "  std::vector<int64_t> sizes;\n"
                                 "  for (int64_t d = 0; d < a.dim(); ++d) sizes.push_back(a.size(d));\n"
                                 "  for (int64_t d = 0; d < b.dim(); ++d) sizes.push_back(b.size(d));\n"),
                   (OUTER_RETURN, OUTER_RETURN.replace("empty_symint", "empty"))]),
    Mistake('02.meta_kernel', 'expect_int', 'each SymInt unpacked to an int: fine on meta tensors, an error on symbols',
            expect="your Meta kernel failed: RuntimeError: when unpacking SymInt, expected int but got s",
            edits=[(OUTER_SIZES, "  std::vector<int64_t> sizes;\n"
                                 "  for (const c10::SymInt& s : a.sym_sizes()) sizes.push_back(s.expect_int());\n"
                                 "  for (const c10::SymInt& s : b.sym_sizes()) sizes.push_back(s.expect_int());\n"),
                   (OUTER_RETURN, OUTER_RETURN.replace("empty_symint", "empty"))]),
    # 03.fallthrough
    Mistake('03.fallthrough', 'ad_inplace_or_view', 'ADInplaceOrView, a fallthrough already',
            expect="at AutogradCPU, torch's autograd fallback still runs",
            edits=[('    lib.impl("count_odd", torch.library.fallthrough_kernel, "Autograd")\n',
             '    lib.impl("count_odd", torch.library.fallthrough_kernel, "ADInplaceOrView")\n')]),
    Mistake('03.fallthrough', 'backend_key', 'the fallthrough at CPU, which replaces the CPU kernel',
            expect='count_odd no longer runs on cpu',
            edits=[('    lib.impl("count_odd", torch.library.fallthrough_kernel, "Autograd")\n',
             '    lib.impl("count_odd", torch.library.fallthrough_kernel, "CPU")\n')]),
    Mistake('03.fallthrough', 'cpu_only', 'AutogradCPU: the Autograd key of one backend',
            expect="at AutogradMeta, torch's autograd fallback still runs",
            edits=[('    lib.impl("count_odd", torch.library.fallthrough_kernel, "Autograd")\n',
             '    lib.impl("count_odd", torch.library.fallthrough_kernel, "AutogradCPU")\n')]),
    Mistake('03.fallthrough', 'cpu_and_meta', 'AutogradCPU and AutogradMeta only: the other backends keep the fallback',
            expect="for other backends' tensors autograd is not skipped, at AutogradOther, AutogradNestedTensor, "
                   "AutogradCUDA",
            edits=[('    lib.impl("count_odd", torch.library.fallthrough_kernel, "Autograd")\n',
                    '    for key in ("AutogradCPU", "AutogradMeta"):\n'
                    '        lib.impl("count_odd", torch.library.fallthrough_kernel, key)\n')]),
    Mistake('03.fallthrough', 'composite_implicit', 'the fallthrough at CompositeImplicitAutograd: backends without a '
            'kernel lose theirs, CPU and meta keep the fallback',
            expect="your registration changed count_odd's entries at keys outside autograd",
            edits=[('    lib.impl("count_odd", torch.library.fallthrough_kernel, "Autograd")\n',
                    '    lib.impl("count_odd", torch.library.fallthrough_kernel, "CompositeImplicitAutograd")\n')]),
    Mistake('03.fallthrough', 'redispatching_kernel', 'a kernel at Autograd that hands the call on: still called',
            expect="at AutogradCPU, a kernel of yours runs on every call",
            edits=[('    lib.impl("count_odd", torch.library.fallthrough_kernel, "Autograd")\n',
                    '    op = torch.ops.exercise.count_odd.default\n'
                    '    below = torch._C._after_autograd_keyset\n'
                    '    lib.impl("count_odd", lambda keyset, x: op.redispatch(keyset & below, x), "Autograd", '
                    'with_keyset=True)\n')]),
    Mistake('03.fallthrough', 'tensor_keyset', "a kernel that hands the call on with the tensor's own keys",
            expect='on a cpu tensor, torch stopped at an internal check of its own',
            edits=[('    lib.impl("count_odd", torch.library.fallthrough_kernel, "Autograd")\n',
                    '    op = torch.ops.exercise.count_odd.default\n'
                    '    below = torch._C._after_autograd_keyset\n'
                    '    lib.impl("count_odd", lambda keyset, x: op.redispatch(torch._C._dispatch_keys(x) & below, '
                    'x),\n             "Autograd", with_keyset=True)\n')]),
    Mistake('03.fallthrough', 'own_library', "the fallthrough on a Library of the file's own, not on lib",
            expect="your fallthrough outlives the Library you were given",
            edits=[('    lib.impl("count_odd", torch.library.fallthrough_kernel, "Autograd")\n',
                    '    global own\n'
                    '    own = torch.library.Library("exercise", "FRAGMENT")\n'
                    '    own.impl("count_odd", torch.library.fallthrough_kernel, "Autograd")\n')]),
    Mistake('03.fallthrough', 'fallback_mode_left', 'the fallthrough, and the autograd fallback silenced for all',
            expect="register changed torch's autograd fallback mode from 'warn' to 'nothing'",
            edits=[('    lib.impl("count_odd", torch.library.fallthrough_kernel, "Autograd")\n',
                    '    torch._C._set_autograd_fallback_mode("nothing")\n'
                    '    lib.impl("count_odd", torch.library.fallthrough_kernel, "Autograd")\n')]),
    # 03.inplace_autograd
    Mistake('03.inplace_autograd', 'calls_itself', 'forward calls the operator from the top, back into this kernel',
            expect='RecursionError',
            edits=[(('        # The call below autograd: the keys after Autograd (ADInplaceOrView, then the backend) '
                     'run, ours does not.\n'),
                    ''),
                   (ADD_REDISPATCH, '        torch.ops.exercise.add_.default(x, other)\n')]),
    Mistake('03.inplace_autograd', 'no_mark_dirty', 'x returned as it is, without telling autograd it was modified',
            expect='unless it was told that forward modified it',
            edits=[(ADD_MARK_DIRTY, '')]),
    Mistake('03.inplace_autograd', 'other_forgotten', 'no gradient for other',
            expect='d/dother: None',
            edits=[(ADD_GRADIENTS, '        return None, grad, None\n')]),
    Mistake('03.inplace_autograd', 'dirty_only_if_requires_grad', 'mark_dirty only when x itself requires grad',
            expect='add_(t, w), t not requiring grad and w requiring it, returned a new tensor',
            edits=[(ADD_MARK_DIRTY, ('        if x.requires_grad:\n'
                                     '            ctx.mark_dirty(x)\n'))]),
    Mistake('03.inplace_autograd', 'needs_input_grad_off_by_one', "other's gradient gated on x's needs_input_grad",
            expect='d/dw: None',
            edits=[(ADD_GRADIENTS, '        return None, grad, (grad if ctx.needs_input_grad[1] else None)\n')]),
    Mistake('03.inplace_autograd', 'leaked_exclude', 'ADInplaceOrView put in the thread-local exclude set for good',
            expect='the thread-local exclude set had changed (gained ADInplaceOrView)',
            edits=[(ADD_REDISPATCH, ('        view = torch._C.DispatchKey.ADInplaceOrView\n'
                                     '        torch._C._dispatch_tls_set_dispatch_key_excluded(view, True)\n'
                                     + ADD_REDISPATCH))]),
    Mistake('03.inplace_autograd', 'aten_add', "aten's add_, not the operator's own kernels below autograd",
            expect="exercise::add_'s CPU kernel did not run",
            edits=[(ADD_REDISPATCH, ('        with torch.no_grad():\n'
                                     '            x.add_(other)\n'))]),
    Mistake('03.inplace_autograd', 'keyset_cpu', 'redispatched to the CPU key alone, whatever the call',
            expect="exercise::add_'s ADInplaceOrView kernel did not run",
            edits=[(ADD_REDISPATCH, ('        cpu = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)\n'
                                     '        torch.ops.exercise.add_.default.redispatch(cpu, x, other)\n'))]),
    Mistake('03.inplace_autograd', 'skip_ad_inplace_or_view', 'masked past ADInplaceOrView, whose kernel never runs',
            expect="exercise::add_'s ADInplaceOrView kernel did not run",
            edits=[(ADD_REDISPATCH, ('        below = keyset & torch._C._after_ADInplaceOrView_keyset\n'
                                     '        torch.ops.exercise.add_.default.redispatch(below, x, other)\n'))]),
    Mistake('03.inplace_autograd', 'guard_and_call', "csrc's AddInPlace copied: a guard and a call from the top, "
            'which skip ADInplaceOrView', expect="exercise::add_'s ADInplaceOrView kernel did not run",
            edits=[(ADD_REDISPATCH, ('        with torch._C._AutoDispatchBelowADInplaceOrView():\n'
                                     '            torch.ops.exercise.add_.default(x, other)\n'))]),
    Mistake('03.inplace_autograd', 'keyset_by_hand', "a keyset of its own, not the call's: meta tensors reach CPU",
            expect="on meta tensors the kernels below autograd that ran were ['ADInplaceOrView', 'CPU']",
            edits=[(ADD_REDISPATCH, ('        keys = [torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, k))'
                                     ' for k in ("ADInplaceOrView", "CPU")]\n'
                                     '        torch.ops.exercise.add_.default.redispatch(keys[0] | keys[1], x, '
                                     'other)\n'))]),
    Mistake('03.inplace_autograd', 'tensor_keyset', "the tensor's own keys handed on: AutocastCPU, a fallthrough, "
            'first', expect='torch stopped at an internal check of its own',
            edits=[(ADD_REDISPATCH,
                    '        torch.ops.exercise.add_.default.redispatch(torch._C._dispatch_keys(x), x, other)\n')]),
    Mistake('03.inplace_autograd', 'tensor_keys_masked', "the tensor's own keys, masked: the keys the thread-local "
            'include set adds are lost', expect='inside a TorchDispatchMode the mode never saw add_',
            edits=[(ADD_REDISPATCH, ('        below = torch._C._dispatch_keys(x) & torch._C._after_autograd_keyset\n'
                                     '        torch.ops.exercise.add_.default.redispatch(below, x, other)\n'))]),
    Mistake('03.inplace_autograd', 'mask_alone', "the mask alone handed on, not the call's keyset: PythonDispatcher "
            'first', expect='torch stopped at an internal check of its own',
            edits=[(ADD_REDISPATCH, ('        below = torch._C._after_autograd_keyset\n'
                                     '        torch.ops.exercise.add_.default.redispatch(below, x, other)\n'))]),
    # 04.backward
    Mistake('04.backward', 'ignores_grad', "the derivative alone, not multiplied by the output's gradient",
            expect="Right when the output's gradient is all ones",
            edits=[('    return grad * 3 * x * x\n',
             '    return 3 * x * x\n')]),
    Mistake('04.backward', 'nothing_saved', 'setup_context saves nothing, and backward reads what it did not save',
            expect='your code raised ValueError',
            edits=[(('    (x,) = inputs\n'
              '    ctx.save_for_backward(x)\n'),
             '    pass\n')]),
    Mistake('04.backward', 'wrong_derivative', 'the derivative of x ** 2',
            expect='d/dx at [0.5, -1.0, 2.0]',
            edits=[('    return grad * 3 * x * x\n',
             '    return grad * 2 * x\n')]),
    Mistake('04.backward', 'through_the_output', 'the derivative from the saved output, 3 * out / x: nan at x = 0',
            expect='float64, zeros: d/dx at [0.0, 3.0, -0.0, -0.25] for the output gradient [1.0, 1.0, -2.0, 4.0]: '
                   'yours [nan',
            edits=[('    ctx.save_for_backward(x)\n', '    ctx.save_for_backward(x, output)\n'),
                   (('    (x,) = ctx.saved_tensors\n'
                     '    return grad * 3 * x * x\n'),
                    ('    x, out = ctx.saved_tensors\n'
                     '    return grad * 3 * out / x\n'))]),
    Mistake('04.backward', 'output_but_zero_guarded', '3 * out / x, with 0 where x is 0: x ** 3 under- and overflows',
            expect='float64, the ends of its range: d/dx at [1e-110, -1e+105, 3.0]',
            edits=[('def setup_context(ctx, inputs, output):\n',
                    'import torch\n\n\ndef setup_context(ctx, inputs, output):\n'),
                   ('    ctx.save_for_backward(x)\n', '    ctx.save_for_backward(x, output)\n'),
                   (('    (x,) = ctx.saved_tensors\n'
                     '    return grad * 3 * x * x\n'),
                    ('    x, out = ctx.saved_tensors\n'
                     '    return torch.where(x == 0, 0.0, grad * 3 * out / x)\n'))]),
    Mistake('04.backward', 'writes_into_grad', "the output's gradient multiplied in place: autograd's tensor, changed",
            expect='your backward wrote into the gradient it received (the output\'s gradient [1.0, -2.0, 0.5] became',
            edits=[('    return grad * 3 * x * x\n', '    return grad.mul_(3 * x * x)\n')]),
    Mistake('04.backward', 'writes_into_x', 'x squared in place: the caller\'s x changes',
            expect='your backward changed x itself',
            edits=[('    return grad * 3 * x * x\n', '    return grad * 3 * x.mul_(x)\n')]),
    Mistake('04.backward', 'detached', 'the derivative computed from x.detach(): no history for double backward',
            expect='the gradient your backward returned has no history',
            edits=[('    return grad * 3 * x * x\n', '    return grad * 3 * x.detach() ** 2\n')]),
    Mistake('04.backward', 'through_numpy', 'the derivative computed in numpy: CPU only, and outside autograd',
            expect='on meta tensors your backward raised TypeError',
            edits=[('    return grad * 3 * x * x\n',
                    ('    import numpy\n\n'
                     '    return grad * torch.from_numpy(3 * numpy.square(x.detach().numpy()))\n')),
                   ('def setup_context(ctx, inputs, output):\n',
                    'import torch\n\n\ndef setup_context(ctx, inputs, output):\n')]),
    Mistake('04.backward', 'kept_as_attribute', 'x kept as an attribute of ctx, not saved: a later change goes unseen',
            expect='computed from the new x, with no error',
            edits=[('    ctx.save_for_backward(x)\n', '    ctx.x = x\n'),
                   ('    (x,) = ctx.saved_tensors\n', '    x = ctx.x\n')]),
    Mistake('04.backward', 'in_float32', "the derivative computed in float32 whatever x's dtype",
            expect="the precision of float32, not of x's float64",
            edits=[('    return grad * 3 * x * x\n',
                    '    return (grad.float() * 3 * x.float() * x.float()).to(x.dtype)\n')]),
    Mistake('04.backward', 'through_log', 'x ** 2 as exp(2 log |x|): right at 0, but its own derivative there is nan',
            expect="your backward's own derivative is not finite where x is 0",
            edits=[('    return grad * 3 * x * x\n', '    return grad * 3 * torch.exp(2 * torch.log(x.abs()))\n'),
                   ('def setup_context(ctx, inputs, output):\n',
                    'import torch\n\n\ndef setup_context(ctx, inputs, output):\n')]),
    Mistake('04.backward', 'square_cached', 'x * x kept on x itself for later calls: stale once x is changed in place',
            expect='then a fresh forward and backward on it',
            edits=[('    return grad * 3 * x * x\n',
                    '    return grad * 3 * x.__dict__.setdefault("square", x * x)\n')]),
    # 04.redispatch
    Mistake('04.redispatch', 'cpu_only', "a redispatch straight to CPU, whatever the tensor's device",
            expect='on a meta tensor',
            edits=[(SCALE2_REDISPATCH, ('        cpu = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)\n'
                                        '        return op.redispatch(cpu, x)\n'))]),
    Mistake('04.redispatch', 'no_grad', 'torch.no_grad() around the call, which changes grad mode, not the keyset',
            expect='torch.no_grad() turns off recording, not the Autograd key',
            edits=[(SCALE2_REDISPATCH, ('        with torch.no_grad():\n'
                                        '            return op(x)\n'))]),
    Mistake('04.redispatch', 'whole_keyset', "a redispatch with the call's whole keyset, Autograd included",
            expect='RecursionError',
            edits=[(SCALE2_REDISPATCH, '        return op.redispatch(keyset, x)\n')]),
    Mistake('04.redispatch', 'tensor_keyset', "the tensor's own keys, masked: ADInplaceOrView, a fallthrough, first",
            expect='on a CPU tensor that requires grad: torch stopped at an internal check of its own',
            edits=[(SCALE2_REDISPATCH, ('        below = torch._C._after_autograd_keyset\n'
                                        '        return op.redispatch(torch._C._dispatch_keys(x) & below, x)\n'))]),
    Mistake('04.redispatch', 'tensor_keyset_below_view', "the tensor's own keys below ADInplaceOrView: the keys the "
            "thread-local include set adds are lost", expect='inside a TorchDispatchMode the mode never saw scale2',
            edits=[(SCALE2_REDISPATCH, ('        below = torch._C._after_ADInplaceOrView_keyset\n'
                                        '        return op.redispatch(torch._C._dispatch_keys(x) & below, x)\n'))]),
    Mistake('04.redispatch', 'backend_by_device', "the backend key picked from the device: a sparse CPU tensor's is "
            "SparseCPU", expect="on a sparse CPU tensor your call ran scale2's CPU kernel below autograd",
            edits=[(SCALE2_REDISPATCH, ('        keys = torch._C.DispatchKey\n'
                                        '        key = keys.CPU if x.is_cpu else keys.Meta\n'
                                        '        return op.redispatch(torch._C.DispatchKeySet(key), x)\n'))]),
    Mistake('04.redispatch', 'leaked_exclude', 'the Autograd keys put in the thread-local exclude set for good',
            expect='the thread-local exclude set had changed (gained AutogradCPU',
            edits=[(SCALE2_REDISPATCH, ('        keys = torch._C.DispatchKey\n'
                                        '        for key in (keys.AutogradCPU, keys.AutogradMeta):\n'
                                        '            torch._C._dispatch_tls_set_dispatch_key_excluded(key, True)\n'
                                        '        return op(x)\n'))]),
    Mistake('04.redispatch', 'leaked_functionality_exclude', "every backend's Autograd keys excluded for good",
            expect="the thread-local exclude set had changed (gained AutogradFunctionality (every backend's))",
            edits=[(SCALE2_REDISPATCH, ('        autograd = torch._C.DispatchKey.AutogradFunctionality\n'
                                        '        torch._C._dispatch_tls_set_dispatch_key_excluded(autograd, True)\n'
                                        '        return op(x)\n'))]),
    Mistake('04.redispatch', 'twice', 'the call below autograd made twice, the first result dropped',
            expect="your call ran scale2's CPU kernel, then its CPU kernel below autograd, not its CPU kernel once",
            edits=[(SCALE2_REDISPATCH, ('        below = keyset & torch._C._after_autograd_keyset\n'
                                        '        op.redispatch(below, x)\n'
                                        '        return op.redispatch(below, x)\n'))]),
    Mistake('04.redispatch', 'computes_itself', "the result computed in forward, past the operator's kernels",
            expect="none of scale2's kernels below autograd ran",
            edits=[(SCALE2_REDISPATCH, '        return 2 * x\n')]),
    Mistake('04.redispatch', 'autograd_cpu_removed', "AutogradCPU removed from the keyset: a nested tensor's key stays",
            expect="this tensor's Autograd key is AutogradNestedTensor",
            edits=[(SCALE2_REDISPATCH,
                    '        return op.redispatch(keyset.remove(torch._C.DispatchKey.AutogradCPU), x)\n')]),
    Mistake('04.redispatch', 'after_autograd_cpu', "the keys after AutogradCPU: AutogradOther, below it, stays",
            expect="this tensor's Autograd key is AutogradOther",
            edits=[(SCALE2_REDISPATCH,
                    '        below = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.AutogradCPU)\n'
                    '        return op.redispatch(keyset & below, x)\n')]),
    Mistake('04.redispatch', 'modes_disabled', "the right keyset, handed on with torch's Python dispatch turned off",
            expect='your guard turned the Python dispatch keys off for the call',
            edits=[(SCALE2_REDISPATCH,
                    '        with torch._C._DisableTorchDispatch():\n'
                    '    ' + SCALE2_REDISPATCH)]),
    # 05.autocast_guard
    Mistake('05.autocast_guard', 'autocast_alias', 'the guard excludes DispatchKey::Autocast, which in C++ means '
            'AutocastCUDA', expect='AutocastCUDA',
            edits=[(SUM_SQUARES_GUARD, SUM_SQUARES_GUARD.replace('AutocastCPU', 'Autocast'))]),
    Mistake('05.autocast_guard', 'temporary_guard', 'a guard with no name: a temporary, gone before the call',
            expect='Your guard is a temporary',
            edits=[(SUM_SQUARES_GUARD, '  c10::impl::ExcludeDispatchKeyGuard(c10::DispatchKey::AutocastCPU);\n')]),
    Mistake('05.autocast_guard', 'guard_in_a_block', 'a guard in a block of its own, gone before the call',
            expect='A stack overflow: your AutocastCPU kernel calls the operator again',
            edits=[(SUM_SQUARES_GUARD, '  {\n  ' + SUM_SQUARES_GUARD + '  }\n')]),
    Mistake('05.autocast_guard', 'leaked_exclude', 'AutocastCPU put in the thread-local exclude set, never taken out',
            expect='inside autocast, xs in float32, bfloat16 and float16, no scale: after a call of sum_squares the '
                   'thread-local exclude set had changed (gained AutocastCPU)',
            edits=[(SUM_SQUARES_GUARD,
                    '  c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::AutocastCPU, true);\n')]),
    Mistake('05.autocast_guard', 'excluded_by_hand', 'AutocastCPU excluded by hand and put back by hand, not by a '
            'guard: an error in between leaves it excluded', expect='a call the CPU kernel refuses (xs of shapes [4] '
            'and [3]), its error raised through your kernel',
            edits=[(SUM_SQUARES_GUARD,
                    '  c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::AutocastCPU, true);\n'),
                   (SUM_SQUARES_CALL,
                    '  at::Tensor out = op.call(cast, scale ? std::optional<at::Tensor>(to_float32(*scale)) : '
                    'std::nullopt);\n'
                    '  c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::AutocastCPU, false);\n'
                    '  return out;\n')]),
    Mistake('05.autocast_guard', 'detached_cast', 'each input detached, then cast: the casts are cut off the graph',
            expect="the tensors your kernel handed on were cut off xs' graph",
            edits=[(SUM_SQUARES_CAST, SUM_SQUARES_CAST.replace("t.to(at::kFloat)", "t.detach().to(at::kFloat)"))]),
    Mistake('05.autocast_guard', 'static_guard', 'a static guard: built on the first call, never destroyed',
            expect='the thread-local exclude set had changed (gained AutocastCPU)',
            edits=[(SUM_SQUARES_GUARD, '  static' + SUM_SQUARES_GUARD[1:])]),
    Mistake('05.autocast_guard', 'skips_the_dispatcher', 'the CPU kernel called directly, past every layer below '
            'autocast', expect='the call skipped autograd',
            edits=[(SUM_SQUARES_CALL, '  (void)op;\n' + SUM_SQUARES_CALL.replace('op.call(', 'sum_squares_cpu('))]),
    Mistake('05.autocast_guard', 'casts_the_result', 'the call made on the inputs as they are, its result cast',
            expect='the layers below autocast received xs in float32, bfloat16, float16',
            edits=[(SUM_SQUARES_CALL, ('  (void)to_float32;\n'
                                       '  return op.call(xs, scale).to(at::kFloat);\n'))]),
    Mistake('05.autocast_guard', 'scale_as_it_is', 'the tensors of xs cast, the optional scale handed on as it is',
            expect='the layers below autocast received xs in float32, float32 and scale in bfloat16',
            edits=[(SUM_SQUARES_CALL, '  return op.call(cast, scale);\n')]),
    Mistake('05.autocast_guard', 'lower_precision', "matmul's policy: eligible inputs cast to bfloat16",
            expect="the region's lower precision, matmul's policy; this operator's is float32",
            edits=[(SUM_SQUARES_CAST, SUM_SQUARES_CAST.replace('at::kFloat', 'at::kBFloat16'))]),
    Mistake('05.autocast_guard', 'widest_type', "add's policy: every input cast to the widest of their dtypes",
            expect='xs and scale in bfloat16: given xs in bfloat16, bfloat16 and scale in bfloat16, the layers below '
                   'autocast received xs in bfloat16, bfloat16 and scale in bfloat16: nothing was cast',
            edits=[(SUM_SQUARES_CAST, '    return t;\n'),
                   (SUM_SQUARES_CALL, ('  at::ScalarType widest = xs[0].scalar_type();\n'
                                       '  for (const at::Tensor& x : xs) widest = c10::promoteTypes(widest, '
                                       'x.scalar_type());\n'
                                       '  if (scale) widest = c10::promoteTypes(widest, scale->scalar_type());\n'
                                       '  for (at::Tensor& x : cast) x = x.to(widest);\n'
                                       '  return op.call(cast, scale ? std::optional<at::Tensor>(scale->to(widest)) : '
                                       'std::nullopt);\n'))]),
    Mistake('05.autocast_guard', 'casts_float64', 'every input cast to float32, float64 too',
            expect='autocast casts only eligible inputs: floating point, on the region\'s device, and not float64',
            edits=[(SUM_SQUARES_CAST, '    return t.to(at::kFloat);\n')]),
    # 05.register_autocast
    Mistake('05.register_autocast', 'cuda', "registered for CUDA's autocast",
            expect='Nothing cast the inputs',
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
             '    torch.library.register_autocast("exercise::mm2", "cuda", torch.float16, lib=lib)\n')]),
    Mistake('05.register_autocast', 'float32', 'everything cast to float32',
            expect='returned torch.float32',
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
             '    torch.library.register_autocast("exercise::mm2", "cpu", torch.float32, lib=lib)\n')]),
    Mistake('05.register_autocast', 'no_lib', 'registered without lib=',
            expect='outlives the Library you were given',
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
             '    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16)\n')]),
    Mistake('05.register_autocast', 'calls_itself', 'a kernel of its own at AutocastCPU that calls mm2 again, '
            'AutocastCPU still on', expect='raised RecursionError: your AutocastCPU kernel calls mm2 again',
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
                    ('    def autocast_kernel(a, b):\n'
                     '        return torch.ops.exercise.mm2(a.to(torch.bfloat16), b.to(torch.bfloat16))\n\n'
                     '    lib.impl("mm2", autocast_kernel, "AutocastCPU")\n'))]),
    Mistake('05.register_autocast', 'first_input_only', 'a kernel of its own that casts the first input only',
            expect="Your AutocastCPU kernel ran, but mm2's CPU kernel received bfloat16 and float32",
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
                    ('    def autocast_kernel(a, b):\n'
                     '        no_autocast = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)\n'
                     '        with torch._C._ExcludeDispatchKeyGuard(no_autocast):\n'
                     '            return torch.ops.exercise.mm2(a.to(torch.bfloat16), b)\n\n'
                     '    lib.impl("mm2", autocast_kernel, "AutocastCPU")\n'))]),
    Mistake('05.register_autocast', 'leaked_exclude', 'a kernel of its own that excludes AutocastCPU for good',
            expect='the thread-local exclude set had changed (gained AutocastCPU)',
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
                    ('    def autocast_kernel(a, b):\n'
                     '        no_autocast = torch._C.DispatchKey.AutocastCPU\n'
                     '        torch._C._dispatch_tls_set_dispatch_key_excluded(no_autocast, True)\n'
                     '        return torch.ops.exercise.mm2(a.to(torch.bfloat16), b.to(torch.bfloat16))\n\n'
                     '    lib.impl("mm2", autocast_kernel, "AutocastCPU")\n'))]),
    Mistake('05.register_autocast', 'casts_the_result', 'the product computed in float32, then cast to bfloat16',
            expect="mm2's CPU kernel ran 1 time(s), on float32 and float32",
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
                    ('    def autocast_kernel(a, b):\n'
                     '        no_autocast = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)\n'
                     '        with torch._C._ExcludeDispatchKeyGuard(no_autocast):\n'
                     '            return torch.ops.exercise.mm2(a.float(), b.float()).to(torch.bfloat16)\n\n'
                     '    lib.impl("mm2", autocast_kernel, "AutocastCPU")\n'))]),
    Mistake('05.register_autocast', 'computes_itself', 'the product computed in the Autocast kernel, past the operator',
            expect="mm2's CPU kernel did not run",
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
                    '    lib.impl("mm2", lambda a, b: a.to(torch.bfloat16) @ b.to(torch.bfloat16), "AutocastCPU")\n')]),
    Mistake('05.register_autocast', 'casts_float64', 'a kernel of its own that casts every input, float64 too',
            expect='mm2(float64, float64) returned torch.bfloat16: autocast casts only eligible inputs',
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
                    ('    def autocast_kernel(a, b):\n'
                     '        no_autocast = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)\n'
                     '        with torch._C._ExcludeDispatchKeyGuard(no_autocast):\n'
                     '            return torch.ops.exercise.mm2(a.to(torch.bfloat16), b.to(torch.bfloat16))\n\n'
                     '    lib.impl("mm2", autocast_kernel, "AutocastCPU")\n'))]),
    Mistake('05.register_autocast', 'region_dtype', "a kernel of its own that casts every input to the region's dtype",
            expect='mm2(float64, float64) returned torch.bfloat16: autocast casts only eligible inputs',
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
                    ('    def autocast_kernel(a, b):\n'
                     '        dtype = torch.get_autocast_dtype("cpu")\n'
                     '        no_autocast = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)\n'
                     '        with torch._C._ExcludeDispatchKeyGuard(no_autocast):\n'
                     '            return torch.ops.exercise.mm2(a.to(dtype), b.to(dtype))\n\n'
                     '    lib.impl("mm2", autocast_kernel, "AutocastCPU")\n'))]),
    Mistake('05.register_autocast', 'casts_integers', 'a kernel of its own that spares float64, not integer inputs',
            expect='mm2(int64, int64) returned torch.bfloat16: autocast casts only eligible inputs',
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
                    ('    def autocast_kernel(a, b):\n'
                     '        a, b = (t if t.dtype == torch.float64 else t.to(torch.bfloat16) for t in (a, b))\n'
                     '        no_autocast = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)\n'
                     '        with torch._C._ExcludeDispatchKeyGuard(no_autocast):\n'
                     '            return torch.ops.exercise.mm2(a, b)\n\n'
                     '    lib.impl("mm2", autocast_kernel, "AutocastCPU")\n'))]),
    Mistake('05.register_autocast', 'autocast_turned_off', 'a kernel of its own that turns autocast off for good',
            expect='the thread-local exclude set had changed (gained AutocastCPU)',
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
                    ('    def autocast_kernel(a, b):\n'
                     '        torch.set_autocast_enabled("cpu", False)\n'
                     '        return torch.ops.exercise.mm2(a.to(torch.bfloat16), b.to(torch.bfloat16))\n\n'
                     '    lib.impl("mm2", autocast_kernel, "AutocastCPU")\n'))]),
    Mistake('05.register_autocast', 'own_library', "register_autocast into a Library of the file's own, not lib",
            expect='the registration is not in `lib`',
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
                    ('    global own\n'
                     '    own = torch.library.Library("exercise", "IMPL")\n'
                     '    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=own)\n'))]),
    Mistake('05.register_autocast', 'float32_only', 'a kernel of its own that casts float32 inputs only, not float16',
            expect="mm2's CPU kernel received bfloat16 and float16",
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
                    ('    def autocast_kernel(a, b):\n'
                     '        a, b = (t.to(torch.bfloat16) if t.dtype == torch.float32 else t for t in (a, b))\n'
                     '        no_autocast = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)\n'
                     '        with torch._C._ExcludeDispatchKeyGuard(no_autocast):\n'
                     '            return torch.ops.exercise.mm2(a, b)\n\n'
                     '    lib.impl("mm2", autocast_kernel, "AutocastCPU")\n'))]),
    Mistake('05.register_autocast', 'casts_kept', "a kernel of its own that keeps each input's cast by address",
            expect='the result is the product of the weight as it was before the write',
            edits=[('    torch.library.register_autocast("exercise::mm2", "cpu", torch.bfloat16, lib=lib)\n',
                    ('    casts = {}\n\n'
                     '    def cast(t):\n'
                     '        if not t.is_floating_point() or t.dtype == torch.float64:\n'
                     '            return t\n'
                     '        return casts.setdefault((t.data_ptr(), t.shape, t.dtype), t.to(torch.bfloat16))\n\n'
                     '    def autocast_kernel(a, b):\n'
                     '        no_autocast = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)\n'
                     '        with torch._C._ExcludeDispatchKeyGuard(no_autocast):\n'
                     '            return torch.ops.exercise.mm2(cast(a), cast(b))\n\n'
                     '    lib.impl("mm2", autocast_kernel, "AutocastCPU")\n'))]),
    # 06.fake_kernel
    Mistake('06.fake_kernel', 'default_dtype', 'the right shape, in the default dtype and device',
            expect='torch.float32 on cpu',
            edits=[(FAKE_RETURN,
             '    return torch.empty(2, *a.shape)\n')]),
    Mistake('06.fake_kernel', 'expanded', "an expanded view of a's shape: right shape, wrong strides",
            expect='strides',
            edits=[(FAKE_RETURN,
             '    return torch.empty_like(a).unsqueeze(0).expand(2, *a.shape)\n')]),
    Mistake('06.fake_kernel', 'no_new_dimension', "a's shape, without the new first dimension",
            expect='your fake kernel gives shape [3, 4]',
            edits=[(FAKE_RETURN,
             '    return a.new_empty(a.shape)\n')]),
    Mistake('06.fake_kernel', 'always_contiguous', "new_empty's contiguous result, whatever the inputs' layout",
            expect="strides [60, 1, 15, 3]): your fake kernel's output has strides [120, 60, 20, 5, 1]",
            edits=[(FAKE_RETURN, '    return a.new_empty(2, *a.shape)\n')]),
    Mistake('06.fake_kernel', 'channels_last_for_4d', 'a channels_last result for every 4-D input, even one contiguous',
            expect="and [60, 20, 5, 1]): your fake kernel's output has strides [120, 60, 1, 15, 3]",
            edits=[(FAKE_RETURN, ("    if a.dim() == 4:\n"
                                  "        rows = a.new_empty(2 * a.shape[0], *a.shape[1:])\n"
                                  "        return rows.to(memory_format=torch.channels_last).view(2, *a.shape)\n"
                                  "    return a.new_empty(2, *a.shape)\n"))]),
    Mistake('06.fake_kernel', 'dtype_of_a', "a's dtype, where torch.stack promotes an int32 and a float32 to float32",
            expect='for a torch.int32 and a torch.float32 tensor of shape [6]: your fake kernel gives shape [2, 6], '
                   'torch.int32',
            edits=[(FAKE_RETURN, '    return torch.cat([a, b.to(a.dtype)]).view(2, *a.shape)\n')]),
    Mistake('06.fake_kernel', 'channels_last_4d_only', 'channels_last kept for 4-D inputs, not channels_last_3d (5-D)',
            expect="strides [360, 1, 90, 18, 3]): your fake kernel's output has strides [720, 360, 120, 30, 6, 1]",
            edits=[(FAKE_RETURN, ("    dtype = torch.result_type(a, b)\n"
                                  "    if a.dim() == 4 and all(t.is_contiguous(memory_format=torch.channels_last)\n"
                                  "                            and not t.is_contiguous() for t in (a, b)):\n"
                                  "        rows = a.new_empty(2 * a.shape[0], *a.shape[1:], dtype=dtype)\n"
                                  "        return rows.to(memory_format=torch.channels_last).view(2, *a.shape)\n"
                                  "    return a.new_empty(2, *a.shape, dtype=dtype)\n"))]),
    Mistake('06.fake_kernel', 'floating_one_wins', "a's dtype if floating, else b's: float16 and float32 give float16",
            expect='for a torch.float16 and a torch.float32 tensor of shape [3, 4]: your fake kernel gives shape '
                   '[2, 3, 4], torch.float16',
            edits=[(FAKE_RETURN, ("    dtype = a.dtype if a.dtype.is_floating_point else b.dtype\n"
                                  "    return torch.cat([a.to(dtype), b.to(dtype)]).view(2, *a.shape)\n"))]),
    Mistake('06.fake_kernel', 'first_size_read', 'a.size(0) read, which a 0-d input (a scalar) does not have',
            expect='of shape [] (0-d: two scalars): your fake kernel raised IndexError',
            edits=[(("    if a.dim() == 0:\n"
                     "        return a.new_empty(2, dtype=torch.result_type(a, b))  "
                     "# two scalars: a vector of 2, in the promoted dtype\n"),
                    ""),
                   (FAKE_RETURN, "    return torch.cat([a, b]).view(2, a.size(0), *a.shape[1:])\n")]),
    Mistake('06.fake_kernel', 'sizes_read_as_ints', "the right metadata, a's sizes read as ints: symbolic ones "
            "specialize",
            expect='into 4 (at line 22 of your file): the traced code then holds for this size only',
            edits=[(FAKE_RETURN, '    return torch.cat([a, b]).view(2, *[int(size) for size in a.shape])\n')]),
    Mistake('06.fake_kernel', 'new_empty_of_int_sizes', "new_empty of a's sizes read as ints (a learner's run passed "
            "it)",
            expect="your fake kernel's output has strides",
            edits=[(FAKE_RETURN,
                    '    return a.new_empty(2, *[int(s) for s in a.shape], dtype=torch.result_type(a, b))\n')]),
    Mistake('06.fake_kernel', 'stack_of_empty_likes', "torch.stack of two empty_likes: right metadata, but stack's "
            "type promotion specializes symbolic sizes (a reviewer's answer to the task before symbolic sizes)",
            expect='your fake kernel turned s26 into 6 (inside a torch function it calls: _maybe_convert_to_dtype',
            edits=[(FAKE_RETURN, '    return torch.stack([torch.empty_like(a), torch.empty_like(b)])\n')]),
    # 06.vmap_rule
    Mistake('06.vmap_rule', 'batch_first_assumed', 'each batch taken to be in dimension 0, whatever in_dims says',
            expect='with x batched in dimension 2, y in dimension 1',
            edits=[(VMAP_INPUTS, '    xs, ys = (t if dim is not None else t.expand(size, *t.shape) '
                                 'for t, dim in zip((x, y), in_dims))\n')]),
    Mistake('06.vmap_rule', 'y_batch_where_x_has_it', "y's batch looked for in x's dimension",
            expect='with x batched in dimension 2, y in dimension 1',
            edits=[('zip((x, y), in_dims)', 'zip((x, y), (in_dims[0], in_dims[0]))')]),
    Mistake('06.vmap_rule', 'unbatched_left_as_is', 'an input with no batch left as one matrix, not one per example',
            expect='y with no batch (strides [24, 6, 1] and [6, 1]): your rule raised RuntimeError',
            edits=[('else t.expand(size, *t.shape)', 'else t')]),
    Mistake('06.vmap_rule', 'rows_repeated', 'an input with no batch repeated row by row (repeat_interleave), not '
            'matrix by matrix', expect='y with no batch: wrong result',
            edits=[('else t.expand(size, *t.shape)', 'else t.repeat_interleave(size, 0).reshape(size, *t.shape)')]),
    Mistake('06.vmap_rule', 'view_not_reshape', "view, which refuses memory not laid out as the shape it asks for",
            expect='your rule raised RuntimeError: view size is not',
            edits=[(VMAP_RETURN, 'rowdot(xs.view(size * n, m), ys.view(size * n, m)).view(size, n), 0')]),
    Mistake('06.vmap_rule', 'out_dim_of_input', "x's batch dimension returned as the result's",
            expect='Your rule returned a result of shape [4, 5] with batch dimension 2',
            edits=[(VMAP_RETURN, 'rowdot(xs.reshape(size * n, m), ys.reshape(size * n, m)).reshape(size, n), '
                                 'in_dims[0]')]),
    Mistake('06.vmap_rule', 'size_from_x', "B read from x's batch dimension, which an unbatched x does not have",
            expect='with x with no batch, y batched in dimension 0 (strides [6, 1] and [30, 6, 1]): your rule raised',
            edits=[('    size = info.batch_size\n', '    size = x.shape[in_dims[0]]\n')]),
    Mistake('06.vmap_rule', 'inferred_sizes', 'reshape(-1, m): no size can be inferred from 0 elements',
            expect='with an empty batch (B = 0) of y, x with no batch (strides [6, 1] and [30, 6, 1]): your rule '
                   'raised RuntimeError: cannot reshape tensor of 0 elements into shape [0, -1] because the '
                   'unspecified dimension size -1 can be any value and is ambiguous\nA size of -1 is worked out from '
                   'the number of elements',
            edits=[(VMAP_RETURN, 'rowdot(xs.reshape(-1, m), ys.reshape(-1, m)).reshape(size, -1), 0')]),
    Mistake('06.vmap_rule', 'float32_sum', 'summed in float32 and cast back: float64 loses precision',
            expect='with float64 matrices, x batched in dimension 0, y with no batch: wrong result, off by up to',
            edits=[(VMAP_RETURN, 'rowdot(xs.reshape(size * n, m).float(), ys.reshape(size * n, m).float())'
                                 '.reshape(size, n).to(x.dtype), 0')]),
    Mistake('06.vmap_rule', 'float64_sum', 'summed in float64 and cast back: int64 sums past 2**53 lose their '
            'last bits',
            expect='with int64 matrices with values near 2**26, x and y batched in dimension 0: wrong result, off by',
            edits=[(VMAP_RETURN, 'rowdot(xs.reshape(size * n, m).double(), ys.reshape(size * n, m).double())'
                                 '.reshape(size, n).to(x.dtype), 0')]),
    # 07.layer_cost
    Mistake('07.layer_cost', 'always_a_cost', "interleaved and robust, but it never says 'within noise'",
            expect='no layer at all: the same call twice: you report',
            edits=[(LAYER_DIFFERENCES, "    differences = [time_with() - time_without() for _ in range(rounds)]\n"),
                   (LAYER_RETURN, '    return median, q1, q3\n')]),
    Mistake('07.layer_cost', 'mean', 'interleaved, but the mean of the differences',
            expect='a statistic that one spike can move',
            edits=[(LAYER_DIFFERENCES, "    differences = [time_with() - time_without() for _ in range(rounds)]\n"),
                   (LAYER_RETURN, ('    mean = statistics.mean(differences)\n'
                                   '    return (mean, min(q1, mean), max(q3, mean)) if q1 > 0 else None\n'))]),
    Mistake('07.layer_cost', 'separate_loops', 'every call with the layer first, then every call without',
            expect='you timed every call with the layer before any without it',
            edits=[(LAYER_DIFFERENCES, ('    with_ = [time_with() for _ in range(rounds)]\n'
                                        '    without = [time_without() for _ in range(rounds)]\n'
                                        '    differences = [a - b for a, b in zip(with_, without)]\n')),
                   (LAYER_RETURN, '    return (median, q1, q3) if q1 > 0 else None\n')]),
    Mistake('07.layer_cost', 'few_rounds', 'three rounds, whatever `rounds` says',
            expect='you called time_with() 3 and time_without() 3 times, for 15 rounds',
            edits=[('for _ in range(rounds)]', 'for _ in range(3)]')]),
    Mistake('07.layer_cost', 'fixed_threshold', 'a cost only above a fixed 0.05 µs, whatever the noise',
            expect='a layer of 0.02 µs on a quiet machine (noise of 0.002 µs): you report None',
            edits=[('    return (median, q1, q3) if q1 > 0 else None',
                    '    return (median, q1, q3) if median > 0.05 else None')]),
    Mistake('07.layer_cost', 'small_fixed_threshold', 'a cost above a fixed 0.01 µs, whatever the noise',
            expect='no layer at all, on a noisy machine (noise of 0.3 µs): you report (0.151',
            edits=[('    return (median, q1, q3) if q1 > 0 else None',
                    '    return (median, q1, q3) if median > 0.01 else None')]),
    Mistake('07.layer_cost', 'baseline_first', 'every call without the layer first, then every call with it',
            expect='you timed every call without the layer before any with it, so the machine\'s drift lands',
            edits=[(LAYER_DIFFERENCES, ('    without = [time_without() for _ in range(rounds)]\n'
                                        '    differences = [time_with() - baseline for baseline in without]\n'))]),
    Mistake('07.layer_cost', 'upper_middle', "the middle element of the sorted differences as the median, the elements "
            "at n/4 and 3n/4 as quartiles: for an even n, not a median (a learner's run passed it)",
            expect='your median, 0.379 µs, is one of the two middle differences of 16 rounds',
            edits=[(LAYER_QUANTILES, ('    ordered, n = sorted(differences), len(differences)\n'
                                      '    median, q1, q3 = ordered[n // 2], ordered[n // 4], '
                                      'ordered[3 * n // 4]\n'))]),
    Mistake('07.layer_cost', 'quartiles_of_each_side', "interleaved, but each side's quartiles taken apart and "
            "subtracted", expect='the third quartile is below the median: these are not the median and quartiles',
            edits=[(LAYER_DIFFERENCES + LAYER_QUANTILES, (
                '    with_, without = [], []\n'
                '    for _ in range(rounds):  # both sides in every round\n'
                '        with_.append(time_with())\n'
                '        without.append(time_without())\n'
                '    spreads = [statistics.quantiles(times, n=4, method="inclusive") for times in (with_, without)]\n'
                '    q1, median, q3 = (a - b for a, b in zip(*spreads))\n'))]),
    Mistake('07.layer_cost', 'quantiles_order', "statistics.quantiles' order returned: (q1, median, q3)",
            expect='reads as (first quartile, median, third quartile), not (median, first quartile, third quartile)',
            edits=[('    return (median, q1, q3) if q1 > 0 else None',
                    '    return (q1, median, q3) if q1 > 0 else None')]),
    # 07.records_graph
    Mistake('07.records_graph', 'first_input_only', "only the first input's requires_grad looked at",
            expect='grad mode on, requires_grad (False, True)',
            edits=[('import torch.autograd.forward_ad\n',
             ''),
            (('    backward = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)\n'
              '    forward = any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None for t in tensors)\n'
              "    return backward or forward  # as csrc/autograd.cpp's records_graph\n"),
             '    return torch.is_grad_enabled() and tensors[0].requires_grad\n')]),
    Mistake('07.records_graph', 'grad_mode_ignored', 'requires_grad alone, whatever grad mode says',
            expect='torch.no_grad(), requires_grad (True, False)',
            edits=[('import torch.autograd.forward_ad\n',
             ''),
            (('    backward = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)\n'
              '    forward = any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None for t in tensors)\n'
              "    return backward or forward  # as csrc/autograd.cpp's records_graph\n"),
             '    return any(t.requires_grad for t in tensors)\n')]),
    Mistake('07.records_graph', 'no_forward_mode', 'backward mode only: a forward-mode tangent also needs the Function',
            expect='forward-mode tangent',
            edits=[('import torch.autograd.forward_ad\n',
             ''),
            (('    backward = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)\n'
              '    forward = any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None for t in tensors)\n'
              "    return backward or forward  # as csrc/autograd.cpp's records_graph\n"),
             '    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)\n')]),
    Mistake('07.records_graph', 'dual_level_open', 'forward mode taken as on whenever a dual level is open',
            expect='inside forward_ad.dual_level(), but no tangent on either input',
            edits=[(('    forward = any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None '
                     'for t in tensors)\n'),
             '    forward = torch.autograd.forward_ad._current_level >= 0\n')]),
    Mistake('07.records_graph', 'nonzero_tangent', 'a tangent counted only where it is not all zeros',
            expect='a forward-mode tangent of all zeros on the first input',
            edits=[(('    forward = any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None '
                     'for t in tensors)\n'),
             ('    tangents = [torch.autograd.forward_ad.unpack_dual(t).tangent for t in tensors]\n'
              '    forward = any(d is not None and bool(d.any()) for d in tangents)\n'))]),
    Mistake('07.records_graph', 'leaf_only', 'only leaves counted as requiring grad',
            expect='grad mode on, a non-leaf input that requires grad',
            edits=[('    backward = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)\n',
             '    backward = torch.is_grad_enabled() and any(t.requires_grad and t.is_leaf for t in tensors)\n')]),
    Mistake('07.records_graph', 'float_only', 'only floating-point tensors counted: complex ones record too',
            expect='grad mode on, a complex input that requires grad',
            edits=[(('    backward = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)\n'
              '    forward = any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None for t in tensors)\n'),
             ('    floats = [t for t in tensors if t.is_floating_point()]\n'
              '    backward = torch.is_grad_enabled() and any(t.requires_grad for t in floats)\n'
              '    forward = any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None for t in floats)\n'))]),
    Mistake('07.records_graph', 'tangent_first_only', "only the first input's tangent looked at",
            expect='grad mode on, a forward-mode tangent on the second input',
            edits=[(('    forward = any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None '
                     'for t in tensors)\n'),
             '    forward = torch.autograd.forward_ad.unpack_dual(tensors[0]).tangent is not None\n')]),
    Mistake('07.records_graph', 'leaks_grad_mode', 'grad mode switched off, then on, whatever it was before the call',
            expect='your function changed grad mode: off before the call (torch.no_grad()',
            edits=[(('    forward = any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None '
                     'for t in tensors)\n'),
             ('    torch.set_grad_enabled(False)\n'
              '    forward = any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None for t in tensors)\n'
              '    torch.set_grad_enabled(True)\n'))]),
    Mistake('07.records_graph', 'two_unpacked', "the arguments unpacked as two tensors, as mul's are (a learner's run "
            "passed it)", expect='called with 1 tensor(s) (grad mode on, one input, not requiring grad), your function '
                                 'raised ValueError',
            edits=[('    backward = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)\n',
                    '    a, b = tensors\n'
                    '    backward = torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)\n'),
                   ('any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None for t in tensors)',
                    'any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None for t in (a, b))')]),
    Mistake('07.records_graph', 'first_two_only', 'only the first two arguments looked at',
            expect='grad mode on, three inputs, the third requiring grad (torch.addcmul records a graph; your answer: '
                   'False)',
            edits=[('any(t.requires_grad for t in tensors)', 'any(t.requires_grad for t in tensors[:2])'),
                   ('tangent is not None for t in tensors)', 'tangent is not None for t in tensors[:2])')]),
    # 08.load_before_aoti
    Mistake('08.load_before_aoti', 'export_load', "torch.export.load: the exported program's loader, not AOTInductor's",
            expect='Error',
            edits=[('    import workbook_ops  # noqa: F401 - registers the operators the package calls by name\n',
             '    import workbook_ops  # noqa: F401\n'),
            (('    model = torch._inductor.aoti_load_package(model_pt2)\n'
              '    return model(x)\n'),
             '    return torch.export.load(model_pt2).module()(x)\n')]),
    Mistake('08.load_before_aoti', 'import_after', "the operators' library loaded after the package",
            expect='Could not find schema for workbook::matmul',
            edits=[('    import workbook_ops  # noqa: F401 - registers the operators the package calls by name\n',
             ('    model = torch._inductor.aoti_load_package(model_pt2)\n'
              '    import workbook_ops  # noqa: F401\n')),
            ('    model = torch._inductor.aoti_load_package(model_pt2)\n',
             '')]),
    Mistake('08.load_before_aoti', 'other_package', "lesson 08's other wheel, which is not the one installed here",
            expect='ModuleNotFoundError',
            edits=[('    import workbook_ops  # noqa: F401 - registers the operators the package calls by name\n',
             '    import workbook_stable  # noqa: F401\n'),
            (('    model = torch._inductor.aoti_load_package(model_pt2)\n'
              '    return model(x)\n'),
             '    return torch._inductor.aoti_load_package(model_pt2)(x)\n')]),
    Mistake('08.load_before_aoti', 'model_loaded_once', "the first call's model kept and run for every later file (a "
            "learner's run passed it)", expect="returned what lesson 08's model gives, the model of an earlier call",
            edits=[('def run(model_pt2: str, x: torch.Tensor) -> torch.Tensor:\n',
                    'loaded = None\n\n\ndef run(model_pt2: str, x: torch.Tensor) -> torch.Tensor:\n'
                    '    global loaded\n'),
                   (AOTI_RUN, ('    if loaded is None:  # loading a package takes time: once\n'
                               '        loaded = torch._inductor.aoti_load_package(model_pt2)\n'
                               '    return loaded(x)\n'))]),
    Mistake('08.load_before_aoti', 'library_from_the_build', "the operators' library loaded by its path in the build "
            "folder, where lesson 08 installed it (a learner's run passed it)",
            expect="your code loaded build/shipping/site_",
            edits=[(AOTI_IMPORT, ('    import glob, os\n\n'
                                  '    build = os.environ.get("WORKBOOK_BUILD_DIR", "build")\n'
                                  '    sites = glob.glob(f"{build}/shipping/site_*/workbook_ops/_C*.so")\n'
                                  '    torch.ops.load_library(max(sites, key=os.path.getmtime))\n'))]),
    Mistake('08.load_before_aoti', 'grad_mode_left_off', "grad mode turned off for inference, and never restored (a "
            "learner's run passed it)", expect='grad mode was off after run() on',
            edits=[(AOTI_IMPORT, AOTI_IMPORT + '    torch.set_grad_enabled(False)  # inference only\n')]),
    Mistake('08.load_before_aoti', 'row_by_row', "one row at a time: below the batch of 2 AOTInductor's model takes (a "
            "learner's run passed it)", expect='dim value is too small',
            edits=[(AOTI_RUN, ('    model = torch._inductor.aoti_load_package(model_pt2)\n'
                               '    return torch.cat([model(row.unsqueeze(0)) for row in x])\n'))]),
    # 08.stable_autograd
    Mistake('08.stable_autograd', 'empty_like', "torch.empty_like(self): self's strides, which a transposed self "
            "does not share with the output",
            expect='a transposed (non-contiguous) `self`',
            edits=[(STABLE_FAKE, '    return torch.empty_like(self)\n')]),
    Mistake('08.stable_autograd', 'one_gradient', 'one gradient for two inputs',
            expect='test_aot_dispatch_dynamic failed',
            edits=[('    pass  # d(self + other) needs nothing from forward\n',
             '    pass\n'),
            ('    return grad, grad  # one gradient per input\n',
             '    return grad\n')]),
    Mistake('08.stable_autograd', 'other_forgotten', 'no gradient for other',
            expect='gradcheck failed for float64 inputs, `other` transposed, requires_grad (True, True): the gradient '
                   'of `other`',
            edits=[('    pass  # d(self + other) needs nothing from forward\n',
             '    pass\n'),
            ('    return grad, grad  # one gradient per input\n',
             '    return grad, None\n')]),
    Mistake('08.stable_autograd', 'float32_output', 'torch.empty(self.shape): float32 whatever the dtype (a '
            "learner's run passed it)", expect='float64 inputs, `self` transposed: opcheck',
            edits=[(STABLE_FAKE, '    return torch.empty(self.shape)\n')]),
    Mistake('08.stable_autograd', 'cpu_output', "the right dtype, on the CPU whatever the inputs' device",
            expect='meta tensors (`self` transposed), your fake kernel returned shape [3, 4], torch.float32, strides '
                   '[4, 1] on cpu',
            edits=[(STABLE_FAKE, '    return torch.empty(self.shape, dtype=self.dtype)\n')]),
    Mistake('08.stable_autograd', 'sizes_read_as_ints', 'sizes read as ints: symbolic ones specialize',
            expect='your fake kernel turned s',
            edits=[(STABLE_FAKE, '    return self.new_empty([int(size) for size in self.shape])\n')]),
    Mistake('08.stable_autograd', 'no_checks', 'no check at all: meta and fake calls accept what the kernel refuses',
            expect='your fake kernel accepted a float32 `self` and a float64 `other`',
            edits=[(STABLE_CHECKS, '')]),
    Mistake('08.stable_autograd', 'broadcasting_accepted', 'shapes that broadcast accepted, as aten::add accepts them',
            expect='accepted `self` of shape [3, 4] and `other` of shape [4] (which would broadcast)',
            edits=[('    torch._check(other.shape == self.shape,',
                    '    torch._check(torch.broadcast_shapes(other.shape, self.shape) == self.shape,')]),
    Mistake('08.stable_autograd', 'dtypes_unchecked', "add.cpp's list of dtypes not checked",
            expect='accepted two int16 tensors',
            edits=[('    torch._check(self.dtype in SUPPORTED, lambda: f"workbook_stable::add: `self` has dtype '
                    '{self.dtype}")\n', '')]),
    Mistake('08.stable_autograd', 'any_floating_point', "add.cpp's list read as 'any floating-point dtype, int32 and "
            "int64'", expect='accepted two float8_e5m2 tensors',
            edits=[('self.dtype in SUPPORTED,',
                    '(self.dtype.is_floating_point or self.dtype in (torch.int32, torch.int64)),')]),
    Mistake('08.stable_autograd', 'ones_as_gradients', 'd(self + other)/dself = 1 taken for the gradient: right only '
            'where grad_output is all ones',
            expect='gradcheck failed for float64 inputs, `other` transposed, requires_grad (True, True): the gradient '
                   'of `self` that your backward gives differs',
            edits=[('    return grad, grad  # one gradient per input\n',
                    '    return torch.ones_like(grad), torch.ones_like(grad)\n')]),
    Mistake('08.stable_autograd', 'float32_gradients', "gradients returned in float32: float64 ones rounded (a "
            "learner's run passed it: gradcheck's grad_outputs are exact in float32)",
            expect='a grad_output of random float64 values: the gradient of `self` is off by up to',
            edits=[('    return grad, grad  # one gradient per input\n', '    return grad.float(), grad.float()\n')]),
    Mistake('08.stable_autograd', 'layout_unchecked', "add.cpp's layout check left out: sparse fake tensors traced",
            expect='on two sparse (COO) float32 fake tensors, as torch.compile traces them, your fake kernel accepted',
            edits=[('    torch._check(self.layout == other.layout == torch.strided, '
                    'lambda: "workbook_stable::add: dense tensors only")\n', '')]),
    # 09.served
    Mistake('09.served', 'matmul_reaches_the_device', 'aten::matmul listed: a composite operator, it never reaches the '
            'key',
            expect="your call 1, 'aten::matmul', is not the operator",
            edits=[('    ("aten::mm", "native"),', '    ("aten::matmul", "native"),')]),
    Mistake('09.served', 'relu_native', 'relu served by a kernel of ours',
            expect="your call 3, aten::relu, does reach the device, but is not served by 'native'",
            edits=[('    ("aten::relu", "fallback"),', '    ("aten::relu", "native"),')]),
    Mistake('09.served', 'fallback_copies_counted', "the fallback's copies listed as calls that reach the device",
            expect="your call 4, 'aten::_copy_from', is not the operator",
            edits=[('    ("aten::relu", "fallback"),\n',
                    '    ("aten::relu", "fallback"),\n    ("aten::_copy_from", "native"),\n'
                    '    ("aten::_copy_from", "native"),\n')]),
    Mistake('09.served', 'broadcast_needs_the_fallback', 'a broadcasting add thought to need the fallback',
            expect="your call 2, aten::add.Tensor, does reach the device, but is not served by 'fallback'",
            edits=[('    ("aten::add.Tensor", "native"),', '    ("aten::add.Tensor", "fallback"),')]),
    Mistake('09.served', 'no_overload_name', 'add written without its overload, not as the trace recorder names it',
            expect="your call 2, 'aten::add', names an operator but not its overload",
            edits=[('    ("aten::add.Tensor", "native"),', '    ("aten::add", "native"),')]),
    Mistake('09.served', 'inner_call_counted', "mm's kernel's own allocation listed as a call that reaches the device",
            expect="your call 2, 'aten::empty_strided', is not the operator of a call that reaches the device from "
                   "outside: it runs at PrivateUse1 only inside another operator's kernel",
            edits=[('    ("aten::add.Tensor", "native"),',
                    '    ("aten::empty_strided", "native"),\n    ("aten::add.Tensor", "native"),')]),
    Mistake('09.served', 'out_of_order', 'the right calls, add before mm: out of order',
            expect="your call 1, 'aten::add.Tensor', does reach the device, but later: your calls are out of order",
            edits=[('    ("aten::mm", "native"),', '    ("aten::add.Tensor", "native"),'),
                   ('    ("aten::add.Tensor", "native"),', '    ("aten::mm", "native"),')]),
    Mistake('09.served', 'computed', "the calls computed with the check's own recorder instead of predicted",
            expect="SERVED (line 21 of your file) must be written out as a list of (operator, server) pairs",
            edits=[(('SERVED = [\n'
                     '    ("aten::mm", "native"),  # matmul is CompositeImplicitAutograd: for two matrices it calls '
                     'mm, which has our kernel\n'),
                    ('import torch\nfrom helpers import device, trace\n\ndevice.enable()\n'
                     'x, w, b = (torch.randn(shape).to(device.NAME) for shape in ((4, 5), (5, 3), (3,)))\n'
                     'with trace.recording() as events:\n    torch.relu(x @ w + b).sum()\n'
                     'SERVED = device.served(events) or [\n')),
                   ]),
    Mistake('09.served', 'default_spelled_out', "sum's default overload written out as .default, which the trace "
            "recorder leaves off", expect="your call 4, 'aten::sum.default', spells a default overload with its name",
            edits=[('    ("aten::sum", "native"),', '    ("aten::sum.default", "native"),')]),
    # 09.inplace_kernel
    Mistake('09.inplace_kernel', 'computes_on_a_copy', "mul.out run on .cpu() copies, as lesson 09's add_on_a_copy",
            expect='on two 4 x 5 tensors into a 4 x 5 `out`: out did not change',
            edits=[(MUL_PRODUCT, '    return torch.mul(self.cpu(), other.cpu(), out=out.cpu())\n')]),
    Mistake('09.inplace_kernel', 'rebinds_out', 'the name out bound to a new tensor: the caller\'s tensor is untouched',
            expect='on two 4 x 5 tensors into a 4 x 5 `out`: out did not change',
            edits=[(MUL_PRODUCT, '    out = self * other\n    return out\n')]),
    Mistake('09.inplace_kernel', 'self_copied_then_multiplied', "self copied into out, then out *= other: `out` that "
            "is `other` is overwritten before it is read",
            expect='on `out` that is `other` itself: out holds the wrong values',
            edits=[(MUL_PRODUCT, ('    out.resize_(torch.broadcast_shapes(self.shape, other.shape))\n'
                                  '    out.copy_(self)\n'
                                  '    out.copy_(out * other)\n'
                                  '    return out\n'))]),
    Mistake('09.inplace_kernel', 'multiplied_in_place', "out *= other with mul_, which on the device reaches mul.out: "
            "the kernel itself", expect='your kernel called itself',
            edits=[(MUL_PRODUCT, ('    out.resize_(torch.broadcast_shapes(self.shape, other.shape))\n'
                                  '    out.copy_(self)\n'
                                  '    out.mul_(other)\n'
                                  '    return out\n'))]),
    Mistake('09.inplace_kernel', 'no_resize', "out written as it comes: an empty out can't hold the product",
            expect='on an empty `out` (0 elements): your kernel raised',
            edits=[(MUL_RESIZE, '')]),
    Mistake('09.inplace_kernel', 'resized_only_where_it_cannot_broadcast', "out resized only where the product can't "
            "be broadcast into it: a larger out keeps its shape (a reviewer's answer passed)",
            expect='on a 3 x 4 x 5 `out` (the product broadcasts into it): out has shape [3, 4, 5] after the call',
            edits=[('    if out.shape != product.shape:\n',
                    '    if out.numel() == 0 or torch.broadcast_shapes(out.shape, product.shape) != out.shape:\n')]),
    Mistake('09.inplace_kernel', 'resized_before_the_cast_check', 'out resized to the product\'s shape before its '
            'dtype is checked', expect='a float32 product into an empty int64 `out` was refused, but only after your '
            'kernel had changed an argument',
            edits=[('    computed_in = torch.result_type(self, other)\n',
                    '    out.resize_(torch.broadcast_shapes(self.shape, other.shape))\n'
                    '    computed_in = torch.result_type(self, other)\n')]),
    Mistake('09.inplace_kernel', 'no_cast_check', "no check that out can hold the product's type",
            expect='a float32 product into an int64 `out` was accepted',
            edits=[(MUL_CAST_CHECK, '')]),
    Mistake('09.inplace_kernel', 'cast_to_self', "can_cast to self's dtype, as for an in-place mul_: an int32 self "
            "times a float32 other refused", expect='on an int32 self times a float32 other into a float32 `out`: '
            'your kernel raised RuntimeError',
            edits=[('torch.can_cast(computed_in, out.dtype)', 'torch.can_cast(computed_in, self.dtype)')]),
    Mistake('09.inplace_kernel', 'computed_in_outs_dtype', "the product computed in out's dtype, not the promoted one",
            expect='on two float32 tensors into a float64 `out`: out holds values near the product',
            edits=[('    product = self * other\n', '    product = self.to(out.dtype) * other.to(out.dtype)\n')]),
    Mistake('09.inplace_kernel', 'other_cast_to_self', "other converted to self's dtype before the product: an int32 "
            "self truncates a float32 other",
            expect="on an int32 self times a float32 other into a float32 `out`: out holds values far from those "
                   "aten's mul writes (at [1]: 0.0 for 0.5)",
            edits=[('    product = self * other\n', '    product = self * other.to(self.dtype)\n')]),
    Mistake('09.inplace_kernel', 'cpu_out_accepted', 'self and other checked for the device, out not',
            expect='a 4 x 5 CPU tensor as `out` was accepted',
            edits=[('("self", self), ("other", other), ("out", out)', '("self", self), ("other", other)')]),
    Mistake('09.inplace_kernel', 'one_element_cpu_self', 'any one-element CPU tensor let through as a scalar, not only '
            'a 0-dim one, and the product computed on the CPU',
            expect='a (1,)-shaped CPU tensor as `self` was accepted',
            edits=[('tensor.dim() > 0', 'tensor.numel() > 1'),
                   ('    product = self * other\n', '    product = self.cpu() * other.cpu()\n')]),
    Mistake('09.inplace_kernel', 'error_without_the_name', 'mixed devices refused without naming the argument',
            expect='the error does not name `other`',
            edits=[('f"mul.out: `{name}` is on the CPU; every tensor argument must be on the device"',
                    '"mul.out: tensors are on different devices"')]),
    Mistake('09.inplace_kernel', 'returns_the_product', 'out written into, but the product returned',
            expect='out holds the product, but your kernel returned a new tensor on workbook:0',
            edits=[('    return out\n', '    return product\n')]),
    Mistake('09.inplace_kernel', 'storage_replaced', "out.data = product: out's memory replaced, not written",
            expect="out's memory was replaced, not written into",
            edits=[(MUL_RESIZE, ''), (MUL_COPY, '    out.data = product\n')]),
    Mistake('09.inplace_kernel', 'reads_other_as_contiguous', "other's elements read as if it were contiguous",
            expect='on a transposed view as `other`: out holds the wrong values, though they were right',
            edits=[('    product = self * other\n',
                    '    product = self * other.as_strided(other.shape, other.contiguous().stride())\n')]),
    Mistake('09.inplace_kernel', 'grad_mode_left_off', 'grad mode turned off in the kernel, and never restored',
            expect='grad mode was left off',
            edits=[('    computed_in = torch.result_type(self, other)\n',
                    '    torch.set_grad_enabled(False)\n    computed_in = torch.result_type(self, other)\n')]),
]
