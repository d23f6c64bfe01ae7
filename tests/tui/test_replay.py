"""The Replay page over example recordings (image classifier, ViT, text LM): every control,
the scrubber, sample following, the layer stack, each layer view, and recordings that lack
something (no kept samples, a run still being written, no picture input)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from rich.color import Color
from rich.text import Text
from support import record_example, record_script
from viewer_support import make_app, screen_text, wait_for

from tvis.agent.replies import replay_query
from tvis.tui import colors
from tvis.tui.picture import Picture
from tvis.tui.replay_model import SPEEDS
from tvis.tui.widgets.layer_stack import LayerStack
from tvis.tui.widgets.layer_views import LayerViews, NeuronsView, OnImageView, StatsView
from tvis.tui.widgets.replay_bar import Scrubber
from tvis.tui.widgets.replay_cards import InputCard, ResultCard


@pytest.fixture(scope="module")
def no_samples_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("no samples")
    return record_example(folder, "image_classifier", "--steps", "1", "--max-bytes", "1K")


async def open_replay(pilot):
    """The Replay page once its recording is loaded and the first frame drawn."""
    app = pilot.app
    await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page first")
    page = app.screen
    await wait_for(pilot, lambda: page.recording and page.current_event(), "the first event")
    return page


async def seek_to(pilot, page, name: str, kind: str = "layer"):
    """Seek to the first event of ``kind`` named ``name``; the event."""
    rec = page.recording
    seq = next(
        s for s in range(rec.total) if (e := rec.event(s)) and e.kind == kind and e.name == name
    )
    page.seek(seq)
    await pilot.pause()
    return rec.event(seq)


async def picture_drawn(pilot, widget) -> None:
    await wait_for(
        pilot, lambda: widget.query_one(Picture).has_data, f"{type(widget).__name__}'s picture"
    )


# -- opening and the transport -----------------------------------------------------------------


async def test_the_event_list_is_asked_for_as_the_run_opens_and_sent_once(run_dir: Path):
    """Replay's event list (the agent's one long answer on the first page) is asked for as
    soon as the run is loaded, while the page is being built; the page's own request finds
    it on its way instead of sending a second one."""
    import traceback

    app = make_app(run_dir)
    dial = app.link.connector
    asked: list[bool] = []  # per `replay` request: whether it came from the prefetch

    class Spy:
        def __init__(self, client):
            self.client, self.on_lost = client, None

        def call(self, method, **params):
            if method == "replay":
                frames = [f.name for f in traceback.extract_stack()]
                asked.append("_prefetch_replay" in frames)
            return self.client.call(method, **params)

        def __getattr__(self, name):
            return getattr(self.client, name)

    app.link.connector = lambda: Spy(dial())
    async with app.run_test(size=(120, 40)) as pilot:
        await open_replay(pilot)
        assert asked == [True]
        assert app.internal_errors == []


async def test_the_event_list_is_asked_while_the_first_page_build_waits(run_dir: Path):
    """The event list goes to the agent while Replay's build is still waiting — as it does
    on a real start, on the warm thread's imports of numpy and the page's modules: the
    build here holds the app's thread until the request is on its way (or 2 s pass). A
    Textual worker would start only once the build let the event loop turn."""
    import threading
    import time

    from tvis.tui.app import TvisApp

    app = make_app(run_dir)
    dial = app.link.connector
    asked = threading.Event()
    waited: list[bool] = []  # per page built: whether the event list was asked meanwhile

    class Spy:
        def __init__(self, client):
            self.client, self.on_lost = client, None

        def call(self, method, **params):
            if method == "replay":
                asked.set()
            return self.client.call(method, **params)

        def __getattr__(self, name):
            return getattr(self.client, name)

    def blocked_build(spec):
        if not waited:
            deadline = time.monotonic() + 2
            while not asked.is_set() and time.monotonic() < deadline:
                time.sleep(0.005)  # the thread holds the loop, as a blocked import does
            waited.append(asked.is_set())
        return TvisApp._build_page(app, spec)

    app.link.connector = lambda: Spy(dial())
    app._build_page = blocked_build
    async with app.run_test(size=(120, 40)) as pilot:
        await open_replay(pilot)
        assert waited == [True]
        assert app.internal_errors == []


async def test_the_first_frame_is_asked_for_with_the_event_list_and_sent_once(run_dir: Path):
    """What Replay's first frame shows (the sample's pictures and row, the layers'
    thumbnails) is asked for as soon as the event list comes, while the page is built: the
    app asks exactly what the cards and the layer stack then ask, each reaches the agent
    once, and the page draws the answers from the cache."""
    import threading

    from tvis.tui.data import _freeze
    from tvis.tui.pages.replay import opening_requests

    app = make_app(run_dir)
    dial = app.link.connector
    sent: list[tuple[str, tuple, bool]] = []  # (method, params, from the app's prefetch)
    first_frame = ("pipeline", "sample_table", "thumbs")

    class Spy:
        def __init__(self, client):
            self.client, self.on_lost = client, None

        def call(self, method, **params):
            if method in first_frame:  # the prefetch asks from threads of its own
                ahead = threading.current_thread().name.startswith("tvis-prefetch")
                sent.append((method, _freeze(params), ahead))
            return self.client.call(method, **params)

        def __getattr__(self, name):
            return getattr(self.client, name)

    app.link.connector = lambda: Spy(dial())
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        stack = page.query_one(LayerStack)
        await wait_for(pilot, lambda: stack._thumbs[False], "the layers' thumbnails")
        await wait_for(pilot, lambda: page.query_one(InputCard).pipeline, "the input card")
        answer = app.data.call("replay", **replay_query(app.run_name, 0, "layer", []))
        asked = {(m, _freeze(p)) for m, p in opening_requests(app.run_name, 0, 0, answer)}
        assert {m for m, _ in asked} == set(first_frame)
        assert {(m, p) for m, p, _ in sent} == asked  # the page asked what the app did
        assert len(sent) == len(asked)  # each once
        assert any(ahead for *_, ahead in sent)
        assert app.internal_errors == []


async def test_replay_is_the_default_page_and_starts_at_the_first_batch(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        text = screen_text(app)
        assert "1 Replay" in text and "paused" in text and f"1/{page.recording.total}" in text
        assert "batch 0 loads" in text
        await wait_for(pilot, lambda: page.query_one(InputCard).pipeline, "the input card")
        assert app.internal_errors == []


async def test_space_plays_and_pauses(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await pilot.press("space")
        assert page.playing and "playing" in screen_text(app)
        await wait_for(pilot, lambda: page.cursor >= 3, "playback moving on")
        await pilot.press("space")
        stopped = page.cursor
        await pilot.pause(0.6)
        assert not page.playing and page.cursor == stopped


async def test_arrows_step_one_event_and_n_jumps_by_phase(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await pilot.press("right", "right")
        assert page.cursor == 2
        await pilot.press("left")
        assert page.cursor == 1
        await pilot.press("n")
        forward = next(r for r in page.recording.outline if r["phase"] == "forward")
        assert page.cursor == forward["start"] and page.current_event().phase == "forward"
        await pilot.press("n")
        assert page.current_event().phase == "loss"
        await pilot.press("N")
        assert page.cursor == forward["start"]
        await pilot.press("end")
        assert page.cursor == page.recording.total - 1
        await pilot.press("home")
        assert page.cursor == 0


async def test_step_size_cycles_layer_call_phase_and_batch(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        layer_total = page.recording.total
        await pilot.press("z")
        assert page.size_name == "call"
        await wait_for(pilot, lambda: page.recording.detail == "call", "the every-call events")
        assert page.recording.total > layer_total  # containers and the model call join
        await pilot.press("z")
        assert page.size_name == "phase"
        await pilot.press("right")
        assert page.cursor == page.recording.outline[1]["start"]
        await pilot.press("z", "right")
        assert page.size_name == "batch"
        assert page.current_event().batch == page.recording.batches[1]["batch"]
        assert page.current_event().kind == "batch"
        assert "step batch" in screen_text(app)


async def test_plus_and_minus_change_the_speed(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        before = page.speed
        await pilot.press("plus")
        assert page.speed == before + 1
        assert f"{SPEEDS[page.speed]}/s" in screen_text(app)
        await pilot.press("minus", "minus")
        assert page.speed == before - 1


async def test_the_scrubber_spans_the_recording_and_a_click_seeks(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        scrubber = page.query_one(Scrubber)
        lines = str(scrubber.render()).splitlines()
        assert "b0" in lines[1] and "b1" in lines[1]  # batch starts ticked under the bar
        width = min(scrubber.size.width - 2, page.recording.total * 4)
        await pilot.click(Scrubber, offset=(1 + width // 2, 0))
        half = page.recording.total // 2
        assert abs(page.cursor - half) <= page.recording.total // width + 1


async def test_playing_to_the_end_stops_and_says_so(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        for _ in range(len(SPEEDS)):
            await pilot.press("plus")
        page.seek(page.recording.total - 4)
        await pilot.press("space")
        await wait_for(pilot, lambda: page.ended, "the end of the recording")
        assert not page.playing and "end of the recording" in screen_text(app)
        for _ in range(len(SPEEDS)):
            await pilot.press("minus")  # slowest: the restart is seen before playback moves on
        await pilot.press("space")  # playing again starts over
        assert page.playing and page.cursor < page.recording.total // 2


async def test_enter_opens_the_current_layer_in_explore(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        event = await seek_to(pilot, page, "features.1.0")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current_mode == "explore", "the Explore page")
        explore = await wait_for(pilot, app.explore_page, "Explore built")
        await wait_for(
            pilot,
            lambda: explore.selection and explore.selection.call == event.call,
            "the layer selected in Explore",
        )


# -- sample following, cards and the layer stack ------------------------------------------------


async def test_brackets_follow_another_sample_everywhere(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await seek_to(pilot, page, "features.0.0")
        await pilot.press("right_square_bracket")
        assert app.sample == 1
        await wait_for(pilot, lambda: page.recording.sample == 1, "events for sample 1")
        view = page.query_one(OnImageView)
        await wait_for(pilot, lambda: view.shown_layer and view.shown_layer.sample == 1, "the view")
        assert page.current_event().name == "features.0.0"  # the same moment, another sample
        card = page.query_one(InputCard)
        await wait_for(pilot, lambda: card.pipeline and card.pipeline["sample"] == 1, "its input")


async def test_the_layer_stack_lights_forward_and_switches_to_gradients(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        stack = page.query_one(LayerStack)
        await seek_to(pilot, page, "features.1.0")
        await wait_for(pilot, lambda: stack._thumbs[False], "activation thumbnails")
        _, reached, arrived = stack._state()
        assert reached == 4 and arrived == -1
        assert "░" * 8 in str(Text("\n").join(stack.lines()))  # no gradient bars before backward
        await seek_to(pilot, page, "features.1.0", kind="grad")
        await wait_for(pilot, lambda: stack._thumbs[True], "gradient thumbnails")
        _, reached, arrived = stack._state()
        assert reached == len(stack.forward_layers) and arrived > 0
        # ‖dL/d(output)‖ bars of the layers gradients reached
        assert "█" in str(Text("\n").join(stack.lines()))


async def test_a_step_of_the_player_draws_only_the_stack_rows_it_changes(run_dir: Path):
    """From one layer to the next, two rows change (the one left, the one reached and lit);
    the stack's other lines are drawn from what was made, the heading in its muted colour."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        stack = page.query_one(LayerStack)
        await seek_to(pilot, page, "features.1.0")
        await wait_for(pilot, lambda: stack._thumbs[False], "activation thumbnails")
        await pilot.pause(0.2)
        drawn = []
        draw = stack._draw
        stack._draw = lambda key: (drawn.append(key), draw(key))[1]
        await pilot.press("l")
        await wait_for(pilot, lambda: page.current_event().name == "features.1.1", "a step")
        await pilot.pause(0.2)
        assert sorted(key[1] for key in drawn) == [4, 5]  # features.1.0 and features.1.1
        heading = [s for s in stack.render_line(0) if s.text.strip()]
        assert heading and all(s.style.color == Color.parse(colors.MUTED) for s in heading)
        assert app.internal_errors == []


