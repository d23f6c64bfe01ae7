"""The Insights page over runs recorded from the three examples: Attention (ViT patches with
[CLS], the text model's characters), Grad-CAM (image classifier), Embeddings (all three),
the views a run cannot feed (absent, with the reason), and the page in a real 80×24 tmux."""

from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np
import pytest
from test_terminal import STRAY_ESCAPES, TVIS, Tmux
from viewer_support import make_app, open_explore, screen_text, wait_for

from tvis.store.reader import RunReader
from tvis.tui import fmt
from tvis.tui.pages.insights import ABSENT


async def _open_insights(pilot, view: str):
    """Open the Insights page (second tab) and wait for ``view``'s first reply."""
    app = pilot.app
    await open_explore(pilot)
    await pilot.press(_insights_key(app))
    page = await wait_for(
        pilot, lambda: app.current_mode == "insights" and app.screen.found, "the Insights page"
    )
    page = app.screen
    key = {"attention": "a", "gradcam": "c", "embeddings": "e"}[view]
    await pilot.press(key)
    widget = await wait_for(pilot, lambda: page.current_view(), f"the {view} view")
    await wait_for(pilot, lambda: widget.reply, f"the {view} view's first reply")
    return page, widget


def _insights_key(app) -> str:
    """The number key of the Insights tab (its place among the pages the run shows)."""
    return str([p.id for p in app.pages()].index("insights") + 1)


def _recorded_attention(run: Path, batch: int, layer: int) -> np.ndarray:
    chunk = RunReader(run).batch(batch)
    found = chunk.record["attention"][layer]
    return chunk.array(found["tensor"])


# -- Attention --------------------------------------------------------------------------------


