"""Taking a tensor home from the viewer: the values of the card under the cursor saved to a
local ``.npy`` (and ``.pt`` where torch is installed), or the Python lines that fetch it.

Values come through the client's ``read_values`` (raw chunks in flight, written straight
into the array), bypassing the viewer's answer cache. Files are written to a temporary
name and renamed, so a failure at any point leaves no partial file. The viewer never
imports torch: the ``.pt`` is written by a short ``python`` subprocess from the ``.npy``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tvis.agent.client import empty_for
from tvis.agent.protocol import AgentError
from tvis.tui.widgets.sparkline import hbar
from tvis.tui.widgets.tensor_card import TensorRef

EXPORT_DIR_ENV = "TVIS_EXPORT_DIR"
DEFAULT_DIR = "tvis_exports"

PROGRESS_MIN_BYTES = 8 << 20
"""Tensors from this size on (more than one ``read`` chunk) show a progress bar while they
come; smaller ones arrive before a bar could be read."""

PT_TIMEOUT_S = 120.0
"""Importing torch alone takes seconds on a busy machine; two minutes is a hung subprocess."""

_PT_SCRIPT = (
    "import sys, numpy, torch\n"
    "torch.save(torch.from_numpy(numpy.load(sys.argv[1], allow_pickle=False)), sys.argv[2])\n"
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_STEM = 200
"""Characters kept of a file name's stem: well under the 255 bytes a file name may take on
every common filesystem, with room for the suffix and the temporary file's decoration."""


def rounded_note(value: dict[str, Any] | None) -> str | None:
    """For a value stored rounded (format 4: an activation or gradient of a run recorded
    without --exact), the one line that says so; None for exact values."""
    bits = (value or {}).get("bits")
    if not isinstance(bits, int):
        return None
    return f"values stored to {bits + 1} significant bits; run with --exact to keep them whole"


class ExportError(Exception):
    """An export that could not be done; the message is one sentence."""


@dataclass(frozen=True)
class ExportItem:
    """One tensor the viewer shows, with what it takes to fetch it and to name its file."""

    run: str  # the run's name for the agent
    run_id: str
    tensor: int  # the id of the values to save (the gradient's own id for a gradient)
    value: dict[str, Any]  # the entry's stored layout: dtype, shape, nbytes, kept
    label: str  # e.g. "features.4 out (gradient)" or "fc.weight update"
    batch: int | None = None
    step: int | None = None
    param: str | None = None
    which: str = "weight"
    grad_of: int | None = None  # for a gradient: the id of the tensor it belongs to
    full_shape: tuple[int, ...] | None = None  # the recorded tensor's, before any cut

    @property
    def cut(self) -> str:
        """What part of the tensor was kept, when not all of it: ``first 3 of 32 samples``."""
        kept, count = self.value.get("kept"), self.value.get("count")
        if kept not in ("samples", "rows") or not isinstance(count, int):
            return ""
        stored = tuple(self.value.get("shape") or ())
        full = self.full_shape or ()
        dim = next((i for i, (a, b) in enumerate(zip(stored, full, strict=False)) if a != b), 0)
        total = full[dim] if dim < len(full) else "?"
        return f"first {count} of {total} {kept}"

    @property
    def where(self) -> dict[str, int | None]:
        return {"batch": self.batch} if self.batch is not None else {"step": self.step}

    @property
    def nbytes(self) -> int:
        """The size of the values fetched (the stored ``nbytes`` is compressed since format 3)."""
        count = int(np.prod(self.value.get("shape", []), dtype=np.int64))
        return count * np.dtype(self.value.get("dtype") or "u1").itemsize

    def file_stem(self) -> str:
        """The file name (without suffix): every part the agent named reduced to letters,
        digits and ``._-``, so no run id or label can lead out of the export folder."""
        place = f"b{self.batch}" if self.batch is not None else f"s{self.step}"
        label = self.label.replace(" (gradient)", ".grad")
        cut = ""
        if self.cut:  # first 3 of 32 samples -> first3of32samples: never taken for all 32
            cut = self.cut.replace("first ", "first").replace(" of ", "of").replace(" ", "")
        parts = (
            safe_name(str(self.run_id)),
            safe_name(place),
            safe_name(label),
            safe_name(cut),
            f"t{self.tensor}",
        )
        return "_".join(p for p in parts if p)[:MAX_STEM]


