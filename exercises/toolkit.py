"""What the checks (exercises/checks.py) are made of: a Result, the registry of exercises, and small tools for
checking a reader's file. Every check runs in a process of its own (exercises/runner.py), so nothing here needs to
undo what a reader's code registered."""

from __future__ import annotations

import ast
import faulthandler
import importlib.util
import logging
import re
import signal
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from helpers import trace

FOLDER = Path(__file__).resolve().parent


@dataclass
class Result:
    passed: bool
    diagnosis: str = ""


class Diagnosis(Exception):
    """Raised by a tool below with a finished diagnosis: the runner gives its message as the check's verdict."""


@dataclass(frozen=True)
class Exercise:
    id: str  # "02.meta_kernel": lesson, then name
    difficulty: str  # easy, medium or hard: what a learner who did the lesson meets
    check: Callable[[Path], Result]
    on_crash: Callable[[Path], str] | None = None  # what to say when the reader's code kills the check's process

    @property
    def file(self) -> str:
        """The skeleton's file name: the id with an underscore for the dot, .py or .cpp."""
        stem = self.id.replace(".", "_", 1)
        return next(name for name in (f"{stem}.py", f"{stem}.cpp") if (FOLDER / name).exists())


EXERCISES: dict[str, Exercise] = {}
DIFFICULTIES = ("easy", "medium", "hard")


def exercise(exercise_id: str, difficulty: str, on_crash: Callable[[Path], str] | None = None):
    """Register a check (exercises/checks.py uses this as a decorator)."""
    assert difficulty in DIFFICULTIES, difficulty

    def register(check: Callable[[Path], Result]):
        EXERCISES[exercise_id] = Exercise(exercise_id, difficulty, check, on_crash)
        return check

    return register


class Watchdog:
    """In a check's process (exercises/runner.py): once the reader's code has used `seconds` of processor time without
    the check finishing, or run WALL_FACTOR times as long on the clock (code that waits forever uses none), write where
    Python was to `file` and end the process. Processor time, not the clock's: on a loaded machine (a test run's
    workers, a compile beside it) code that finishes gets less of the processor, and is not a loop. The clock starts
    where the reader's code first runs (load_python; load_cpp once the build is done), so no compile counts. Both
    timers act from C, outside the interpreter: they fire even while a C++ loop holds the GIL. The processor-time one is
    the kernel's (setitimer's ITIMER_PROF, all the process's threads), whose signal faulthandler answers with the
    stacks, then passes on to the signal's default action, which ends the process."""

    WALL_FACTOR = 5

    def __init__(self):
        self.file, self.seconds, self.started = None, 0.0, False

    def arm(self, file, seconds: float) -> None:
        self.file, self.seconds = file, seconds

    def start(self) -> None:
        """Start the clock, once: a second call must not give the reader's code its time again."""
        if self.file is not None and not self.started:
            self.started = True
            faulthandler.register(signal.SIGPROF, file=self.file, all_threads=True, chain=True)
            signal.setitimer(signal.ITIMER_PROF, self.seconds)
            faulthandler.dump_traceback_later(self.seconds * self.WALL_FACTOR, exit=True, file=self.file)

    def stop(self) -> None:
        faulthandler.cancel_dump_traceback_later()
        if self.started:
            signal.setitimer(signal.ITIMER_PROF, 0)
            faulthandler.unregister(signal.SIGPROF)


WATCHDOG = Watchdog()


def compile_settings() -> dict[str, object]:
    """The settings of torch's compile stack (torch._dynamo.config and its kin), by full name."""
    import torch._dynamo.config
    import torch._functorch.config
    import torch._inductor.config
    import torch.fx.experimental._config

    modules = (torch._dynamo.config, torch._inductor.config, torch._functorch.config, torch.fx.experimental._config)
    return {f"{module.__name__}.{name}": value for module in modules
            for name, value in module.get_config_copy().items()}


