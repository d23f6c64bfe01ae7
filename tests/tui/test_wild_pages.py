"""The viewer's pages on scripts written the way public code is (tests/wild/scripts), read as
a user reads them: a LLaMA-style model's blocks told apart in narrow name columns, a
word-level language model's input shown as words, token ids where no vocabulary decodes
them (never the word "None")."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from support import run_tvis
from viewer_support import goto_page, make_app, screen_text, wait_for

SCRIPTS = Path(__file__).resolve().parents[1] / "wild" / "scripts"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """``name`` recorded once (`tvis run --steps 1`); the folder of its runs."""
    runs: dict[str, Path] = {}

    def record(name: str) -> Path:
        if name not in runs:
            folder = tmp_path_factory.mktemp(name)
            shutil.copytree(SCRIPTS / name, folder, dirs_exist_ok=True)
            result = run_tvis("run", "--steps", "1", "--out", "runs", "train.py", cwd=folder)
            assert result.returncode == 0, result.stderr
            runs[name] = folder / "runs"
        return runs[name]

    return record


def _names(text: str, leaf: str) -> list[str]:
    """Every name on the screen that ends in ``leaf`` (``…0.attent.wq``, ``layers.1.attention.wq``)."""
    return re.findall(rf"\S*{re.escape(leaf)}\b", text)


async def test_a_llama_style_models_blocks_stay_apart_in_replay_and_weights(recorded):
    app = make_app(recorded("gqa_llama"))
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "replay")
        text = await wait_for(
            pilot, lambda: "norm" in (t := screen_text(app)) and t, "Replay's layer stack"
        )
        wq = _names(text, "wq")
        assert len(wq) == 2 and len(set(wq)) == 2, wq  # layers.0 and layers.1, told apart
        await goto_page(pilot, "weights")
        text = await wait_for(
            pilot,
            lambda: "output.weight" in (t := screen_text(app)) and t,
            "the Weights list",
        )
        wk = _names(text.split("\n", 3)[3], "wk.weight")  # the list's rows, below its header
        assert len(wk) >= 2 and len(set(wk[:2])) == 2, wk


async def test_a_word_models_input_reads_as_words_and_ids_stay_ids_without_a_vocabulary(
    recorded,
):
    app = make_app(recorded("lstm_idx2word_dict"))
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "replay")
        text = await wait_for(
            pilot, lambda: "target" in (t := screen_text(app)) and t, "Replay's input card"
        )
        assert "the cat sat on the mat" in text  # the words, spaced as the vocabulary joins
        assert "thecatsat" not in text
    app = make_app(recorded("gqa_llama"))
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "replay")
        text = await wait_for(
            pilot, lambda: "target" in (t := screen_text(app)) and t, "Replay's input card"
        )
        assert "None" not in text
        assert re.search(r"target (\d+ ){3}", text), text  # the target's ids, like the input's
        await goto_page(pilot, "loss")
        await wait_for(  # the predicted ids under the token strip, as the targets show
            pilot,
            lambda: re.search(r"predicted (\d+ ){3}", screen_text(app)),
            "the predicted ids",
        )


@pytest.mark.parametrize(
    ("name", "width", "shown"),
    [
        ("layers.0.attention.wk.weight", 19, "…0.attent.wk.weight"),
        ("layers.0.attention.wq", 12, "…0.attent.wq"),
        ("layers.0.ffn_norm", 12, "…0.ffn_norm"),
        ("transformer.h.0.attn.c_proj", 12, "…0.at.c_proj"),  # told from mlp.c_proj
        ("transformer.h.0.mlp.c_proj", 12, "…0.ml.c_proj"),
        ("model.layers.31.self_attn.q_proj.weight", 19, "…31.s.q_proj.weight"),
        ("encoder.layers.3.blocks.2.mlp.fc1.weight", 19, "…3.2.mlp.fc1.weight"),
        ("layer1.0.conv1.weight", 19, "…er1.0.conv1.weight"),  # a plain cut keeps the 0
        ("tok_embeddings.weight", 19, "…_embeddings.weight"),  # no index: a plain cut
        ("layers.0.feed_forward.w1", 5, "…0…w1"),
        ("a.b", 1, "…"),
    ],
)
def test_a_dotted_name_keeps_its_block_indices_when_clipped(name, width, shown):
    from tvis.tui.fmt import clip_start

    assert clip_start(name, width) == shown


async def test_a_gans_embeddings_are_coloured_by_its_real_or_fake_target_and_offer_no_token_search(
    recorded,
):
    app = make_app(recorded("dcgan"))
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "insights")
        await pilot.press("e")
        text = await wait_for(
            pilot,
            lambda: "PCA of" in (t := screen_text(app)) and "coloured by" in t and t,
            "the embeddings' legend",
        )
        # the discriminator's real/fake targets (BCELoss) colour the points, counted per class
        legend = text.split("coloured by", 1)[1]
        assert "class" in legend and "■ " in legend
        assert "finds a token" not in text and " rows" not in text


async def test_a_diffusion_models_noise_loss_lists_each_samples_loss_without_columns_of_dashes(
    recorded,
):
    """An MSE on predicted noise has no class and no probability of a target: the Loss
    page's table and Explore's samples list sample and loss, not columns of "—" on every
    row (target, prediction, p(target), −log p)."""
    from tvis.tui.pages.loss import WorstTable
    from tvis.tui.widgets.samples_view import SampleTable

    app = make_app(recorded("ddpm_noise"))
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "loss")
        worst = app.screen.query_one(WorstTable)
        await wait_for(pilot, lambda: len(worst.rows) == 8, "each sample's loss")
        await goto_page(pilot, "explore")
        await pilot.press("a")
        samples = app.screen.query_one(SampleTable)
        await wait_for(pilot, lambda: samples.row_count == 8, "the samples")
        for table in (worst, samples):
            assert [column.label for column in table.columns] == ["", "sample", "loss"]
            assert all(str(cell).strip() not in ("", "—") for cell in table.cells(0)[1:])
        assert "p(target)" not in screen_text(app)
        assert app.internal_errors == []


async def _result_card(pilot, shown: str) -> str:
    """Replay on the first batch's loss, once its result card shows ``shown``: the screen."""
    app = pilot.app
    await goto_page(pilot, "replay")
    page = app.screen
    await wait_for(pilot, lambda: page.recording and page.current_event(), "the events")
    rec = page.recording
    page.seek(next(s for s in range(rec.total) if rec.event(s).kind == "loss"))
    return await wait_for(
        pilot, lambda: shown in (t := screen_text(app)) and t, f"{shown} on the result card"
    )