def safe_name(text: str) -> str:
    """``text`` as one file name's worth of ``[A-Za-z0-9._-]``: no separator, no leading
    dot (so never ``.`` or ``..``), no control character."""
    return _UNSAFE.sub("_", text).strip("_").lstrip(".")


def item_for(ref: TensorRef, grad: bool, call_name: str, run_id: str) -> ExportItem:
    """The tensor a card shows (its gradient when ``grad``), or ``ExportError`` saying why
    there is nothing to save."""
    entry = ref.entry
    if ref.param is not None:
        label = f"{ref.param} {ref.which}"
    else:
        label = f"{call_name} {ref.title}" + (" (gradient)" if grad else "")
        if grad:
            entry = entry.get("grad_entry") or {}
            if not entry:
                raise ExportError(f"{call_name} {ref.title} has no recorded gradient to save.")
    if not entry.get("value"):
        raise ExportError(
            f"{label} has statistics only; its values were not kept, so there is nothing to save."
        )
    return ExportItem(
        run=ref.run,
        run_id=run_id,
        tensor=int(entry["id"]),
        value=entry["value"],
        label=label,
        batch=ref.batch,
        step=ref.step,
        param=ref.param,
        which=ref.which,
        grad_of=int(ref.entry["id"]) if grad and ref.param is None else None,
        full_shape=tuple(entry.get("shape") or ()) or None,
    )


def export_dir() -> Path:
    """Where exports go: ``$TVIS_EXPORT_DIR``, else ``./tvis_exports``."""
    return Path(os.environ.get(EXPORT_DIR_ENV) or DEFAULT_DIR).expanduser()


def torch_installed() -> bool:
    """Whether a ``.pt`` can be written (looked up without importing torch)."""
    return importlib.util.find_spec("torch") is not None


def fetch(client: Any, item: ExportItem, progress: Callable[[int, int], None] | None) -> np.ndarray:
    """The stored values of ``item``, read straight into a new array."""
    out = empty_for(item.value, item.label)
    if out.nbytes:
        view = out.reshape(-1).view(np.uint8).data
        client.read_values(view, progress, run=item.run, tensor=item.tensor, **item.where)
    return out


