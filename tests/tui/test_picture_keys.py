"""Cursor keys that bring a picture draw what was fetched while the cursor rested: Weights'
list (the parameter's picture and statistics) and Attention's cursor (where the query token
looks, over a ViT's input). After a rest a move asks the agent for nothing it shows, its
screen is the screen of a move without the rest, and an answer for a row the cursor has left
never lands."""

from __future__ import annotations

import threading
import time

import pytest
from test_loss_weights_pages import _param_list
from viewer_support import (
    count_requests,
    make_app,
    open_explore,
    screen_text,
    showing,
    wait_for,
)

from tvis.tui.pages import weights
from tvis.tui.pages.weights import LayerView, WeightsView
from tvis.tui.widgets import attention_view
from tvis.tui.widgets.attention_view import AttentionView


async def _rested(pilot, app, after_s: float, holder=None) -> None:
    """Past the rest after which the neighbours are fetched, and that fetch done (with
    ``holder``, the view that fetches them, once its rest timer has fired: under load it
    can fire well after ``after_s``)."""
    await pilot.pause(after_s + 0.2)
    if holder is not None:
        await wait_for(pilot, lambda: holder._neighbours_timer is None, "the rest's timer")
    await wait_for(pilot, lambda: all(w.is_finished for w in app.workers), "the prefetch")


async def _weights_drawn(pilot, page, table, row: int) -> LayerView:
    """Row ``row``'s parameter drawn in the layer view, picture and statistics."""
    layer = page.query_one(LayerView)
    name = table.params[row]["name"]
    await wait_for(
        pilot,
        lambda: (layer.shown or {}).get("name") == name and layer.stats is not None,
        f"{name} drawn",
    )
    return layer


def _about(param: dict, step: int, asked: list[dict]) -> list[dict]:
    """The requests among ``asked`` for what showing ``param`` at ``step`` draws (not the
    page's fetch of the same parameter at the steps beside, which the move's rest may
    start before the test looks)."""
    tensors = {param.get(w) for w in weights.WHICH} - {None}
    return [
        a
        for a in asked
        if a.get("step") == step and (a.get("name") == param["name"] or a.get("tensor") in tensors)
    ]


async def test_a_weights_list_move_after_a_rest_asks_the_agent_nothing_it_shows(run_dir):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page, table = await _param_list(pilot)
        await _weights_drawn(pilot, page, table, 0)
        table.focus()
        for key, row in (("j", 1), ("G", len(table.params) - 1), ("g", 0)):
            await _rested(pilot, app, weights.NEIGHBOURS_AFTER_S, page.query_one(WeightsView))
            asked = count_requests(app)
            await pilot.press(key)
            layer = await _weights_drawn(pilot, page, table, row)
            assert _about(table.params[row], page.view.step, asked) == [], key
            assert table.params[row]["name"] in screen_text(app)
            assert layer.shown is not None
        assert app.internal_errors == []


async def test_the_weights_screen_after_a_prefetched_move_is_the_screen_of_a_cold_one(
    run_dir, monkeypatch: pytest.MonkeyPatch
):
    screens = []
    for rest in (weights.NEIGHBOURS_AFTER_S, 3600.0):  # prefetched, then never prefetched
        monkeypatch.setattr(weights, "NEIGHBOURS_AFTER_S", rest)
        app = make_app(run_dir)
        async with app.run_test(size=(120, 40)) as pilot:
            page, table = await _param_list(pilot)
            await _weights_drawn(pilot, page, table, 0)
            table.focus()
            await _rested(pilot, app, 0.3)
            asked = count_requests(app)
            await pilot.press("j")
            await _weights_drawn(pilot, page, table, 1)
            await _rested(pilot, app, 0.3)
            screens.append(screen_text(app))
            if rest == 3600.0:  # the cold move did ask for the parameter it shows
                assert _about(table.params[1], page.view.step, asked)
    assert screens[0] == screens[1]


