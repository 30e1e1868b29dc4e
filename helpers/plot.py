"""Pictures of the dispatcher: a key ladder per call, a map of dispatch tables, and who served a backend's calls.

    figure = plot.ladders([trace.call(op, x), trace.call(op, x_grad)], titles=["plain", "requires_grad"])
    figure = plot.table_map([torch.ops.workbook.add, torch.ops.aten.add.Tensor])
    figure = plot.served({"forward": [("aten::mm", "native"), ("aten::relu", "fallback")]})

Each returns the matplotlib Figure. In a notebook, assign it (`figure = plot.ladders(...)`): Jupyter
shows it once, and nbval, which ignores a trailing `;`, finds no extra text output.
"""

from __future__ import annotations

import textwrap
from collections import Counter

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch, Patch

if __package__:
    from . import trace as tr
else:  # copied into a project as a top-level module, beside trace.py
    import trace as tr

COLORS = {
    "workbook kernel": "#2e9d5b",
    "our Python kernel": "#5ab4ac",
    "nested call": "#a8d8b9",
    "torch kernel": "#4a7fc1",
    "composite kernel": "#8e6cc0",
    "fallback": "#e0a040",
    "fallthrough": "#d9d9d9",
    "excluded": "#ffffff",
    "missing": "#d64545",
    "not reached": "#f3f3f3",
}


def _category(step: tr.Step) -> str:
    if step.status != "kernel":
        return step.status
    return _entry_category(step.entry)


def _entry_category(entry: tr.Entry | None) -> str:
    if entry is None:
        return "missing"
    if entry.fallthrough:
        return "fallthrough"
    if entry.kind == "backend fallback":  # torch's or ours (lesson 09's device): one boxed kernel for every operator
        return "fallback"
    if entry.ours:
        return "workbook kernel"
    if _ours_in_python(entry):
        return "our Python kernel"
    if entry.kind in ("math kernel", "default backend kernel"):
        return "composite kernel"
    return "torch kernel"


def _ours_in_python(entry: tr.Entry) -> bool:
    """Registered by our Python code (a file of this machine outside torch and csrc/, e.g. helpers/python_ops.py's
    vmap rule): ours, but it does not record itself. Entry.where keeps a line number only for such files."""
    return not entry.ours and ":" in entry.where


def _box(ax, x, y, color, label, dashed=False, width=0.9):
    ax.add_patch(FancyBboxPatch((x - width / 2, y - 0.35), width, 0.7, boxstyle="round,pad=0.02",
                                facecolor=color, edgecolor="#555555", linestyle="--" if dashed else "-"))
    ax.text(x, y, label, ha="center", va="center", fontsize=8)


def _arrows(ax, x, ys):
    for y0, y1 in zip(ys, ys[1:]):
        ax.annotate("", xy=(x, y1 + 0.36), xytext=(x, y0 - 0.36),
                    arrowprops=dict(arrowstyle="->", color="#222222", lw=1.4))


