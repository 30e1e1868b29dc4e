"""Lesson 08's shipping steps, each built once into build/shipping/ and reused by the lesson, its tests and exercise.

    wheel = shipping.build_wheel()            # csrc/package -> wheel_<hash>/workbook_ops-...-cp310-abi3-...whl
    stable = shipping.build_wheel("stable")   # csrc/stable  -> workbook_stable-...whl, on LibTorch's stable ABI
    shipping.abi_matrix("stable")        # each wheel built with each torch of the checkout's venvs, run under each
    site = shipping.install(wheel)       # a folder holding the installed package and nothing else
    print(shipping.run_python("import workbook_ops; ...", site))   # a fresh Python that sees `site`, not the workbook
    model_pt2 = shipping.aoti_package(exported_program)            # torch._inductor.aoti_compile_and_package, cached
    model, model_pt2 = shipping.mlp_package()  # exported_mlp() packaged, without exporting again once it exists
    runner = shipping.build_runner()     # csrc/aoti/runner.cpp: runs a .pt2 from C++, no Python

Each step is keyed by a hash of its inputs (torch's version included), so an edit builds again and nothing else
does. The lesson, the tests and the exercise checks may run side by side (pytest's workers): a lock per step makes
the second one wait for the first one's result.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from . import isolated, paths, progress, samples, toolchain
from .paths import CSRC, REPO

SHIPPING = paths.BUILD / "shipping"
TORCH_DIR = Path(torch.__file__).resolve().parent


def _hash(files: list[Path], *extra: str, torch_version: str = torch.__version__) -> str:
    """A cache key over the files, their place in the checkout, and torch's version (this process's, or the one
    a wheel is built with). A file outside the checkout (a wheel, where WORKBOOK_BUILD_DIR names a folder elsewhere)
    has no place in it: its name and bytes, which content_hash reads, are its key."""
    places = [str(path.relative_to(REPO)) for path in files if path.is_relative_to(REPO)]
    return paths.content_hash(files, torch_version, *extra, *places)


def _locked(step: str):
    return paths.locked(SHIPPING / f"{step}.lock")


def _run(command: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return done


def package_files(package: str = "package") -> list[Path]:
    """What a wheel is built from. csrc/package: every csrc/*.cpp and header (the operator library), and the package
    folder. csrc/stable: add.cpp and its package folder."""
    folder = CSRC / package
    python = [path for path in folder.rglob("*.py") if "build" not in path.relative_to(folder).parts]
    if package == "stable":
        return [folder / "add.cpp", *python]
    return [*CSRC.glob("*.cpp"), *CSRC.glob("*.h"), *CSRC.glob("*.cu"), *python]


def build_wheel(package: str = "package", venv: Path | None = None) -> Path:
    """`pip wheel csrc/<package>`, run on a copy of csrc/ under build/shipping/ (setuptools writes its build
    folders beside setup.py, and the checkout stays clean), with this process's torch, or with the torch of another
    of the checkout's venvs (torch_venvs()). The copy keeps file times, so ninja recompiles only the files that
    changed since the last wheel; each torch release has a copy of its own, so no object built against one
    release's headers ends up in another's wheel."""
    files = package_files(package)
    version = torch.__version__ if venv is None else installed_torch(venv)
    python = sys.executable if venv is None else str(venv / "bin" / "python")
    out = SHIPPING / f"wheel_{package}_{_hash(files, torch_version=version)}"
    with _locked(f"wheel_{package}"):
        if wheels := sorted(out.glob("*.whl")):
            return wheels[0]
        tree = SHIPPING / f"src_{version}"
        for path in files:
            copy = tree / path.relative_to(REPO)
            if not copy.exists() or copy.read_bytes() != path.read_bytes():
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, copy)
        command = [python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-cache-dir",
                   "--disable-pip-version-check", "-w", str(out), str(tree / "csrc" / package)]
        with progress.Line(f"wheel of csrc/{package} ({len(files)} files, torch {version})"):
            _run(command, "pip wheel")
        return sorted(out.glob("*.whl"))[0]


def install(wheel: Path) -> Path:
    """`pip install --target`: the package alone in a folder of its own (torch is found where it is)."""
    site = SHIPPING / f"site_{_hash([wheel])}"
    with _locked("install"):
        if not site.exists():
            _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile", "--quiet",
                  "--disable-pip-version-check", "--target", str(site), str(wheel)], "pip install")
        return site


def imported_symbols(library: Path) -> list[str]:
    """The dynamic symbols a shared library needs from others (`nm -D --undefined-only`): what it calls in torch,
    in libc, in Python."""
    listing = _run(["nm", "-D", "--undefined-only", str(library)], "nm").stdout
    # Newer binutils print the symbol's version too (GOMP_parallel@GOMP_4.0): the name is what comes before it.
    return [line.split()[-1].split("@")[0] for line in listing.splitlines()]


def installed_torch(venv: Path) -> str:
    """The torch release installed in a venv, read from its package metadata (no Python started): "2.13.0"."""
    found = sorted(venv.glob("lib/python3*/site-packages/torch-*.dist-info"))
    return found[0].name.removeprefix("torch-").removesuffix(".dist-info") if found else ""