async def test_a_late_picture_for_a_row_the_cursor_left_never_lands(
    run_dir, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(weights, "PICTURE_DELAY", 0.0)  # every move asks at once
    monkeypatch.setattr(weights, "NEIGHBOURS_AFTER_S", 3600.0)  # nothing fetched ahead
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page, table = await _param_list(pilot)
        first = await _weights_drawn(pilot, page, table, 0)
        table.focus()
        answered = threading.Event()
        slow_call = app.data.client.call

        def late(method, **params):  # the next parameter's answers come after the move back
            if params.get("name") == table.params[1]["name"]:
                time.sleep(0.5)
                answered.set()
            return slow_call(method, **params)

        app.data.client.call = late
        await pilot.press("j")
        await wait_for(pilot, lambda: first.param["name"] == table.params[1]["name"], "row 1")
        await pilot.press("k")  # back to row 0, held by the client: drawn at once
        await _weights_drawn(pilot, page, table, 0)
        await wait_for(pilot, answered.is_set, "the late answer")
        await pilot.pause(0.3)
        assert first.shown["name"] == table.params[0]["name"]
        assert first.param["name"] == table.params[0]["name"]
        assert app.internal_errors == []


# -- Attention: the overlay of where the cursor's query looks ------------------------------


async def _attention(pilot) -> AttentionView:
    """Insights' Attention on the ViT, its [CLS] overlay drawn."""
    app = pilot.app
    await open_explore(pilot)
    await pilot.press(str([p.id for p in app.pages()].index("insights") + 1))
    await wait_for(pilot, lambda: app.current_mode == "insights" and app.screen.found, "Insights")
    await pilot.press("a")
    view = await wait_for(pilot, lambda: app.screen.current_view(), "the attention view")
    await wait_for(pilot, lambda: "where [CLS] looks" in screen_text(app), "the [CLS] overlay")
    return view


async def test_an_attention_cursor_move_after_a_rest_asks_nothing_for_its_overlay(vit_run):
    app = make_app(vit_run)
    async with app.run_test(size=(120, 40)) as pilot:
        view = await _attention(pilot)
        for key, query in (("j", 1), ("j", 2), ("k", 1)):
            await _rested(pilot, app, attention_view.NEIGHBOURS_AFTER_S, view)
            asked = count_requests(app)
            await pilot.press(key)
            label = view.reply["tokens"][query]
            assert f"where {label} looks" in screen_text(app), key  # in the cursor's frame
            # nothing asked for it by the move (a late guess of the rest before may still go
            # out in the background, which is not the move waiting)
            assert [a for a in asked if a.get("query") == query and not a.get("background")] == []
        assert app.internal_errors == []


async def test_the_attention_screen_after_a_prefetched_move_is_the_screen_of_a_cold_one(
    vit_run, monkeypatch: pytest.MonkeyPatch
):
    screens = []
    for rest in (attention_view.NEIGHBOURS_AFTER_S, 3600.0):
        monkeypatch.setattr(attention_view, "NEIGHBOURS_AFTER_S", rest)
        app = make_app(vit_run)
        async with app.run_test(size=(120, 40)) as pilot:
            view = await _attention(pilot)
            await _rested(pilot, app, 0.3)
            await pilot.press("j")
            shown = f"where {view.reply['tokens'][1]} looks"
            await wait_for(pilot, lambda t=shown, a=app: t in screen_text(a), shown)
            await _rested(pilot, app, 0.3)
            screens.append(screen_text(app))
    assert screens[0] == screens[1]


async def test_a_conv_kernel_after_a_vector_shows_no_bars(run_dir):
    """The bars of a vector drawn before go when the next parameter is a conv kernel grid."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page, table = await _param_list(pilot)
        shapes = [len(p.get("shape") or []) for p in table.params]
        vector = shapes.index(1)
        kernel = vector + shapes[vector:].index(4)
        table.focus()
        table.move_cursor(row=vector)
        await _weights_drawn(pilot, page, table, vector)
        await wait_for(pilot, lambda: showing(app, "values as bars"), "the vector's bars")
        table.move_cursor(row=kernel)
        await _weights_drawn(pilot, page, table, kernel)
        text = await wait_for(pilot, lambda: showing(app, "kernels"), "the kernel grid")
        assert "values as bars" not in text