async def test_vit_attention_has_cls_and_patch_axes_and_paints_where_cls_looks(vit_run):
    app = make_app(vit_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page, view = await _open_insights(pilot, "attention")
        assert view.reply["shape"] == [65, 65] and view.reply["tokens"][:2] == ["[CLS]", "p0"]
        assert view.reply["grid"] == {"h": 8, "w": 8, "offset": 1}
        overlay = page.query_one("#attention-overlay")
        await wait_for(pilot, lambda: overlay.has_data, "the [CLS] overlay")
        text = await wait_for(  # the caption is on screen at the layout after the picture
            pilot, lambda: "where [CLS] looks" in screen_text(app) and screen_text(app), "caption"
        )
        assert "query 0 '[CLS]'" in text
        await pilot.press("j", "j")  # the cursor's row picks the query patch
        await wait_for(pilot, lambda: "where p1 looks" in screen_text(app), "the p1 overlay")
        assert app.internal_errors == []


async def test_vit_rollout_goes_through_every_layer(vit_run):
    app = make_app(vit_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page, view = await _open_insights(pilot, "attention")
        await pilot.press("o")
        await wait_for(pilot, lambda: view.reply.get("rollout"), "the rollout")
        rows = np.asarray(view.reply["map"], dtype=np.float64).sum(axis=1)
        np.testing.assert_allclose(rows, 1.0, rtol=1e-4)  # rollout rows stay distributions
        assert "rollout through every layer" in screen_text(app)


async def test_text_lm_attention_has_characters_on_both_axes_and_a_visible_causal_mask(lm_run):
    app = make_app(lm_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page, view = await _open_insights(pilot, "attention")
        tokens = view.reply["tokens"]
        assert tokens[0] == "<bos>" and all(len(t) == 1 for t in tokens[1:] if t != "<pad>")
        assert view.reply["causal"]
        text = screen_text(app)
        assert "<bos>" in text and "masked" in text  # key axis label and the mask's legend
        picture = page.query_one("#attention-picture")
        assert picture._content.masked is not None and picture._content.masked[0, 1]


async def test_cursor_reads_the_recorded_weight_and_both_tokens(lm_run):
    app = make_app(lm_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page, view = await _open_insights(pilot, "attention")
        await pilot.press("right_curly_bracket")  # head 0
        await wait_for(pilot, lambda: view.reply.get("head") == 0, "head 0")
        await pilot.press("j", "j", "j", "l", "l")
        assert view.cursor == (3, 2)
        batch = app.batch_info["index"]
        recorded = _recorded_attention(lm_run, batch, 0)[app.sample, 0, 3, 2]
        assert view.cursor_value == float(recorded)
        tokens = view.reply["tokens"]
        line = str(page.query_one("#attention-cursor").render())
        assert fmt.num(float(recorded), 6) in line
        assert f"query 3 {tokens[3]!r}" in line.replace("␣", " ")
        assert f"key 2 {tokens[2]!r}" in line.replace("␣", " ")


async def test_heads_grid_orders_heads_by_entropy(vit_run):
    app = make_app(vit_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page, view = await _open_insights(pilot, "attention")
        await pilot.press("w")
        heads = page.query_one("#attention-heads-picture")
        await wait_for(pilot, lambda: heads.has_data, "the heads")

        def captions() -> list[str]:
            return [c for c in screen_text(app).split() if c.startswith("H=")]

        await wait_for(pilot, lambda: len(captions()) == 4, "the heads' captions on screen")
        entropies = [float(c[2:]) for c in captions()]
        assert len(entropies) == 4 and entropies == sorted(entropies)


# -- Grad-CAM ---------------------------------------------------------------------------------


async def test_gradcam_per_layer_and_class_names_the_class_and_p(recorded_run):
    app = make_app(recorded_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page, view = await _open_insights(pilot, "gradcam")
        reply = view.reply
        assert reply["layer"] == view.layer_names[-1] and reply["which"] == "pred"
        assert f"predicted: {reply['class_name']} (p = {fmt.num(reply['p'])})" in screen_text(app)
        await pilot.press("t")
        await wait_for(pilot, lambda: view.reply["which"] == "true", "the true class")
        assert f"true: {view.reply['class_name']}" in screen_text(app)
        await pilot.press("less_than_sign")
        await wait_for(pilot, lambda: view.reply["layer"] == view.layer_names[-2], "a layer up")
        assert page.query_one("#gradcam-overlay").has_data


async def test_gradcam_grid_of_samples_and_strip_of_layers(recorded_run):
    app = make_app(recorded_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page, view = await _open_insights(pilot, "gradcam")
        await pilot.press("m")
        await wait_for(pilot, lambda: page.query("#gradcam-grid .thumb Picture"), "the grid")
        assert "s0 " in screen_text(app) and "samples of one layer" in screen_text(app)
        await pilot.press("m")
        thumbs = await wait_for(
            pilot,
            lambda: (
                len(page.query("#gradcam-grid Vertical.thumb")) == len(view.layer_names)
                and page.query("#gradcam-grid Vertical.thumb")
            ),
            "one cell per conv layer",
        )
        assert len(thumbs) == 3 and "every layer" in screen_text(app)
        await wait_for(pilot, lambda: not view.cue.waiting, "the loading cue gone once drawn")
        assert "loading Grad-CAM maps" not in screen_text(app)


async def test_gradcam_grid_says_it_is_loading_while_its_maps_take_long(recorded_run):
    app = make_app(recorded_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page, view = await _open_insights(pilot, "gradcam")
        view.mode = "samples"
        view.cue.start()  # as reload does when it asks for a grid ...
        await pilot.pause(0.5)  # ... and the answer has not come (nothing was asked here)
        assert "loading Grad-CAM maps …" in screen_text(app)
        view.reload()
        await wait_for(pilot, lambda: page.query("#gradcam-grid .thumb Picture"), "the grid")
        await wait_for(pilot, lambda: "loading Grad-CAM maps" not in screen_text(app), "no cue")


# -- absent views -----------------------------------------------------------------------------


async def test_views_a_run_cannot_feed_say_why(recorded_run, vit_run):
    app = make_app(recorded_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_insights(pilot, "gradcam")
        await pilot.press("a")
        # The agent's reason (this model has no attention at all), not the generic one.
        why = "holds no attention weights: its model made no scaled_dot"
        await wait_for(pilot, lambda: why in screen_text(app), "why")
        assert "a Attention (absent)" in screen_text(app)
    app = make_app(vit_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_insights(pilot, "attention")
        await pilot.press("c")
        await wait_for(pilot, lambda: ABSENT["gradcam"][:40] in screen_text(app), "why")


# -- Embeddings -------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["recorded_run", "vit_run", "lm_run"])
async def test_embeddings_scatter_every_sample_with_legend_and_variance(which, request):
    run = request.getfixturevalue(which)
    app = make_app(run)
    async with app.run_test(size=(120, 40)) as pilot:
        page, view = await _open_insights(pilot, "embeddings")
        reply = view.reply
        batches = [b for b in app.run_info["batches"] if not b.get("light")]
        assert reply["total"] == sum(b["batch_size"] for b in batches)
        scatter = page.query_one("#embeddings-scatter")
        assert len(scatter.points) == reply["total"]
        text = screen_text(app)
        explained = np.asarray(reply["explained"]) * 100
        assert f"PC1 {explained[0]:.1f}%" in text and reply["label_kind"] in text
        await pilot.press("less_than_sign")  # one layer shallower
        await wait_for(pilot, lambda: view.reply["layer"] == reply["layers"][-2], "depth - 1")


async def test_choosing_a_point_follows_its_sample_everywhere(recorded_run):
    app = make_app(recorded_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page, view = await _open_insights(pilot, "embeddings")
        assert view.selected is not None  # the followed sample is a point
        await pilot.press("j", "j", "j")
        chosen = view.selected
        assert app.sample == int(view.reply["sample"][chosen])
        assert app.batch_info["index"] == int(view.reply["batch"][chosen])
        await pilot.press("right_square_bracket")  # the app's next sample moves the point
        await wait_for(
            pilot, lambda: int(view.reply["sample"][view.selected]) == app.sample, "follow"
        )


async def test_embedding_table_is_labelled_by_token_and_searchable(lm_run):
    app = make_app(lm_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page, view = await _open_insights(pilot, "embeddings")
        await pilot.press("m")
        await wait_for(pilot, lambda: view.reply.get("kind") == "table", "the embedding table")
        assert view.reply["vocab"] and "<bos>" in view.reply["tokens"]
        await pilot.press("slash", "e")
        await wait_for(pilot, lambda: view.hits.size, "a search hit")
        hit = int(view.hits[0])
        assert view.reply["tokens"][hit] == "e" and view.selected == hit
        scatter = page.query_one("#embeddings-scatter")
        y, x = (int(v) for v in scatter._pixels[hit])
        drawn = "".join(segment.text for segment in scatter.render_line(y // 2))
        assert drawn[x] == "e"  # the hit is written as its token where its point is
        assert f"row {int(view.reply['rows'][hit])} 'e'" in screen_text(app)


# -- coming back ------------------------------------------------------------------------------


async def test_keys_still_work_after_coming_back_to_insights(vit_run):
    """Insights, another page, Insights again: the page's hidden search box must not take
    the focus (it would swallow every key, the page numbers and q included)."""
    app = make_app(vit_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_insights(pilot, "attention")
        insights = _insights_key(app)
        for away in ("1", "2"):  # Replay, then Explore, and back each time
            await pilot.press(away)
            await wait_for(pilot, lambda: app.current_mode != "insights", f"page {away}")
            await pilot.press(insights)
            await wait_for(pilot, lambda: app.current_mode == "insights", "Insights again")
            assert app.screen.focused is None or app.screen.focused.display
        await pilot.press("1")
        await wait_for(pilot, lambda: app.current_mode == "replay", "Replay after Insights")
        await pilot.press(insights, "q")
        await wait_for(pilot, lambda: app.return_code == 0, "q to quit")


# -- a real terminal --------------------------------------------------------------------------


def test_insights_page_reads_at_80x24_in_tmux(lm_run, tmp_path):
    term = Tmux(tmp_path, f"{TVIS} tui {shlex.quote(str(lm_run))}")
    try:
        term.tmux("resize-window", "-t", "main", "-x", "80", "-y", "24")
        term.wait("Replay")  # the viewer is up, on its first page
        term.keys("5")  # Replay, Explore, Loss, Weights, Insights
        screen = term.wait("weight")
        assert "Attention" in screen and "query 0 '<bos>'" in screen and "<bos>" in screen
        assert all(len(line) <= 80 for line in screen.splitlines())
        term.keys("e")
        screen = term.wait("PC1")
        term.keys("q")
        screen = term.wait("TVIS-EXIT=0")
        assert "Traceback" not in screen and not STRAY_ESCAPES.search(screen), screen
    finally:
        term.close()


def test_insights_twice_in_tmux_still_answers_keys(vit_run, tmp_path):
    term = Tmux(tmp_path, f"{TVIS} tui {shlex.quote(str(vit_run))}")
    try:
        term.wait("paused")  # Replay, the first page
        term.keys("5")
        term.wait("a Attention")
        term.keys("1")
        term.wait("paused")
        term.keys("5")
        term.wait("a Attention")
        term.keys("1")  # ignored before: a hidden search box had the focus
        screen = term.wait("paused")
        assert "a Attention" not in screen
        term.keys("5", "q")
        screen = term.wait("TVIS-EXIT=0")
        assert "Traceback" not in screen, screen
    finally:
        term.close()