async def test_a_diffusion_models_replay_result_names_no_prediction_it_has_not(recorded):
    """Replay's result card of a noise MSE: the sample's loss, no "predicted None" and no
    "p(target) —" (a classifier's lines)."""
    app = make_app(recorded("ddpm_noise"))
    async with app.run_test(size=(120, 40)) as pilot:
        text = await _result_card(pilot, "sample loss")
        assert "None" not in text and "p(target)" not in text and "predicted" not in text
        assert app.internal_errors == []


async def test_a_language_model_without_a_vocabulary_shows_its_predicted_ids_not_none(recorded):
    """Replay's result card of a token model whose run has no vocabulary: the predicted
    token ids, as its target shows them, never "predicted None"."""
    app = make_app(recorded("gqa_llama"))
    async with app.run_test(size=(120, 40)) as pilot:
        text = await _result_card(pilot, "token accuracy")
        assert "None" not in text
        assert re.search(r"predicted\s+\d+ \d+ \d+", text), text
        assert app.internal_errors == []


async def test_a_script_without_batches_says_no_sample_count_rather_than_none(recorded):
    """PyTorch's autograd.Function tutorial feeds whole tensors, no batch of samples:
    Explore's samples pane names the batch and says nothing was recorded per sample."""
    app = make_app(recorded("autograd_function"))
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "explore")
        await pilot.press("a")
        text = await wait_for(
            pilot, lambda: "were not recorded" in (t := screen_text(app)) and t, "the pane"
        )
        assert "None" not in text and "batch 0 · enter follows a sample" in text
        assert app.internal_errors == []
