"""The Loss page of a CTC speech model, driven with Pilot at 80×24: each sample's target
text and greedy transcription in the per-sample table, in place of p(target), and the
followed sample's pair in full with its ids."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import record_script
from viewer_support import goto_page, make_app, screen_text, wait_for

from tvis.tui.pages.loss import LossView, WorstTable

SCRIPT = Path(__file__).resolve().parents[1] / "wild" / "scripts" / "ctc_speech" / "train.py"


@pytest.fixture(scope="module")
def ctc_run(tmp_path_factory) -> Path:
    return record_script(tmp_path_factory.mktemp("ctc runs"), SCRIPT.read_text(), "--steps", "1")


async def test_loss_page_of_a_ctc_model_shows_targets_and_transcriptions_as_text(ctc_run):
    app = make_app(ctc_run)
    async with app.run_test(size=(80, 24)) as pilot:
        await goto_page(pilot, "loss")
        view = app.screen.query_one(LossView)
        await wait_for(pilot, lambda: view.samples and view.detail, "the batch's samples")
        table = view.query_one(WorstTable)
        assert [c.label for c in table.columns] == ["", "sample", "target", "predicted", "loss"]
        text = screen_text(app)
        assert "p(target)" not in text
        rows = {r["sample"]: r for r in view.samples}
        assert [rows[i]["target_text"] for i in range(4)] == ["yes", "no", "up", "down"]
        lines = text.splitlines()
        for row in rows.values():  # each sample's line: its number, target, prediction
            target, pred = f"“{row['target_text']}”", f"“{row['pred_text']}”"
            assert any(
                line.split()[-4:-1] == [str(row["sample"]), target, pred] for line in lines
            ), (row, text)
        assert "samples transcribed exactly" in text
        await pilot.press("]")
        await wait_for(pilot, lambda: app.sample == 1, "sample 1 followed")
        note = str(view.query_one("#loss-note").render())
        assert "sample 1" in note and "“no”" in note and "16 17" in note  # n, o
        assert app.internal_errors == []


def test_long_texts_share_a_narrow_table_and_the_loss_stays_in_view():
    from tvis.tui.pages.loss import fit_texts

    widths = [1, 6, 48, 48, 5]  # two 48-character texts
    assert fit_texts(widths, 200) == widths  # room for both
    fitted = fit_texts(widths, 44)
    assert sum(w + 2 for w in fitted) <= 44 and fitted[2] == fitted[3] == 11
    fitted = fit_texts([1, 6, 48, 9, 5], 44)  # a short prediction keeps its width
    assert fitted[3] == 9 and sum(w + 2 for w in fitted) == 44