def torch_venvs() -> dict[str, Path]:
    """The checkout's venvs that `make` finished (.venv, and .venv-2.13.0 from `make test TORCH=2.13.0`), by the torch
    release each holds, oldest first; this process's own venv among them wherever it is."""
    venvs = {installed_torch(venv): venv for venv in [REPO / ".venv", *REPO.glob(".venv-*")]
             if (venv / ".installed").exists() and (venv / "bin" / "python").exists()}
    venvs[installed_torch(Path(sys.prefix))] = Path(sys.prefix)
    venvs.pop("", None)
    return dict(sorted(venvs.items(), key=lambda item: tuple(int(n) for n in re.findall(r"\d+", item[0])[:3])))


def _is_this_process(venv: Path | None) -> bool:
    return venv is None or venv.resolve() == Path(sys.prefix).resolve()


def run_python(code: str, site: Path | None = None, check: bool = True, venv: Path | None = None,
               timeout: float = 600) -> str:
    """Run `code` in a fresh Python that cannot import the workbook (its checkout is taken off sys.path) but sees
    `site`: this process's Python (isolated.run), or another venv's. Returns what it printed; with check=False, its
    error output too. subprocess.TimeoutExpired once it has run `timeout` seconds (it is ended then).

    Its temporary folder ($TMPDIR) is one of its own, removed afterwards: a package that fails to load (lesson 08's,
    before `import workbook_ops`) leaves the folders aoti_load_package unpacked it into behind, even at a new Python's
    exit."""
    prelude = textwrap.dedent(f"""\
        import sys
        sys.path[:] = [p for p in sys.path if p not in ({str(REPO)!r}, '')]
        sys.path.insert(0, {str(site) if site else ''!r})
        """)
    with tempfile.TemporaryDirectory(prefix="workbook-fresh-python-") as scratch:
        if _is_this_process(venv):
            done = isolated.run(prelude + textwrap.dedent(code), env={"TMPDIR": scratch}, timeout=timeout)
        else:
            done = subprocess.run([str(venv / "bin" / "python"), "-c", prelude + textwrap.dedent(code)],
                                  capture_output=True, text=True, cwd=REPO, timeout=timeout,
                                  env={**os.environ, "TMPDIR": scratch})
    if check and done.returncode != 0:
        raise RuntimeError(f"the fresh Python failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout + ("" if check else done.stderr)


@contextmanager
def _saved_samples():
    """The sample inputs of every operator (samples.every_op, with and without gradients), saved to a file that a fresh
    Python reads with torch.load (what csrc/package/workbook_ops/check.py takes); removed afterwards."""
    cases = SHIPPING / f"opcheck_samples_{os.getpid()}.pt"
    torch.save({grad: samples.every_op(requires_grad=grad) for grad in (False, True)}, cases)
    try:
        yield cases
    finally:
        cases.unlink()


def opcheck_installed(site: Path, venv: Path | None = None) -> str:
    """The installed package's own check (csrc/package/workbook_ops/check.py), run in a fresh Python that sees only
    `site` and torch (this process's, or `venv`'s), on the sample inputs of every operator (samples.every_op);
    returns what it printed."""
    with _saved_samples() as cases:
        return run_python(f"from workbook_ops.check import main; main({str(cases)!r})", site, venv=venv)


# ---------------------------------------------------------------------------------------------
# One wheel under another torch release


@dataclass(frozen=True)
class AbiOutcome:
    """A wheel built with one torch release, installed beside another, and what happened there."""
    loaded: bool
    opcheck_passed: bool | None  # None where it did not load
    detail: str  # the function the loader did not find, or the opcheck cases that failed


# Imports the package, says so, and runs its operators under opcheck (the regular wheel: its own check, every
# operator; the stable one: `add`), a line per case that ends "passed" or "FAILED ...": what abi_outcome reads.
_ABI_PROGRAMS = {
    "package": """
        import workbook_ops
        print("imported")
        from workbook_ops.check import main
        main(SAMPLES_PATH)
        """,
    "stable": """
        import torch, workbook_stable
        print("imported")
        a, b = torch.randn(4, 3), torch.randn(3, 4).t()
        assert torch.equal(torch.ops.workbook_stable.add(a, b), a + b)
        results = torch.library.opcheck(torch.ops.workbook_stable.add.default, (a, b), raise_exception=False)
        for test, outcome in sorted(results.items()):
            print(f"{test:36} {'passed' if outcome == 'SUCCESS' else 'FAILED'}")
        """,
}


def abi_outcome(package: str, built_with: Path, run_under: Path) -> AbiOutcome:
    """The `package` wheel built with the torch of venv `built_with`, installed in a folder of its own, imported and
    opchecked in a fresh Python of venv `run_under`. Kept in build/shipping/ under the wheel's bytes and the torch it
    ran under, like the wheels themselves."""
    wheel = build_wheel(package, None if _is_this_process(built_with) else built_with)
    site = install(wheel)
    record = SHIPPING / f"abi_{_hash([wheel], torch_version=installed_torch(run_under))}.txt"
    if not record.exists():
        with _saved_samples() as cases:
            program = _ABI_PROGRAMS[package].replace("SAMPLES_PATH", repr(str(cases)))
            printed = run_python(program, site, check=False, venv=run_under)
        record.with_suffix(f".{os.getpid()}").write_text(printed)
        record.with_suffix(f".{os.getpid()}").replace(record)
    printed = record.read_text()
    last_line = printed.strip().splitlines()[-1] if printed.strip() else "(nothing printed)"
    if not re.search(r"^imported$", printed, re.MULTILINE):
        missing = re.search(r"undefined symbol: (\S+)", printed)
        return AbiOutcome(False, None, f"undefined symbol {_function_name(missing[1])}" if missing else last_line)
    results = re.findall(r"^(\S+)\s.*\b(passed|FAILED.*)$", printed, re.MULTILINE)
    failed = [f"{name} {outcome}" for name, outcome in results if outcome != "passed"]
    if not results:  # it died or raised before opcheck said anything
        failed = [f"no opcheck result: {last_line}"]
    return AbiOutcome(True, not failed, "; ".join(failed))


def _function_name(symbol: str) -> str:
    """A mangled C++ symbol's qualified function name, without its parameters: torch::autograd::_wrap_outputs."""
    demangled = _run(["c++filt", symbol], "c++filt").stdout.strip()
    return demangled.split("(")[0]


def changed_headers(venv: Path) -> tuple[list[str], int]:
    """torch's C++ headers (torch/include) that differ between this torch and the one in `venv`, and how many the two
    have in common: what code compiled against one of them took from torch, inline, unseen by the dynamic loader."""
    here, there = TORCH_DIR / "include", next(venv.glob("lib/python3*/site-packages/torch/include"))
    common = sorted({p.relative_to(here) for p in here.rglob("*.h")}
                    & {p.relative_to(there) for p in there.rglob("*.h")})
    return [str(path) for path in common if (here / path).read_bytes() != (there / path).read_bytes()], len(common)


def abi_matrix(package: str) -> dict[tuple[str, str], AbiOutcome]:
    """abi_outcome for every pair of the checkout's venvs (torch_venvs()): {(built with, run under): outcome}, by
    torch release. A venv of another release comes from `make test TORCH=<release>`."""
    venvs = torch_venvs()
    return {(built, run): abi_outcome(package, venvs[built], venvs[run]) for built in venvs for run in venvs}


# ---------------------------------------------------------------------------------------------
# AOTInductor


def aoti_package(program: torch.export.ExportedProgram) -> Path:
    """torch._inductor.aoti_compile_and_package(program), once per program: the key is the program's code, its
    symbolic shapes' ranges, its weights and the operators' schemas."""
    weights = "".join(f"{name}{tensor.tolist()}" for name, tensor in program.state_dict.items())
    key = _hash([CSRC / "schemas.cpp"], program.graph_module.code, str(program.graph_signature),
                str(program.range_constraints), weights)
    path = SHIPPING / f"model_{key}.pt2"
    with _locked("aoti"):
        if not path.exists():
            # The compile writes the machine's description (AOTI_DEVICE_KEY, AOTI_CPU_ISA, ...) into the process's
            # setting aot_inductor.metadata itself (torch/_inductor/codecache.py, AotCodeCompiler.compile): it
            # writes into a copy, and every later compile of the process finds the setting as it was.
            metadata = dict(torch._inductor.config.aot_inductor.metadata)
            with (progress.Line("AOTInductor package of the exported model"),
                  torch._inductor.config.patch({"aot_inductor.metadata": metadata})):
                torch._inductor.aoti_compile_and_package(program, package_path=str(path))
        return path


def build_runner() -> Path:
    """csrc/aoti/runner.cpp, compiled against the libtorch inside the torch wheel: a program, no Python."""
    source = CSRC / "aoti" / "runner.cpp"
    program = SHIPPING / f"runner_{_hash([source])}"
    with _locked("runner"):
        if not program.exists():
            lib = TORCH_DIR / "lib"
            command = [paths.compiler(), "-std=c++20", "-O1", str(source),
                       *(f"-I{folder}" for folder in toolchain.torch_includes()), f"-L{lib}", f"-Wl,-rpath,{lib}",
                       # libtorch.so itself, though the runner calls nothing in it: the model's compiled library
                       # inside the .pt2 needs it, and is dlopen'ed from a temporary folder whose search path does
                       # not include torch/lib. Linked --no-as-needed, it is already in the process by then.
                       "-Wl,--no-as-needed", "-ltorch", "-ltorch_cpu", "-lc10", "-o", str(program)]
            with progress.Line("C++ runner (csrc/aoti/runner.cpp)"):
                _run(command, "compiling the runner")
        return program


def exported_mlp(seed: int = 0) -> tuple[torch.nn.Module, torch.export.ExportedProgram]:
    """samples.TinyMLP (its weights drawn from `seed`), exported (no grad, eval mode) with a symbolic batch dimension:
    what lesson 08 and exercise 08 compile with AOTInductor."""
    model = samples.TinyMLP(seed=seed).eval()
    with torch.no_grad():
        batch = torch.export.Dim("batch")
        return model, torch.export.export(model, (torch.zeros(3, 32),), dynamic_shapes={"x": {0: batch}})


def mlp_package(seed: int = 0) -> tuple[torch.nn.Module, Path]:
    """exported_mlp(seed)'s model and its aoti_package, without the export (about 2 s) where the package exists: the
    path is kept under a key over what the export reads (the model's code and seed, csrc's operators, torch's
    version). For the tests and the exercise check (which runs a second model too); the lesson exports, to show the
    program."""
    inputs = [REPO / "helpers" / "samples.py", Path(__file__), *sorted(CSRC.glob("*.cpp")), *sorted(CSRC.glob("*.h"))]
    known = SHIPPING / f"mlp_package_{_hash(inputs, f'seed {seed}')}.txt"
    if known.exists() and (path := Path(known.read_text())).exists():
        return samples.TinyMLP(seed=seed).eval(), path
    model, program = exported_mlp(seed)
    path = aoti_package(program)
    written = known.with_suffix(f".{os.getpid()}")
    written.write_text(str(path))
    written.replace(known)  # whole or not at all, for a pytest worker reading it meanwhile
    return model, path