def ladder(t: tr.Trace, ax=None, title: str | None = None):
    """One call: its keys in priority order (top = tried first). Left column: what the prediction
    says the dispatcher does at each key. Right column: our kernels that ran (recorded), with the
    dtypes they saw; kernels of other operators called from inside this one are drawn below, named."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5.2, 0.55 * len(t.predicted) + 1.4))
    rows = {step.key: -i for i, step in enumerate(t.predicted)}
    for step in t.predicted:
        category = _category(step)
        label = step.key if step.status == "kernel" else f"{step.key} ({step.status})"
        label += f"\n{step.handled_by}" if step.handled_by else ""  # the mode or subclass at the Python key
        _box(ax, 0, rows[step.key], COLORS[category], label, dashed=step.status == "excluded")
    _arrows(ax, 0, [rows[k] for k in t.predicted_path])
    recorded_rows, bottom = [], min(rows.values(), default=0)
    for event in t.recorded:
        if t.is_own(event):
            y = rows.get(event.key, bottom - 1)
            _box(ax, 1, y, COLORS["workbook kernel"], f"{event.key}\n{','.join(event.dtypes)}", width=0.8)
        else:  # a nested call of another operator: below the ladder, indented, named
            bottom -= 1
            y = bottom
            _box(ax, 1.15, y, COLORS["nested call"], f"{event.op}@{event.key}\n{','.join(event.dtypes)}", width=0.8)
        recorded_rows.append(y)
    _arrows(ax, 1, recorded_rows)
    ax.set_xlim(-0.55, 1.6)
    ax.set_ylim(bottom - 0.7, 0.7)
    ax.set_xticks([0, 1], ["predicted", "recorded"])
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    # What the title can vouch for: only our kernels record themselves, so torch's (its autograd fallback, ...)
    # are predicted and run, but never appear in the right column.
    ours = tr.path(t.predicted, ours_only=True)
    in_python = [s.key for s in t.predicted if s.key in t.predicted_path and s.entry and _ours_in_python(s.entry)]
    torchs = [key for key in t.predicted_path if key not in ours and key not in in_python]
    if t.error:
        verdict = "error: " + type(t.error).__name__
    elif not ours and not t.own_events:
        verdict = "torch's kernels only: predicted, not recorded"
    elif not t.own_events:
        verdict = "none of this operator's kernels recorded itself"
    elif t.agrees:
        verdict = "recorded = predicted" + (f"; torch's {', '.join(torchs)}: not recordable" if torchs else "")
        verdict += f"; our Python kernel at {', '.join(in_python)}: not recorded" if in_python else ""
    else:
        verdict = "recorded != predicted"
    # Long verdicts wrap, so that the titles of ladders side by side do not run into each other.
    ax.set_title(f"{title or t.op}\n" + textwrap.fill(f"({verdict})", 52), fontsize=9)
    return ax.figure


def _legend(fig, categories):
    handles = [Patch(facecolor=COLORS[c], edgecolor="#555555", label=c) for c in categories]
    fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), fontsize=8, frameon=False)


def ladders(traces: list[tr.Trace], titles: list[str] | None = None):
    """Several calls side by side, sharing one legend."""
    height = 0.55 * max(len(t.predicted) for t in traces) + 1.8
    fig, axes = plt.subplots(1, len(traces), figsize=(4.6 * len(traces), height), squeeze=False)
    for i, (t, ax) in enumerate(zip(traces, axes[0])):
        ladder(t, ax=ax, title=titles[i] if titles else None)
    used = {_category(s) for t in traces for s in t.predicted}
    used |= {"workbook kernel"} if any(t.own_events for t in traces) else set()
    used |= {"nested call"} if any(t.nested for t in traces) else set()
    _legend(fig, [c for c in COLORS if c in used])
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


# Keys worth a column in a table map, highest priority first.
DEFAULT_KEYS = ["AutocastCPU", "AutocastCUDA", "FuncTorchBatched", "Functionalize", "AutogradCPU", "AutogradCUDA",
                "AutogradMeta", "ADInplaceOrView", "BackendSelect", "Python", "CPU", "CUDA", "Meta"]


def table_map(ops, keys: list[str] | None = None, title: str = "computed dispatch tables"):
    """Operators x dispatch keys: what each op's computed table holds at each key."""
    keys = keys or DEFAULT_KEYS
    names = [tr.op_name(op) for op in ops]
    fig, ax = plt.subplots(figsize=(0.75 * len(keys) + 2.6, 0.5 * len(names) + 2.2))
    used = set()
    for row, name in enumerate(names):
        table = tr.dispatch_table(name)
        for col, key in enumerate(keys):
            category = _entry_category(table.get(key))
            used.add(category)
            ax.add_patch(plt.Rectangle((col, -row - 1), 1, 1, facecolor=COLORS[category], edgecolor="white", lw=2))
    ax.set_xlim(0, len(keys))
    ax.set_ylim(-len(names), 0)
    ax.set_xticks([c + 0.5 for c in range(len(keys))], keys, rotation=60, ha="right", fontsize=8)
    ax.set_yticks([-r - 0.5 for r in range(len(names))], names, fontsize=9)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(title, fontsize=10)
    _legend(fig, [c for c in COLORS if c in used])
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


# How table_text names each category: short, so a row fits a line.
SHORT = {"workbook kernel": "ours", "torch kernel": "torch", "composite kernel": "composite", "fallback": "fallback",
         "fallthrough": "fallthrough", "missing": "-"}


def table_text(ops, keys: list[str] | None = None) -> str:
    """table_map as text: one row per operator, one column per key. For printing a table as it fills in, step by
    step, where a figure per step would repeat itself."""
    keys = keys or DEFAULT_KEYS
    names = [tr.op_name(op) for op in ops]
    width = max(len(key) for key in keys) + 2
    name_width = max(map(len, names)) + 2
    rows = [" " * name_width + "".join(f"{key:<{width}}" for key in keys)]
    for name in names:
        table = tr.dispatch_table(name)
        rows.append(f"{name:<{name_width}}" + "".join(f"{_short(table.get(key)):<{width}}" for key in keys))
    return "\n".join(row.rstrip() for row in rows)


def _short(entry: tr.Entry | None) -> str:
    label = SHORT[_entry_category(entry)]
    if label == "ours" and entry.kind in ("math kernel", "default backend kernel"):
        # One registration at a composite alias key fills this key: implicit (CompositeImplicitAutograd) or explicit.
        return "ours:implicit" if entry.kind == "math kernel" else "ours:explicit"
    if label == "fallback" and entry.ours:
        return "ours:fallback"  # one boxed kernel for every operator at this key (lesson 09)
    return label


def served(phases: dict[str, list[tuple[str, str]]]):
    """Calls per operator that reached a backend, one panel per phase (forward, backward, ...), each bar split into the
    calls its own kernels served and those its fallback served. A phase is a list of (operator, "native" or
    "fallback"), one per call, as helpers.device.served gives."""
    height = 0.28 * max(len({op for op, _ in calls}) for calls in phases.values()) + 1.6
    fig, axes = plt.subplots(1, len(phases), figsize=(5.6 * len(phases), height), squeeze=False)
    for ax, (phase, calls) in zip(axes[0], phases.items()):
        counts = Counter(calls)
        ops = sorted({op for op, _ in calls}, key=lambda op: (-counts[(op, "fallback")], op))
        native = [counts[(op, "native")] for op in ops]
        fallback = [counts[(op, "fallback")] for op in ops]
        ax.barh(ops, native, color=COLORS["workbook kernel"], edgecolor="#555555")
        ax.barh(ops, fallback, left=native, color=COLORS["fallback"], edgecolor="#555555")
        ax.invert_yaxis()
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.tick_params(labelsize=8)
        ax.set_title(f"{phase}: {sum(native)} calls to our kernels, {sum(fallback)} to the fallback", fontsize=9)
    handles = [Patch(facecolor=COLORS["workbook kernel"], edgecolor="#555555", label="our kernel"),
               Patch(facecolor=COLORS["fallback"], edgecolor="#555555", label="the fallback")]
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig
