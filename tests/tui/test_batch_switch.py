"""A batch switch (`.`/`,`) after a pause draws what was fetched during the pause: the agent is
not asked for the new batch's tree, selected call or pictures, and the screen is the one a
switch without the pause gives."""

from __future__ import annotations

from pathlib import Path

import pytest
from viewer_support import (
    count_requests,
    goto_page,
    make_app,
    open_explore,
    screen_text,
    wait_for,
)

from tvis.tui.pages import explore, loss, weights
from tvis.tui.widgets.layer_views import OnImageView

PREFETCH_AFTER_S = explore.NEIGHBOURS_AFTER_S


async def _idle(pilot, app) -> None:
    """Past the pause after which the batches beside are fetched, and that fetch done."""
    await pilot.pause(PREFETCH_AFTER_S + 0.2)
    await wait_for(pilot, lambda: all(w.is_finished for w in app.workers), "the prefetch")


async def _press_and_look(pilot, key: str, look) -> dict:
    """Press ``key`` and return what ``look()`` saw the moment the app's batch action
    returned, inside the key's handler: before anything could be painted."""
    app, seen = pilot.app, {}
    action = app.action_batch

    def batch_then_look(delta: int) -> None:
        action(delta)
        seen.update(look())

    app.action_batch = batch_then_look
    await pilot.press(key)
    app.action_batch = action
    return seen


def _same_call(app, batch: int, call: int, other: int) -> int:
    """Call ``call`` of ``batch`` in batch ``other``, found as a reader would: the same
    names down the tree, each the same occurrence among its same-named siblings."""

    def children(b: int, parent: int) -> list:
        return list(app.data.call("calls", run=app.run_name, batch=b, parent=parent).calls)

    def place(rows: list, cid: int) -> tuple[str, int]:
        row = next(r for r in rows if r.id == cid)
        return row.label, [r.label for r in rows if r.id < cid].count(row.label)

    chain = [*app.data.call("call", run=app.run_name, batch=batch, call=call)["path"], call]
    here, there = -1, -1
    for cid in chain:
        label, occurrence = place(children(batch, here), cid)
        there = [r.id for r in children(other, there) if r.label == label][occurrence]
        here = cid
    return there


async def _switched(pilot, page, batch: int, call: int) -> None:
    """The tree, the inspector's cards and its On image view all on ``call`` of ``batch``
    (a hidden inspector's cards ask their pictures only once it is shown)."""
    inspector = page.inspector
    image = inspector.layer_views.query_one(OnImageView)
    await wait_for(
        pilot,
        lambda: (
            page.calls.call_tree.batch_index == batch
            and inspector.shown is not None
            and (inspector.shown.batch, inspector.shown.call) == (batch, call)
            and inspector.cards
            and (not inspector.size.width or all(c.has_data for c in inspector.cards))
            and image.drawn is not None
            and (image.drawn.batch, image.drawn.call) == (batch, call)
        ),
        f"call {call} of batch {batch} shown",
    )


async def test_a_batch_switch_after_a_pause_asks_the_agent_nothing_for_what_it_shows(
    run_dir: Path,
):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        first, following = app.batch_indices[:2]
        call = page.inspector.shown.call
        there = _same_call(app, first, call, following)
        await _idle(pilot, app)
        asked = count_requests(app)
        await pilot.press("full_stop")
        await _switched(pilot, page, following, there)
        shown = {c.ref.entry["id"] for c in page.inspector.cards}
        # What may be asked now is the next prefetch (the rows beside the cursor, the
        # batches beside this one), never the tree, the call or the pictures on screen.
        on_screen = [
            a
            for a in asked
            if a.get("batch") == following
            and (a["method"] == "calls" or a.get("call") == there or a.get("tensor") in shown)
        ]
        assert on_screen == []
        await _idle(pilot, app)  # and back: the batch left is fetched again, as it may
        asked.clear()  # have left the client's cache
        await pilot.press("comma")
        await _switched(pilot, page, first, call)
        assert not [a for a in asked if a.get("batch") == first and a["method"] == "calls"]
        assert app.internal_errors == []


async def test_the_screen_after_a_prefetched_switch_is_the_screen_of_a_cold_one(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    screens = []
    for pause in (PREFETCH_AFTER_S, 3600.0):  # prefetched, then never prefetched
        monkeypatch.setattr(explore, "NEIGHBOURS_AFTER_S", pause)
        app = make_app(run_dir)
        async with app.run_test(size=(120, 40)) as pilot:
            page = await open_explore(pilot)
            first, following = app.batch_indices[:2]
            there = _same_call(app, first, page.inspector.shown.call, following)
            await _idle(pilot, app)
            asked = count_requests(app)
            await pilot.press("full_stop")
            await _switched(pilot, page, following, there)
            await _idle(pilot, app)
            screens.append(screen_text(app))
            if pause == 3600.0:  # the cold switch did ask for the new batch's tree
                assert [a for a in asked if a["method"] == "calls" and a["batch"] == following]
    assert screens[0] == screens[1]


async def test_a_hidden_explore_fetches_the_batches_beside_only_once_shown(run_dir: Path):
    """Explore built ahead behind Replay asks nothing for the batches beside its selection;
    once shown, it does when the selection has rested."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.data is not None, "connected")
        asked = count_requests(app)
        following = app.batch_indices[1]
        await wait_for(pilot, lambda: "explore" in app.ahead.built, "Explore built ahead")
        await pilot.pause(PREFETCH_AFTER_S + 0.5)
        assert app.current_mode == "replay"
        assert not [a for a in asked if a.get("batch") == following and a["method"] == "calls"]
        await open_explore(pilot)
        await wait_for(
            pilot,
            lambda: [a for a in asked if a.get("batch") == following and a["method"] == "calls"],
            "the batch beside fetched once Explore is shown",
        )


async def test_what_is_fetched_for_the_batches_beside_goes_in_the_background(run_dir: Path):
    """The agent serves it after every request a key waits for (agent/workers.py)."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        await _idle(pilot, app)
        asked = count_requests(app)
        await pilot.press("j")  # the selection moves, then rests: the batches beside again

        def beside() -> list[dict]:
            return [a for a in asked if a.get("batch") not in (None, app.batch)]

        await wait_for(pilot, beside, "the batches beside fetched for the new selection")
        await _idle(pilot, app)
        assert all(a.get("background") for a in beside())


async def test_a_prefetched_switch_moves_the_tree_and_the_inspector_in_the_keys_own_frame(
    run_dir: Path,
):
    """After the pause, `.` puts the tree's cursor on the same call of the new batch (its
    id there may differ) and
    the inspector on it before the key's handler returns: no frame of the tree alone."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        first, following = app.batch_indices[:2]
        call = _same_call(app, first, page.inspector.shown.call, following)
        await _idle(pilot, app)
        seen = await _press_and_look(
            pilot,
            "full_stop",
            lambda: {
                "cursor": page.calls.call_tree.cursor_node,
                "shown": (page.inspector.shown.batch, page.inspector.shown.call),
                "cards": [c.has_data for c in page.inspector.cards],
            },
        )
        cursor = seen["cursor"]
        assert cursor is not None and cursor.data.batch == following
        assert cursor.data.call.id == call
        assert seen["shown"] == (following, call)
        assert seen["cards"] and all(seen["cards"])
        await _switched(pilot, page, following, call)
        assert page.calls.call_tree.cursor_node is cursor  # the tree's own Selected agrees
        assert app.internal_errors == []


async def test_a_weights_switch_after_a_pause_draws_the_next_step_from_what_was_fetched(
    run_dir: Path,
):
    """On Weights, `.` to a batch of another step, once the page has rested, opens that
    step's list, picture and statistics in the key's own frame, asking the agent nothing."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "weights")
        page = app.screen
        layer = page.view.query_one(weights.LayerView)
        await wait_for(pilot, lambda: layer.shown and layer.stats, "the parameter drawn")
        batches = app.run_info["batches"]
        following = batches[app.batch_position + 1]["step"]
        assert following != page.step
        await pilot.pause(weights.BESIDE_AFTER_S + 0.2)
        await wait_for(pilot, lambda: all(w.is_finished for w in app.workers), "the prefetch")
        picture, stats = layer.shown, layer.stats
        asked = count_requests(app)
        seen = await _press_and_look(
            pilot,
            "full_stop",
            lambda: {
                "steps": (page.step, layer.step),
                "drawn": (layer.shown, layer.stats),
                "asked": list(asked),
            },
        )
        assert seen["steps"] == (following, following)
        assert seen["drawn"][0] is not picture and seen["drawn"][1] is not stats
        assert seen["asked"] == []
        assert app.internal_errors == []


async def test_a_loss_switch_after_a_pause_draws_the_next_batch_from_what_was_fetched(
    run_dir: Path,
):
    """On Loss, `.` once the page has rested shows the next batch's loss call, its worst
    samples and its rows in the key's own frame, asking the agent nothing."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "loss")
        view = app.screen.view
        await wait_for(pilot, lambda: view.detail and view.samples, "the batch's loss drawn")
        await pilot.pause(loss.BESIDE_AFTER_S + 0.2)
        await wait_for(pilot, lambda: all(w.is_finished for w in app.workers), "the prefetch")
        detail = view.detail
        asked = count_requests(app)
        seen = await _press_and_look(
            pilot,
            "full_stop",
            lambda: {
                "batch": view.batch_index,
                "detail": view.detail,
                "rows": bool(view.samples),
                "asked": list(asked),
            },
        )
        assert seen["batch"] == app.batch_indices[1]
        assert seen["detail"] is not None and seen["detail"] is not detail and seen["rows"]
        assert seen["asked"] == []
        assert app.internal_errors == []


async def test_a_pane_opened_after_the_selection_rested_is_fetched_for_the_switch_too(
    run_dir: Path,
):
    """`a` opens the samples pane without moving the selection: once keys rest, what `.`
    shows is fetched again, the pane's rows and the followed sample's preview with it; and
    the layers table, opened then closed, asks nothing for the batch left under `.`."""
    from tvis.tui.widgets.samples_view import SamplesView

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        first, following = app.batch_indices[:2]
        call = _same_call(app, first, page.inspector.shown.call, following)
        await _idle(pilot, app)  # the batches beside fetched for the selection
        for key in ("y", "y"):  # the layers table opened and closed: hidden from now on
            await pilot.press(key)
            await _idle(pilot, app)
        await pilot.press("a")
        samples = page.query_one(SamplesView)
        await wait_for(pilot, lambda: samples.rows, "the samples pane's rows")
        await _idle(pilot, app)
        asked = count_requests(app)
        await pilot.press("full_stop")
        await _switched(pilot, page, following, call)
        await wait_for(
            pilot, lambda: samples.batch_index == following and samples.rows, "its new rows"
        )
        await _idle(pilot, app)
        mine = [a for a in asked if not a.get("background")]
        assert [a for a in mine if a["method"] in ("samples", "image", "view")] == []
        assert [a for a in mine if a["method"] == "layers" and a.get("batch") == first] == []
        asked.clear()
        await pilot.press("i")  # the inspector back: its cards were fetched while hidden
        await _switched(pilot, page, following, call)
        assert [a for a in asked if not a.get("background") and a["method"] == "view"] == []
        assert app.internal_errors == []


async def test_a_batch_switch_keeps_the_call_by_its_place_in_the_tree_not_its_id(run_dir: Path):
    """The example's data items run a varying number of transforms: the model's call has
    another id in each batch, and the id it had names another call in the next batch.
    `.` goes to the model's call there, cold or prefetched, and `,` back to the first."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        first, following = app.batch_indices[:2]
        tree = page.calls.call_tree
        model = next(n for n in tree.root.children if n.data.call and n.data.call.kind == "module")
        tree.move_cursor(model)
        call = model.data.call.id
        await wait_for(pilot, lambda: page.inspector.shown.call == call, "the model inspected")
        there = _same_call(app, first, call, following)
        assert there != call, "the example's ids shift between its first two batches"
        await pilot.press("full_stop")  # at once: nothing fetched beside yet
        await _switched(pilot, page, following, there)
        assert tree.cursor_node.data.call.label == model.data.call.label
        await _idle(pilot, app)
        await pilot.press("comma")  # prefetched
        await _switched(pilot, page, first, call)
        assert app.internal_errors == []


def _calls_of(app, batch: int, parent: int = -1) -> list[int]:
    """Every call id of ``batch``'s tree under ``parent``, walked through ``calls``."""
    rows = app.data.call("calls", run=app.run_name, batch=batch, parent=parent).calls
    return [c for r in rows for c in (r.id, *_calls_of(app, batch, r.id))]


async def test_a_call_the_next_batch_did_not_run_is_followed_to_its_nearest_caller(
    run_dir: Path,
):
    """A data item's transform that ran in the first batch and not in the next: `.`
    selects the item's call that did run there (the nearest ancestor) and says so."""
    from tvis.tui.messages import GotoCall

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        first, following = app.batch_indices[:2]
        missing = None
        for call in _calls_of(app, first):
            try:
                _same_call(app, first, call, following)
            except IndexError:
                missing = call
                break
        assert missing is not None, "the example runs a call in its first batch only"
        path = app.data.call("call", run=app.run_name, batch=first, call=missing)["path"]
        nearest = None
        for ancestor in reversed(path):
            try:
                nearest = _same_call(app, first, ancestor, following)
                break
            except IndexError:
                continue
        page.post_message(GotoCall(missing, first))
        await wait_for(pilot, lambda: page.inspector.shown.call == missing, "the call inspected")
        await pilot.press("full_stop")
        await wait_for(
            pilot,
            lambda: (
                page.inspector.shown is not None
                and (page.inspector.shown.batch, page.inspector.shown.call) == (following, nearest)
            ),
            "its nearest caller in the next batch",
        )
        assert "did not run that call" in " ".join(str(n.message) for n in app._notifications)
        assert app.internal_errors == []
