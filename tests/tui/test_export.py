"""Taking a tensor home from the viewer: `e` on a card saves it, the palette copies the
Python that fetches it, and a failure leaves one sentence and no file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import cut_agent_argv, write_large_run
from textual.command import CommandPalette
from viewer_support import make_app, open_explore, screen_text, wait_for

from tvis.agent.client import LocalClient, PipeClient
from tvis.agent.protocol import AgentError
from tvis.store.reader import RunReader
from tvis.tui import export
from tvis.tui.widgets.tensor_card import TensorRef


def stored(run_dir: Path, tensor: int, batch: int | None = None, step: int | None = None):
    reader = RunReader(run_dir)
    return np.array((reader.batch(batch) if batch is not None else reader.step(step)).array(tensor))


@pytest.fixture
def exports(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "exports"
    monkeypatch.setenv(export.EXPORT_DIR_ENV, str(folder))
    return folder


def notified(app) -> str:
    """The notifications shown so far (toasts are drawn outside the screen's text)."""
    return "\n".join(n.message for n in app._notifications)


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


async def test_e_saves_the_card_under_the_cursor_as_npy_and_pt(run_dir: Path, exports: Path):
    torch = pytest.importorskip("torch")
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("i", "e")
        ref = page.inspector.cards[0].ref
        await wait_for(pilot, lambda: any(n.endswith(".pt") for n in files_in(exports)), "files")
        await wait_for(pilot, lambda: "saved" in notified(app), "the notification")
    npy, pt = sorted(exports.iterdir())
    expected = stored(run_dir, ref.entry["id"], batch=0)
    assert npy.suffix == ".npy" and npy.name.startswith(app.run_id)
    assert np.load(npy, allow_pickle=False).tobytes() == expected.tobytes()
    assert torch.equal(torch.load(pt, weights_only=True), torch.from_numpy(expected))


async def test_e_with_gradients_shown_saves_the_gradient(run_dir: Path, exports: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        ref = next(c.ref for c in page.inspector.cards if c.ref.entry.get("grad_entry"))
        page.inspector.current = [c.ref for c in page.inspector.cards].index(ref)
        await pilot.press("g", "i", "e")
        await wait_for(pilot, lambda: any(n.endswith(".npy") for n in files_in(exports)), "npy")
    (npy,) = [p for p in exports.iterdir() if p.suffix == ".npy"]
    assert ".grad_" in npy.name
    grad = stored(run_dir, ref.entry["grad_entry"]["id"], batch=0)
    assert np.load(npy).tobytes() == grad.tobytes()


async def test_palette_copies_python_that_fetches_the_same_tensor(run_dir: Path, exports: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        ref = page.inspector.cards[0].ref
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"copy python")
        await wait_for(pilot, lambda: "copy Python to fetch this" in screen_text(app), "the hit")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "tvis.connect" in app.clipboard, "the clipboard")
        code = app.clipboard
        assert "tvis.connect" in notified(app)  # shown as well as copied
    script = code + "import sys\nsys.stdout.buffer.write(x.tobytes())\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == stored(run_dir, ref.entry["id"], batch=0).tobytes()


async def test_e_on_a_parameter_in_step_mode_saves_its_update_exactly(run_dir: Path, exports: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("m")
        tree = page.calls.call_tree
        await wait_for(pilot, lambda: len(tree.root.children) == 2, "the step's rows")
        params = tree.root.children[1]
        params.expand()
        await pilot.pause()
        tree.move_cursor(params.children[0])
        await wait_for(pilot, lambda: len(page.inspector.cards) == 3, "weight, grad, update")
        await pilot.press("i", "j", "j", "e")
        name = page.inspector.selection.param["name"]
        await wait_for(pilot, lambda: any(n.endswith(".npy") for n in files_in(exports)), "npy")
    (npy,) = [p for p in exports.iterdir() if p.suffix == ".npy"]
    assert f"_s0_{name}_update_" in npy.name
    client = LocalClient(run_dir.parent)
    ids = [
        next(
            p for p in client.call("step", run=run_dir.name, step=s)["params"] if p["name"] == name
        )
        for s in (0, 1)
    ]
    before = stored(run_dir, ids[0]["weight"], step=0)
    after = stored(run_dir, ids[1]["weight"], step=1)
    assert np.array_equal(np.load(npy), after - before)


def test_values_not_kept_is_one_sentence_and_nothing_to_save():
    entry = {"id": 3, "shape": [4, 8], "dtype": "float32", "value": None, "stats": {}}
    ref = TensorRef("out", entry, "run", batch=0)
    with pytest.raises(export.ExportError) as e:
        export.item_for(ref, grad=False, call_name="model.inner", run_id="r")
    assert str(e.value) == (
        "model.inner out has statistics only; its values were not kept, so there is nothing "
        "to save."
    )


def test_a_dropped_connection_leaves_no_file(tmp_path: Path):
    root = tmp_path / "root"
    path, _ = write_large_run(root)
    run = path.relative_to(root).as_posix()
    client = PipeClient(cut_agent_argv(root, 5_000_000), name="cut agent")
    client.handshake()
    entry = client.call("tensor", run=run, batch=0, tensor=0)
    item = export.item_for(TensorRef("out", entry, run, batch=0), False, "encoder", path.name)
    folder = tmp_path / "exports"
    with client, pytest.raises(AgentError) as e:
        export.export(client, item, folder, with_pt=False)
    assert export.failure(e.value).startswith("export failed: the connection to cut agent dropped")
    assert files_in(folder) == []


def test_a_failed_write_leaves_no_partial_file(tmp_path: Path):
    def explode(temp: Path) -> None:
        temp.write_bytes(b"half a file")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        export.write_atomic(tmp_path / "x.npy", explode)
    assert files_in(tmp_path) == []


async def test_e_on_a_batch_tensor_of_kept_samples_says_so_in_the_name_and_the_notice(
    run_dir: Path, exports: Path
):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("i", "j", "e")  # ShapesCNN's input: the images, 3 of 32 kept
        ref = page.inspector.cards[1].ref
        value = ref.entry["value"]
        assert value["kept"] == "samples" and value["count"] < ref.entry["shape"][0]
        cut = f"first {value['count']} of {ref.entry['shape'][0]} samples"
        await wait_for(pilot, lambda: "saved" in notified(app), "the notification")
        assert f"({cut}: only those were kept)" in notified(app)
    npy = next(p for p in exports.iterdir() if p.suffix == ".npy")
    assert f"_first{value['count']}of{ref.entry['shape'][0]}samples_" in npy.name
    assert np.load(npy, allow_pickle=False).shape[0] == value["count"]


def test_an_exports_size_is_its_values_not_their_compressed_bytes(tmp_path: Path):
    root = tmp_path / "root"
    path, _ = write_large_run(root)
    run = path.relative_to(root).as_posix()
    entry = LocalClient(root).call("tensor", run=run, batch=0, tensor=0)
    item = export.item_for(TensorRef("out", entry, run, batch=0), False, "encoder", path.name)
    raw = int(np.prod(entry["shape"])) * np.dtype(entry["value"]["dtype"]).itemsize
    assert entry["value"]["nbytes"] != raw  # stored compressed
    assert item.nbytes == raw


def test_a_value_stored_rounded_says_so_once_and_an_exact_one_does_not():
    from tvis.tui.widgets.inspector import _rounded

    note = "values stored to 11 significant bits; run with --exact to keep them whole"
    assert export.rounded_note({"kept": "all", "bits": 10}) == note
    assert export.rounded_note({"kept": "all"}) is None and export.rounded_note(None) is None
    # a card says so when its values or its gradient's are rounded
    assert _rounded({"value": {"kept": "all"}, "grad_entry": {"value": {"bits": 10}}}) == note
    assert _rounded({"value": {"kept": "all"}}) is None