def process_settings() -> dict:
    """What importing a module must leave as it found it, beyond torch's compile settings: Python's warning filters
    and log levels, and torch's random number generator."""
    loggers = {name: (logger.level, logger.disabled) for name, logger in logging.root.manager.loggerDict.items()
               if isinstance(logger, logging.Logger)}
    return {"warnings": list(warnings.filters), "loggers": {"root": (logging.root.level, False), **loggers},
            "logging.disable": logging.root.manager.disable, "rng": torch.random.get_rng_state()}


def process_settings_changes(before: dict) -> str:
    """'' where the process's settings are as `before` (process_settings()), else the first change, in words. A
    filter for some warnings, or a logger made by the import, changes nothing the caller had."""
    now = process_settings()
    blanket = [entry for entry in now["warnings"] if entry not in before["warnings"]
               and entry[1] is None and entry[3] is None]  # (action, message, category, module, line)
    if blanket:
        action, _, category, _, _ = blanket[0]
        return (f"added a warning filter {action!r} for every {category.__name__} of every module "
                "(warnings.simplefilter): the caller's warnings, torch's among them, are handled so from then on")
    if lost := [entry for entry in before["warnings"] if entry not in now["warnings"]]:
        action, _, category, _, _ = lost[0]
        return f"removed the caller's warning filter {action!r} for {category.__name__} (warnings.resetwarnings)"
    if now["logging.disable"] != before["logging.disable"]:
        return (f"turned off every log record up to level {logging.getLevelName(now['logging.disable'])} "
                "(logging.disable), of every logger")
    for name, (level, disabled) in before["loggers"].items():
        if (now_level := now["loggers"][name][0]) != level:
            return (f"set the level of the logger {name!r} to {logging.getLevelName(now_level)} (it was "
                    f"{logging.getLevelName(level)}), for that logger and those below it")
        if now["loggers"][name][1] != disabled:
            return f"turned the logger {name!r} {'off' if now['loggers'][name][1] else 'on'}"
    if not torch.equal(now["rng"], before["rng"]):
        return ("changed the state of torch's random number generator (torch.manual_seed, or a draw): a caller that "
                "seeded before the import draws other numbers after it")
    return ""


def thread_state() -> dict:
    """What a call on this thread depends on beyond its arguments: grad and inference mode, the include and exclude
    sets."""
    return {"grad mode": torch.is_grad_enabled(), "inference mode": torch.is_inference_mode_enabled(),
            "the thread-local include set": torch._C._dispatch_tls_local_include_set(),
            "the thread-local exclude set": torch._C._dispatch_tls_local_exclude_set()}


def thread_state_changes(before: dict) -> str:
    """'' where the thread's state is as `before` (thread_state()), else what changed, in words."""
    changes = []
    for what, (old, new) in zip(before, zip(before.values(), thread_state().values())):
        if old == new:
            continue
        if isinstance(old, bool):
            changes.append(f"{what} was {'on' if old else 'off'}, and is {'on' if new else 'off'}")
        else:
            changes.append(f"{what} {keyset_change(old, new)}")
    return "; ".join(changes)


def keys_in(keyset: torch._C.DispatchKeySet) -> list[str]:
    """The keys a keyset holds, by name: each backend's own runtime key (AutogradCPU and AutogradMeta, where
    trace.key_names names one key per kind of key), and a kind of key held with no backend of its own, as
    _dispatch_tls_set_dispatch_key_excluded(AutogradFunctionality) leaves it: every backend's key of that kind."""
    runtime, kinds = {}, {}
    for name, key in torch._C.DispatchKey.__members__.items():
        if not (torch._C._dispatch_is_alias_key(key) or name.startswith(("Undefined", "StartOf", "EndOf"))):
            single = torch._C.DispatchKeySet(key)
            (runtime if single.highestPriorityTypeId() == key else kinds)[name] = single
    held = [name for name, single in runtime.items() if keyset & single == single]
    return held + [f"{name} (every backend's)" for name, kind in kinds.items() if keyset & kind == kind
                   and not any(runtime[runtime_key] & kind == kind for runtime_key in held)]