async def test_result_card_appears_at_the_loss_with_prediction_and_losses(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        result = page.query_one(ResultCard)
        assert not result.reached
        await pilot.press("n", "n")
        assert page.current_event().phase == "loss"
        await wait_for(pilot, lambda: result.table, "the sample's result")
        text = screen_text(app)
        assert "predicted" in text and "p(target)" in text and "batch loss" in text
        await pilot.press("n", "n")
        assert page.current_event().kind == "update"
        text = screen_text(app)
        assert "‖Δw‖/‖w‖" in text and "lr 0.05" in text
        # An update is of a training batch: its input stays, and it opens nothing.
        assert "sample 0 · as the model" in text and "light group" not in text
        total = page.recording.total
        await pilot.press("o")
        await pilot.pause()
        assert page.recording.total == total and page.expanded == set()


# -- the layer views -----------------------------------------------------------------------------


async def test_on_image_paints_a_conv_layer_and_lists_values_at_a_clicked_place(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await seek_to(pilot, page, "features.0.0")
        view = page.query_one(OnImageView)
        await picture_drawn(pilot, view)
        text = await wait_for(
            pilot, lambda: "mean over channels" in screen_text(app) and screen_text(app), "caption"
        )
        assert "click a place for its values" in text  # the caption's two rows hold it whole
        await pilot.click(OnImageView, offset=(4, 2))
        await wait_for(pilot, lambda: "at (" in screen_text(app), "values at the place")
        assert "16 neurons" in screen_text(app)  # features.0.0 has 16 channels
        await pilot.press("shift+right")
        assert view.location is not None


async def test_neurons_show_channels_and_logits_as_labelled_bars(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await seek_to(pilot, page, "features.1.0")
        await pilot.press("v")
        assert page.query_one(LayerViews).current == "neurons"
        neurons = page.query_one(NeuronsView)
        await wait_for(pilot, lambda: "channels, most active first" in screen_text(app), "maps")
        first = neurons.page_offset
        await pilot.press("pagedown")
        await wait_for(pilot, lambda: neurons.page_offset > first, "the next page of channels")
        await seek_to(pilot, page, "head")
        classes = (app.run_info or {}).get("data", {}).get("classes") or []
        await wait_for(pilot, lambda: "values, highest first" in screen_text(app), "the bars")
        assert sum(name in screen_text(app) for name in classes) == len(classes)


async def test_stats_view_is_the_tensor_card(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await seek_to(pilot, page, "features.2.0")
        await pilot.press("v", "v")
        stats = page.query_one(StatsView)
        await wait_for(pilot, lambda: stats.card and stats.card.ref, "the tensor card")
        assert "mean|x|" in screen_text(app) and "features.2.0" in screen_text(app)


async def test_vit_tokens_and_attention_are_painted_on_the_patch_grid(vit_run: Path):
    app = make_app(vit_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await seek_to(pilot, page, "blocks.0.norm2")  # the views mount with the first layer
        view = page.query_one(OnImageView)
        await picture_drawn(pilot, view)
        await wait_for(pilot, lambda: "per patch token" in screen_text(app), "patch strength")
        assert view.map_shape == (8, 8)
        await seek_to(pilot, page, "blocks.0.attn")
        await wait_for(pilot, lambda: "where [CLS] looks" in screen_text(app), "attention")


async def test_a_text_model_paints_its_tokens_with_the_layers_strength_and_labels_logits(
    lm_run: Path,
):
    """No picture to paint on: the followed sample's tokens are the input, each coloured by
    the layer's mean |x| at its position (as the Loss page colours tokens by loss)."""
    from tvis.store.reader import RunReader

    app = make_app(lm_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await seek_to(pilot, page, "lm_head")
        view = page.query_one(OnImageView)
        await wait_for(pilot, lambda: view.kind == "text" and view.drawn, "the tokens")
        reply = view._last
        assert reply["tokens"][0] == "<bos>" and len(reply["strength"]) == len(reply["tokens"])
        chunk = RunReader(lm_run).batch(page.current_event().batch)
        out = chunk.array(page.current_event().tensor)[0].astype(np.float64)
        per_position = np.abs(out.reshape(out.shape[0], -1)).mean(axis=1)
        unit = (per_position - per_position.min()) / np.ptp(per_position)
        np.testing.assert_allclose(reply["strength"], unit[: len(reply["tokens"])], atol=1e-5)
        tokens = view.query_one(".location").content
        assert len({str(span.style.bgcolor) for span in tokens.spans}) > 3  # not one colour
        assert "per input token" in screen_text(app) and "not a picture" not in screen_text(app)
        card = page.query_one(InputCard)
        await wait_for(pilot, lambda: card.pipeline, "the input card")
        assert "The sea" in screen_text(app) or card.pipeline.get("raw", {}).get("kind") == "text"
        await pilot.press("v")
        await wait_for(pilot, lambda: "position" in screen_text(app), "bars at a position")
        vocab = (app.run_info or {}).get("data", {}).get("vocab") or []
        bars = str(page.query_one(NeuronsView).query_one(".bars").render())
        assert any(
            f" {token} " in bars or f"{token} █" in bars for token in vocab if token.isalpha()
        )


async def test_picking_a_patch_on_an_attention_layer_paints_where_it_looks(vit_run: Path):
    app = make_app(vit_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await seek_to(pilot, page, "blocks.0.attn")  # the views mount with the first layer
        view = page.query_one(OnImageView)
        await wait_for(pilot, lambda: "where [CLS] looks" in screen_text(app), "[CLS]'s gaze")
        cls_map = np.asarray(view._last["map"])
        await pilot.press("shift+up")  # from the middle of the 8 × 8 grid: patch (3, 4)
        await wait_for(
            pilot, lambda: "where patch (3,4) looks · token 29" in screen_text(app), "the patch"
        )
        assert view._last["query"] == 29
        assert not np.array_equal(np.asarray(view._last["map"]), cls_map)
        await pilot.click(OnImageView, offset=(1, 1))  # the top-left patch, by mouse
        await wait_for(pilot, lambda: "where patch (0,0) looks" in screen_text(app), "a click")
        await pilot.press("backspace")
        await wait_for(pilot, lambda: "where [CLS] looks" in screen_text(app), "back to [CLS]")
        assert view.location is None
        np.testing.assert_array_equal(np.asarray(view._last["map"]), cls_map)
        assert app.internal_errors == []


# -- light groups --------------------------------------------------------------------------------


async def test_o_opens_a_light_group_into_its_calls_and_closes_it(gapped_run: Path):
    app = make_app(gapped_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        assert page.current_event().batch == app.opening_batch() != app.batch_indices[0]
        await pilot.press("comma")  # the evaluation before training starts is one key back
        await wait_for(pilot, lambda: page.current_event().kind == "light", "the group")
        closed = page.recording.total
        group = page.current_event()
        assert group.kind == "light" and not group.open
        assert "o opens" in screen_text(app)
        await pilot.press("o")
        await wait_for(pilot, lambda: page.recording.total > closed, "the group's calls")
        assert page.current_event().kind == "light" and page.current_event().open
        await pilot.press("right")
        event = page.current_event()
        assert event.kind == "layer" and event.group == group.group
        text = screen_text(app)
        assert "in a light group, no gradients" in text and "o closes" in text
        await pilot.press("space")  # playback steps through the calls too
        await wait_for(pilot, lambda: page.cursor >= 3, "playback through the group")
        await pilot.press("space")
        assert page.current_event().group == group.group
        await pilot.press("o")
        await wait_for(pilot, lambda: page.recording.total == closed, "the group closed")
        assert page.cursor == 0 and page.current_event().kind == "light"
        await pilot.press("enter")  # enter on the group's event opens it too
        await wait_for(pilot, lambda: page.recording.total > closed, "opened by enter")
        assert app.internal_errors == []


async def test_help_lists_the_light_group_and_place_keys(gapped_run: Path):
    app = make_app(gapped_run)
    async with app.run_test(size=(120, 50)) as pilot:
        await open_replay(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: "replay.light" in screen_text(app), "the help screen")
        text = screen_text(app)
        assert "Open / close a light (no-grad) group" in text and "views.forget" in text


# -- what a recording lacks ----------------------------------------------------------------------


async def test_a_run_without_kept_samples_plays_and_says_what_is_missing(no_samples_run: Path):
    app = make_app(no_samples_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await wait_for(
            pilot, lambda: "no sample values were kept" in screen_text(app), "the missing line"
        )
        await seek_to(pilot, page, "features.0.0")
        view = page.query_one(OnImageView)
        await wait_for(
            pilot, lambda: "values were not kept" in screen_text(app), "the view's reason"
        )
        assert view.map_shape is None
        page.seek(page.recording.total - 1)
        await pilot.pause(0.3)
        assert app.internal_errors == []


async def test_a_run_still_being_written_plays_what_exists(run_dir: Path, tmp_path: Path):
    live = tmp_path / run_dir.name
    shutil.copytree(run_dir, live)
    meta = json.loads((live / "meta.json").read_text())
    meta.update(status="running", pid=os.getpid())  # this process stands in for the recorder
    (live / "meta.json").write_text(json.dumps(meta))
    app = make_app(live)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await wait_for(pilot, lambda: "the run is running" in screen_text(app), "the missing line")
        assert page.recording.total > 0
        await pilot.press("n")
        assert page.current_event().phase == "forward"


CRASHES_MID_FORWARD = """
import torch
from torch import nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4 * 8 * 8, 3)
        self.batches = 0

    def forward(self, x):
        self.batches += 1
        h = torch.relu(self.conv(x))
        if self.batches == 2:
            raise RuntimeError("CUDA out of memory (simulated)")
        return self.head(h.flatten(1))


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 3, (4,))
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
RAISING_LINE = 19  # of CRASHES_MID_FORWARD, counting its leading blank line


@pytest.fixture(scope="module")
def crashed_run(tmp_path_factory) -> Path:
    """A real `tvis run` of a script whose second batch raises in the middle of forward."""
    # The script's failure passes through: `tvis run` exits 1 as python would.
    folder = tmp_path_factory.mktemp("crashed")
    return record_script(folder, CRASHES_MID_FORWARD, "--steps", "3", exit_code=1)


async def test_a_batch_that_crashed_mid_forward_plays_what_exists_and_says_why(
    crashed_run: Path,
):
    app = make_app(crashed_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        said = (
            f"train.py:{RAISING_LINE} raised RuntimeError in batch 1's forward, after conv: "
            "no loss or gradients for it"
        )
        await wait_for(pilot, lambda: said in screen_text(app), "the line saying what is missing")
        lines = screen_text(app).splitlines()
        assert sum(said in line for line in lines) == 1  # one line, not two notes
        assert "Traceback" not in screen_text(app) and " more)" not in screen_text(app)
        await pilot.press("end")
        last = page.current_event()
        assert (last.batch, last.kind, last.name) == (1, "layer", "conv")
        view = page.query_one(OnImageView)
        await picture_drawn(pilot, view)  # the crashed batch's layers still show their values
        assert "mean over channels" in screen_text(app)
        await pilot.press("home", "space")
        await wait_for(pilot, lambda: page.ended, "playing to the end of what exists")
        text = screen_text(app)
        assert "end of the recording" in text and f"train.py:{RAISING_LINE} raised" in text
        assert app.internal_errors == []


async def test_replay_is_readable_at_80x24(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        page = await open_replay(pilot)
        assert page.has_class("-compact")
        # The batch loading: the input card (the sample and its transforms) is on screen.
        cards, stack = page.query_one("#cards"), page.query_one(LayerStack)
        assert page.current_event().kind == "batch"
        await wait_for(pilot, lambda: "dataset[" in screen_text(app), "the input card")
        assert cards.display and not stack.display
        await seek_to(pilot, page, "features.0.0")
        assert stack.display and not cards.display
        await picture_drawn(pilot, page.query_one(OnImageView))
        text = screen_text(app)
        assert "features.0.0" in text and "sample 0" in text and "paused" in text
        assert app.internal_errors == []


async def test_a_wide_page_is_not_restyled_as_a_batch_loads_and_a_narrowed_one_is(
    run_dir: Path,
):
    """A class on the page restyles every widget of it: the batch-loading class, which only
    changes the compact layout, is left off wide terminals (as the first page opens and at
    each batch while playing), and put on when the terminal narrows during the load."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        assert page.current_event().kind == "batch"
        assert not page.has_class("-loading") and not page.has_class("-compact")
        await pilot.resize_terminal(80, 24)
        cards, stack = page.query_one("#cards"), page.query_one(LayerStack)
        await wait_for(pilot, lambda: page.has_class("-compact"), "the compact layout")
        assert page.has_class("-loading") and cards.display and not stack.display
        await seek_to(pilot, page, "features.0.0")
        assert not page.has_class("-loading") and stack.display and not cards.display
        assert app.internal_errors == []


async def test_the_first_page_builds_no_layer_views_until_a_layer_plays(run_dir: Path):
    """The page opens on a batch loading, which shows no layer: its layer views (≈ 20
    widgets) are mounted when a layer first plays, on the view chosen meanwhile."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        assert page.current_event().kind == "batch"
        assert not page.query(LayerViews) and not page.query(OnImageView)
        await pilot.press("v")  # Neurons, chosen before any layer played
        await seek_to(pilot, page, "features.1.0")
        views = await wait_for(pilot, lambda: page.query(LayerViews).first(), "the views")
        assert views.current == "neurons"
        await wait_for(pilot, lambda: "channels, most active first" in screen_text(app), "maps")
        assert app.internal_errors == []


async def test_batch_labels_under_the_scrubber_never_run_together(gapped_run: Path):
    """Light groups put several short batches side by side: each label keeps a blank on
    both sides, and labels that would touch are left out."""
    app = make_app(gapped_run)
    async with app.run_test(size=(80, 30)) as pilot:
        page = await open_replay(pilot)
        ticks = str(page.query_one(Scrubber).render()).splitlines()[1]
        assert "b0" in ticks
        assert not re.search(r"b\d+b", ticks), ticks


NAN_AT_STEP_ONE = """
import torch
from torch import nn


class Shaky(nn.Module):
    def forward(self, x):
        return torch.log(x - 100.0) if self.training_step == 1 else x  # NaN at step 1


torch.manual_seed(0)
shaky = Shaky()
model = nn.Sequential(nn.Linear(4, 8), shaky, nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
for step in range(2):
    shaky.training_step = step
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


async def test_a_nan_run_opens_on_the_first_non_finite_value(tmp_path: Path):
    run = record_script(tmp_path, NAN_AT_STEP_ONE, "--steps", "2")
    app = make_app(run)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        origin = next(a for a in app.run_info["anomalies"] if a["kind"] == "nonfinite")
        assert origin["batch"] == 1 and origin["origin"]["call"] is not None
        event = await wait_for(
            pilot,
            lambda: (e := page.current_event()) and e.call == origin["origin"]["call"] and e,
            "the Shaky call of batch 1",
        )
        assert event.batch == 1 and app.batch == 1
        assert "Shaky" in screen_text(app)


DEEP = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(*[m for _ in range(300) for m in (nn.Linear(4, 4), nn.ReLU())])
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(2, 4), torch.randn(2, 4)
for _ in range(2):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


async def test_a_big_run_plays_its_first_page_then_takes_the_whole_outline(
    tmp_path: Path, monkeypatch
):
    """A run too big to build whole before the first frame (here: any run, EAGER_CALLS
    0) shows its first page from a partial answer, then asks for the rest: the total and
    the scrubber's outline become the whole run's, the cursor stays, and the end is the
    last update."""
    from tvis.agent import replay as replay_module
    from tvis.agent.client import LocalClient
    from tvis.tui.app import TvisApp
    from tvis.tui.pages.replay import ReplayPage

    monkeypatch.setattr(replay_module, "EAGER_CALLS", 0)  # the agent in this process
    run = record_script(tmp_path, DEEP, "--steps", "1", "--no-functions", "--no-ops")
    answers: list[tuple[str, bool, int]] = []
    arrived = ReplayPage.events_arrived

    def spied(self, tag, result):
        answers.append((tag, result.complete, result.total))
        arrived(self, tag, result)

    monkeypatch.setattr(ReplayPage, "events_arrived", spied)
    app = TvisApp(lambda: LocalClient(run.parent), f"local {run.parent}")
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await wait_for(pilot, lambda: page.recording.complete, "the whole outline")
        assert answers[0] == ("first", False, 1 + 600 + 1), answers
        assert ("rest", True, 1 + 600 + 1 + 600 + 1) in answers, answers
        rec = page.recording
        assert rec.total == 1203 and page.cursor == 0
        assert [r["phase"] for r in rec.outline] == [
            "data",
            "forward",
            "loss",
            "backward",
            "optimizer",
        ]
        await pilot.press("end")
        await wait_for(pilot, lambda: page.current_event(), "the last page")
        assert page.cursor == 1202 and page.current_event().kind == "update"
        assert "1203" in screen_text(app) or "1,203" in screen_text(app)


async def test_a_batch_switched_on_another_page_is_drawn_when_replay_shows_again(
    run_dir: Path, monkeypatch
):
    """`.` on Explore moves Replay to the next batch without drawing it (its pictures and
    cards would ask the agent for a page nobody sees); Replay draws it when shown again."""
    from tvis.tui.pages.replay import ReplayPage

    frames: list[int | None] = []
    drawn = ReplayPage.frame

    def counted(self):
        frames.append(self.current_event().batch if self.current_event() else None)
        drawn(self)

    monkeypatch.setattr(ReplayPage, "frame", counted)
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        assert page.current_event().batch == 0
        await pilot.press("2")
        await wait_for(pilot, lambda: app.current_mode == "explore", "Explore")
        before = len(frames)
        await pilot.press(".")
        await wait_for(pilot, lambda: app.batch == 1, "the next batch")
        await pilot.pause(0.3)
        assert frames[before:] == [], "Replay drew a frame while hidden"
        await pilot.press("1")
        await wait_for(pilot, lambda: app.current_mode == "replay", "Replay again")
        await wait_for(pilot, lambda: frames[before:], "Replay's frame")
        assert page.current_event().batch == 1 and frames[-1] == 1
        assert "batch 1 loads" in screen_text(app)
        assert app.internal_errors == []


async def test_the_rest_of_a_big_run_is_asked_for_once_replay_is_shown(tmp_path: Path, monkeypatch):
    """A partial first answer that arrives while another page is shown waits to ask for
    the rest (the agent's longest build) until Replay is shown again."""
    import threading

    from tvis.agent import replay as replay_module
    from tvis.agent.client import LocalClient
    from tvis.tui.app import TvisApp

    monkeypatch.setattr(replay_module, "EAGER_CALLS", 0)  # the agent in this process
    run = record_script(tmp_path, DEEP, "--steps", "1", "--no-functions", "--no-ops")
    release, asked = threading.Event(), []

    class Held(LocalClient):
        def call(self, method, **params):
            if method == "replay":
                release.wait(30)  # the first answer waits until the user left Replay
                asked.append(params.get("whole"))
            return super().call(method, **params)

    app = TvisApp(lambda: Held(run.parent), f"local {run.parent}")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        page = app.screen
        await pilot.press("2")
        await wait_for(pilot, lambda: app.current_mode == "explore", "Explore")
        release.set()
        await wait_for(pilot, lambda: page.recording, "the first answer")
        await pilot.pause(0.3)
        assert not page.recording.complete and True not in asked, asked
        await pilot.press("1")
        await wait_for(pilot, lambda: page.recording.complete, "the rest, once shown")
        assert asked.count(True) == 1 and page.recording.total == 1203
        assert app.internal_errors == []
