"""`tvis tui` over a folder holding corrupt runs: they are listed as unreadable, the good
run still opens, and nothing raises."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgpack
from viewer_support import make_app, open_explore, wait_for

from tvis.tui.run_picker import RunPicker


async def test_corrupt_runs_listed_unreadable_and_the_good_run_opens(recorded_run: Path, tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(recorded_run, root / recorded_run.name)
    status_list = root / "20000101-000000_train_aaaaaa"
    shutil.copytree(recorded_run, status_list)
    meta = json.loads((status_list / "meta.json").read_text())
    (status_list / "meta.json").write_text(json.dumps({**meta, "status": ["x"]}))
    batches_text = root / "20000101-000000_train_bbbbbb"
    shutil.copytree(recorded_run, batches_text)
    index = msgpack.unpackb((batches_text / "run.msgpack").read_bytes(), strict_map_key=False)
    (batches_text / "run.msgpack").write_bytes(msgpack.packb({**index, "batches": "nope"}))

    app = make_app(root)
    async with app.run_test(size=(120, 40)) as pilot:
        picker = await wait_for(
            pilot, lambda: isinstance(app.screen, RunPicker) and app.screen, "picker"
        )
        await wait_for(pilot, lambda: len(picker.runs) == 3, "three runs listed")
        unreadable = [r for r in picker.runs if r.get("status") == "unreadable"]
        assert len(unreadable) == 2
        assert all(r["error"].endswith(".") for r in unreadable)
        await pilot.press("enter")  # the newest: the good run
        await open_explore(pilot)
        assert app.run_id == recorded_run.name
        assert app.internal_errors == []