def keyset_change(old: torch._C.DispatchKeySet, new: torch._C.DispatchKeySet) -> str:
    """'gained AutogradOther; lost ADInplaceOrView': how a keyset changed, by key name."""
    old_keys, new_keys = keys_in(old), keys_in(new)
    gained = [key for key in new_keys if key not in old_keys]
    lost = [key for key in old_keys if key not in new_keys]
    if not (gained or lost) and old.raw_repr() != new.raw_repr():  # bits that make no key by themselves
        return (f"in bits that no key's name shows: {old.raw_repr():#x} before, {new.raw_repr():#x} after (torch."
                "_C.DispatchKeySet.raw_repr): a backend's bits with no functionality of theirs, as setting a "
                "per-backend key's exclusion back one key at a time leaves them")
    return "; ".join(f"{what} {', '.join(keys)}" for what, keys in (("gained", gained), ("lost", lost)) if keys)


NOW_DOING = "the check is now "  # a line the runner quotes where the reader's code kills the process


def now_doing(what: str) -> None:
    """Say what the check does next, where the runner finds it if the reader's code kills the process (a C++ abort
    prints nothing of the call it was in)."""
    print(NOW_DOING + what, flush=True)


def load_python(path: Path):
    """Import a Python exercise file afresh, from its text: never from a cached .pyc, which Python trusts when the
    file's size and modification second are unchanged (an edit of one character within a second would not count).
    An import that changes a setting of torch's compile stack is refused: every torch.compile and export in the
    process would run so, on code that never calls the reader's operator."""
    spec = importlib.util.spec_from_file_location(f"exercise_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import does: a dataclass of the file reads its module's namespace there
    code = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    settings, thread, generator = compile_settings(), thread_state(), torch.random.get_rng_state()
    torch.manual_seed(20261129)  # a caller's own seed, not the check's (which a manual_seed(0) would leave as it was)
    process = process_settings()
    WATCHDOG.start()
    exec(code, module.__dict__)
    changed = process_settings_changes(process)
    torch.random.set_rng_state(generator)
    if changed:
        raise Diagnosis(f"importing your file {changed}: a setting of the whole process, in force from the import on, "
                        "for the caller's own code too. What the task asks needs no such setting; a program that "
                        "wants one sets it itself, where it decides to")
    if changed := thread_state_changes(thread):
        raise Diagnosis(f"importing your file changed the thread's dispatch state ({changed}), before any call: "
                        "whatever a module makes at import is in force from then on, on the importing thread (some of "
                        "torch._C's guards, _AutoDispatchBelowAutograd for one, act from where they are made, not from "
                        "`with`). Make what a call needs in the call")
    if changed := changed_compile_setting(settings):
        name, now, before = changed
        raise Diagnosis(f"importing your file set {name} to {now!r} (it was {before!r}): a setting of the whole "
                        "process, so every torch.compile and torch.export after the import runs so, also on code that "
                        "never calls your operator. What the task asks needs no setting changed; a project that wants "
                        "one sets it itself, where it compiles")
    return module


def changed_compile_setting(before: dict[str, object]) -> tuple[str, object, object] | None:
    """(name, value now, value before) of the first compile setting that is not as in `before` (compile_settings());
    None where all are."""
    now = compile_settings()
    return next(((name, now[name], value) for name, value in before.items()
                 if name in now and _differs(now[name], value)), None)


def _differs(value: object, before: object) -> bool:
    try:
        return bool(value != before)
    except Exception:  # noqa: BLE001 - a value without a plain comparison (a tensor): compared by identity
        return value is not before


def load_cpp(name: str, path: Path, label: str) -> Path:
    """Compile a C++ exercise file into a library called `name` and load it (build.load_sources); the library's path."""
    from helpers import build  # here: it imports torch's cpp_extension, which a notebook's show() and check() never use

    try:
        built = build.load_sources(name, [path], label=label, optimize=False)  # an answer's speed is not judged
    except build.CompileError as error:  # a line, then the compiler's first errors: the reader needs them all
        raise Diagnosis(shortened_paths(str(error), path)) from None
    WATCHDOG.start()
    return Path(built.library)


def shortened_paths(text: str, path: Path) -> str:
    """`text` with the reader's file named by its name, and torch's headers from their include folder on."""
    text = re.sub(rf"[^\s:'\"]*/{re.escape(path.name)}\b", path.name, text)
    return re.sub(r"[^\s:'\"]*/torch/include/", "", text)


def read_literal(path: Path, name: str, what: str, valid: Callable[[object], bool]):
    """The value of `name = ...` at the top of the reader's file, read with ast.literal_eval, never run: an answer
    that states a fact (a path, a list of calls) must not be computed with the tools the check itself uses. Raises
    Diagnosis unless it is written out as `what` and `valid` accepts it."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))  # bytes: decoded as Python decodes them (a coding line)
    except SyntaxError as error:
        raise Diagnosis(f"Python cannot parse your file (line {error.lineno}): {error.msg}") from None
    values = [node.value for node in tree.body
              if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
              or isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name and node.value]
    if not values:
        nested = [node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)]
        where = (f"your file sets {name} only inside a block (line {nested[0]}: an if, a loop, a with, a function), "
                 "which the check does not run" if nested else f"your file sets no {name}")
        raise Diagnosis(f"{where}: write it out at its top level, as {what}")
    if changed := [node.lineno for node in ast.walk(tree) if _changes(node, name)]:
        raise Diagnosis(f"line {changed[0]} of your file changes {name} after it is written: the check reads {name} "
                        f"from your file without running it, so {name} must be one literal, {what}, not changed later")
    if used := [node.lineno for node in ast.walk(tree)
                if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)]:
        raise Diagnosis(f"line {used[0]} of your file reads {name} after it is written, and what reads it can change "
                        f"it (an alias, `calls = {name}; calls.append(...)`, or `list.append({name}, ...)`): the check "
                        f"reads {name} from your file without running it, so the file writes it, {what}, and does "
                        "nothing else with it")
    written = next(node for node in tree.body if getattr(node, "value", None) is values[-1])
    targets = written.targets if isinstance(written, ast.Assign) else [written.target]
    the_literals_own = {id(n) for target in targets for n in ast.walk(target)}
    if rebound := sorted(getattr(node, "lineno", 0) for node in ast.walk(tree)
                         if _rebinds(node, name) and id(node) not in the_literals_own):
        numbers = sorted({*rebound, written.lineno})
        where = (f"lines {' and '.join(map(str, numbers))} of your file could each set {name}" if len(numbers) > 1
                 else f"line {numbers[0]} of your file could set {name} more than once")
        raise Diagnosis(f"{where} when the file runs: the check reads {name} from your file without running it, so "
                        f"{name} must be one literal, {what}, set once")
    try:
        value = ast.literal_eval(values[-1])
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise Diagnosis(f"{name} (line {values[-1].lineno} of your file) must be written out as {what}: the check "
                        "reads it from your file without running your file, so it cannot be computed") from None
    if not valid(value):
        raise Diagnosis(f"{name} (line {values[-1].lineno} of your file) must be {what}")
    if acting := [node.lineno for node in tree.body if not _states(node)]:
        raise Diagnosis(f"line {acting[0]} of your file does something when the file runs (a call, a loop, a block, a "
                        f"definition, an import, which runs the module's code): the check reads {name} from your file "
                        f"without running it, so the file writes {name} out, {what}, and does nothing else that a run "
                        "could change it by")
    return value


def _states(node: ast.stmt) -> bool:
    """Whether a top-level statement only states something: a docstring or other string, `from __future__ import
    ...`, or a name given a value written out (`SERVED = [...]`, `NOTE: str = "..."`). Anything else runs code when
    the file runs: an import runs the imported module's, which may print, or set a name of this file's."""
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    if isinstance(node, ast.ImportFrom) and node.module == "__future__" or isinstance(node, ast.Pass):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        if isinstance(node, ast.AnnAssign) and any(isinstance(part, ast.Call) for part in ast.walk(node.annotation)):
            return False  # a module's annotations are evaluated when it runs: a call in one runs
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        try:
            ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
        return all(isinstance(target, ast.Name) for target in targets)
    return False


def _rebinds(node: ast.AST, name: str) -> bool:
    """Whether `node` may give `name` a value when the file runs: an assignment to it anywhere (in an `if`, a loop, a
    function, a `with`), a `del`, a `global` statement, an import as it or of every name (`from m import *`), an
    attribute of that name set on anything (the module, through sys.modules), or a way to set a name from its text
    (globals(), vars(), exec, setattr)."""
    if isinstance(node, ast.Name):
        return (node.id == name and isinstance(node.ctx, (ast.Store, ast.Del))
                or node.id in ("globals", "vars", "locals", "exec", "eval", "setattr"))
    if isinstance(node, ast.Global):
        return name in node.names
    if isinstance(node, ast.Attribute):  # module.NAME = ... (sys.modules[__name__].NAME, say)
        return node.attr == name and isinstance(node.ctx, (ast.Store, ast.Del))
    return isinstance(node, ast.alias) and (node.name == "*" or (node.asname or node.name.split(".")[0]) == name)


def _changes(node: ast.AST, name: str) -> bool:
    """Whether `node` changes the object `name` holds in place: name.append(...), name += ..., name[i] = ..., del
    name[i]."""
    def is_name(target):
        return isinstance(target, ast.Name) and target.id == name

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return is_name(node.func.value)
    if isinstance(node, ast.AugAssign):
        return is_name(node.target)
    return isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) and is_name(node.value)


@contextmanager
def operator(schema: str, kernel=None, key: str = "CPU", namespace: str = "exercise", tags=()):
    """Define <namespace>::<schema> (with `kernel` at `key`, if given); yields the Library registrations go into."""
    library = torch.library.Library(namespace, "FRAGMENT")
    library.define(schema, tags=tags)
    if kernel is not None:
        library.impl(schema.split("(")[0], kernel, key)
    yield library


def call_path(op, *args, **kwargs) -> list[str]:
    """The keys whose kernels the dispatcher calls for op(*args, **kwargs), here and now."""
    return trace.path(trace.predict(op, *args, **kwargs))


def first_difference(answer: list, actual: list) -> int | None:
    """The index of the reader's first entry that differs from the actual one; None where the shorter list is the
    start of the longer."""
    return next((i for i, (yours, theirs) in enumerate(zip(answer, actual)) if yours != theirs), None)


def compare_paths(answer: list[str], actual: list[str], where_to_look: str) -> Result:
    """A predicted path against the dispatcher's. On a mismatch, says which of the reader's entries is the first
    wrong one, and where to look, never what the right entry is."""
    if list(answer) == actual:
        return Result(True, f"path: {' -> '.join(actual)}")
    if (i := first_difference(answer, actual)) is not None:
        where = f"your kernel {i + 1}, {answer[i]!r}, is not the one the dispatcher calls there"
    else:
        where = (f"after your {len(answer)} kernel(s) the dispatcher calls more" if len(actual) > len(answer)
                 else f"the dispatcher stops before your kernel {len(actual) + 1}, {answer[len(actual)]!r}")
    return Result(False, f"{where}.\nLook again at {where_to_look}")


def mentions(path: Path, pattern: str) -> bool:
    """Whether the file's code (comments dropped) matches `pattern`: for diagnoses aimed at one known mistake."""
    code = re.sub(r"//.*|#.*", "", path.read_text())
    return re.search(pattern, code) is not None
