"""Exercise 08.load_before_aoti (medium): run an AOTInductor package in production.

Write `run(model_pt2, x)`: load the AOTInductor package `model_pt2` (a .pt2 file like lesson 08's, whose model calls
workbook operators) and return the model's output for `x`.

The check runs it as production would: in a fresh Python in which only torch and the installed wheel (`workbook_ops`)
can be imported, the wheel installed in a folder of its own (not where lesson 08 put it), with
AOTI_RUNTIME_CHECK_INPUTS=1 set as lesson 08 advises, on a file system whose times count whole seconds (as ext3's do).
It calls `run`, in this order:
- on two packages in turn (two models, each deployed as model.pt2 in a folder of its own, both of the same size,
  CRC-32, Adler-32, and modification and change times), each again on its input's rows in reverse order, and with its
  middle row changed, while the caller flushes denormal numbers to zero, has chosen its float32 matmul precision and
  warns of nondeterministic kernels;
- on the second file again, for a caller that did not set AOTI_RUNTIME_CHECK_INPUTS, then after the first model was
  copied over it (a release deployed in place: a file of the same size, given the old file's time, as rsync -t and cp -p
  deploy), after two more releases deployed so within one second, through a link to that file after another;
- with inputs the package refuses (too few rows, three other dtypes), once inside torch.no_grad(), once for a caller
  that chose its precision through the per-backend API (torch.backends.mkldnn.matmul.fp32_precision);
- three times on one input buffer refilled in place between the calls (through torch, then through numpy, whose writes
  torch's version counter does not see), and on the same rows twice;
- four times more on one file, as a server calls it once per request;
- on eight files in turn (a first round, then two more: a server may hold more models than a cache is sized for);
- after each of four releases deployed over one file in turn, and after each of four deployed by flipping a link to
  them (current -> the release, run() given current/model.pt2); after the link flipped to a release served already by
  its own name; then on a file and a link to it, the link flipped to another release;
- twenty times more on new inputs (what it keeps of them counted), then once more, the input and output dropped
  by the caller (freed at once);
- on a release deployed over a file while run() loads it (and once run() has read it itself), and on that file again
  an hour later by the process's clocks (time's clocks and datetime's);
- on one more release, for a caller whose default dtype is float64;
- by one relative name from the folders of two releases in turn (a caller that changes its working directory);
- on a release, then four times on it once torn (a copy cut off halfway, as a full disk or a killed deploy leaves
  it), twice once an archive with no model is (the wrong file), then once a complete release is deployed over it;
- from four threads at once, on a release not loaded yet, two by its name and two by a hard link (parallel requests);
- on a file it has loaded, once a release of that model whose weights changed is deployed over it (the same size,
  times, first 4 MiB and last MiB, and CRC-32, the whole file's and each of its files': only the middle differs);
- on the fewest rows the package takes, then on more rows than any call above; last, on 1025 files in turn, twice.

It checks each output (a tensor the caller can use as any other), the refusals, and:
- that grad mode, the number of threads, the inter-op threads, denormal flushing, float32 matmul precision,
  deterministic algorithms (warn-only too), the default dtype and device, the working directory, the file creation mask
  (umask), the standard streams (descriptors 0 to 2, sys.stdout) and the random number generators (torch's, random's,
  numpy's) are, after the import and each call, as they were before (the caller sets its threads after the import);
- that your file's import, and each call, leave the environment variables (os.environ, os.putenv) as they were;
- that Python's warning filters and hooks (warnings.showwarning) and the loggers' levels (disabled too) are as they were
  before the import, both after it and once the calls are done;
- that the calls write nothing in a release's folder, leave nothing they make anywhere but the temporary and home
  folders, remove nothing they did not make, and grow neither the temporary folder (what the loader itself unpacks
  aside: lesson 08, section 3), nor the home folder (where a cache would go), nor the models the process keeps loaded: a
  model that no name the caller gives leads to any more (an old release behind a flipped link, or a release whose file
  was removed) is dropped by the next call on that name at the latest, a call that fails too;
- that no call loads a file's model again while the file is unchanged (after a request the package refused, given
  by another name: a symbolic or a hard link to it, or asked for by several threads at once; a model's library stays
  mapped after the model is dropped);
- that nothing was loaded from the workbook's build folder.
"""

import hashlib
import io
import os
import threading

import torch


def run(model_pt2: str, x: torch.Tensor) -> torch.Tensor:
    import workbook_ops  # noqa: F401 - registers the operators the package calls by name

    with _LOADING:  # requests in parallel threads: one loads a file's model, the others then find it loaded
        model = _model(model_pt2)
    return model(x)


_LOADED: dict[str, tuple[str, object]] = {}  # a path the caller gave -> (its contents' sha256, their model)
_LOADING = threading.Lock()  # what a call reads and changes of _LOADED, one call at a time


def _model(model_pt2: str):
    """The model in the file, loaded once, and again when the file's contents change: a release copied over the file
    in place keeps its name, often its size, and (cp -p, rsync -t) its time. Loading at each call would map the
    model's library anew each time, and a library stays mapped after its model is dropped. One model per contents:
    a file given by two names (a link to it) is loaded once, and a model goes when no name leads to its contents."""
    if not os.path.exists(model_pt2):  # a release retired: the name leads nowhere now, and its model goes (open raises)
        _LOADED.pop(os.path.abspath(model_pt2), None)
    with open(model_pt2, "rb") as file:
        data = file.read()
    contents = hashlib.sha256(data).hexdigest()
    path = os.path.abspath(model_pt2)  # the name the caller gives: a link flipped to a new release is the same file
    same = next((entry for entry in _LOADED.values() if entry[0] == contents), None)  # these contents, by another name
    if same is not None:
        _LOADED[path] = same
    if path not in _LOADED or _LOADED[path][0] != contents:
        # What the name led to goes first: a release torn over it (a copy cut off halfway) fails to load, and the
        # old model, which no name leads to then, must not stay behind that failure.
        _LOADED.pop(path, None)
        # From the bytes just hashed, not the file again: a release deployed over it meanwhile would be loaded, and
        # known by the old release's contents.
        _LOADED[path] = contents, torch._inductor.aoti_load_package(io.BytesIO(data))
    return _LOADED[path][1]