def write_atomic(path: Path, write: Callable[[Path], None]) -> Path:
    """Run ``write(temporary path)`` next to ``path``, then rename it into place; on any
    failure the temporary file is removed and ``path`` is untouched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    temp = Path(name)
    try:
        write(temp)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return path


def _save_npy(array: np.ndarray) -> Callable[[Path], None]:
    def write(temp: Path) -> None:
        with open(temp, "wb") as f:
            np.save(f, array, allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())

    return write


def _save_pt(npy: Path) -> Callable[[Path], None]:
    def write(temp: Path) -> None:
        try:
            done = subprocess.run(
                [sys.executable, "-c", _PT_SCRIPT, str(npy), str(temp)],
                capture_output=True,
                text=True,
                timeout=PT_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise ExportError(
                f"torch took over {PT_TIMEOUT_S:.0f} s to write {npy.stem}.pt; the .npy is saved."
            ) from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise ExportError(f"torch could not write {npy.stem}.pt ({last}); the .npy is saved.")

    return write


def export(
    client: Any,
    item: ExportItem,
    folder: Path,
    progress: Callable[[int, int], None] | None = None,
    with_pt: bool | None = None,
) -> list[Path]:
    """Fetch ``item`` and save it under ``folder`` as ``.npy`` (and ``.pt`` when torch is
    installed, or as ``with_pt`` says). Raises ``AgentError`` or ``ExportError``, each one
    sentence; nothing is written until every byte has arrived."""
    values = fetch(client, item, progress)
    stem = item.file_stem()
    try:
        npy = write_atomic(folder / f"{stem}.npy", _save_npy(values))
    except OSError as e:
        raise ExportError(f"cannot write {folder / stem}.npy ({e.strerror or e}).") from None
    paths = [npy]
    if torch_installed() if with_pt is None else with_pt:
        paths.append(write_atomic(folder / f"{stem}.pt", _save_pt(npy)))
    return paths


def python_lines(client: Any, item: ExportItem) -> str:
    """The ``tvis.connect`` lines that fetch ``item`` in a notebook or script."""
    target = getattr(client, "target", None)
    if target is not None and target.name:
        spec, extra = target.name, ""
    elif target is not None:
        spec = f"{target.host}:{target.path}"
        extra = f", via={list(target.via)!r}" if target.via else ""
        if target.remote_tvis:
            extra += f", remote_tvis={target.remote_tvis!r}"
    else:
        spec, extra = str(Path(getattr(client, "root", ".")).resolve()), ""
    # Every value from the agent goes in as a literal (repr), never as comment text: a name
    # with a newline in it would otherwise end a comment and run when the lines are pasted.
    if item.param is not None:
        get = f"run.param({item.param!r}, step={item.step!r}, which={item.which!r})"
    elif item.grad_of is not None:
        get = f"run.tensor({item.grad_of!r}, batch={item.batch!r}).grad"
    else:
        place = ", ".join(f"{k}={v!r}" for k, v in item.where.items())
        get = f"run.tensor({item.tensor!r}, {place})"
    return (
        "import tvis\n\n"
        f"with tvis.connect({spec!r}{extra}) as runs:\n"
        f"    run = runs.open({item.run_id!r})\n"
        f"    label = {item.label!r}\n"
        f"    x = {get}.numpy()\n"
    )


def progress_note(label: str, done: int, total: int) -> str:
    """The status line's text while a large export arrives."""
    fraction = done / total if total else 1.0
    return f"exporting {label} {hbar(fraction, 12)} {fraction:.0%}"


def failure(error: BaseException) -> str:
    """One sentence for an export that failed."""
    if isinstance(error, AgentError):
        return f"export failed: {error.message}"
    if isinstance(error, ExportError):
        return f"export failed: {error}"
    return f"export failed: {type(error).__name__}: {error}."


def start(app: Any, item: ExportItem) -> None:
    """Export ``item`` in a thread worker of ``app``: a bar in the status line while a large
    tensor arrives, a notification naming the files (or the one sentence) at the end."""
    client, folder = app.data.client, export_dir()
    before = app.status_note

    def progress(done: int, total: int) -> None:
        if total >= PROGRESS_MIN_BYTES:
            app.call_from_thread(
                setattr, app, "status_note", progress_note(item.label, done, total)
            )

    def finish(message: str, error: bool) -> None:
        if app.status_note.startswith("exporting"):
            app.status_note = before
        app.notify(message, severity="error" if error else "information", timeout=10)

    def run() -> None:
        try:
            paths = export(client, item, folder, progress)
        except Exception as e:  # every failure is reported; the viewer keeps going
            app.call_from_thread(finish, failure(e), True)
            return
        cut = f" ({item.cut}: only those were kept)" if item.cut else ""
        saved = f"saved {item.label}{cut} to {', '.join(map(str, paths))}"
        rounded = rounded_note(item.value)
        if rounded:
            saved += f" ({rounded})"
        app.call_from_thread(finish, saved, False)

    app.run_worker(run, thread=True, group="export", exit_on_error=False)


def copy_python(app: Any, item: ExportItem) -> str:
    """Put the lines that fetch ``item`` on the clipboard (OSC 52) and show them."""
    code = python_lines(app.data.client, item)
    app.copy_to_clipboard(code)
    app.notify(code, title="copied to the clipboard", timeout=20)
    return code
