"""The Loss and Weights pages keep what they show in reactives whose watchers redraw: a key
(or any code) that changes the state changes the screen, and no key redraws by handing a
pane a made-up agent reply."""

from __future__ import annotations

import math

from test_loss_weights_pages import _open_page, _param_list
from viewer_support import make_app, screen_text, wait_for

from tvis.tui.pages.loss import LossView, WorstTable
from tvis.tui.pages.weights import LayerView, WeightsView


def record_replies(pane) -> list[str]:
    """The tags of every reply ``pane`` is handed from now on."""
    seen: list[str] = []
    answered = pane.answered

    def recording(tag, result):
        seen.append(tag)
        answered(tag, result)

    pane.answered = recording
    return seen


async def test_weights_keys_redraw_without_handing_the_page_a_made_up_reply(run_dir):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page, table = await _param_list(pilot)
        view, layer = page.query_one(WeightsView), page.query_one(LayerView)
        await wait_for(pilot, lambda: layer.shown, "the first parameter's picture")
        replies = record_replies(view)
        await pilot.press("w")
        await wait_for(pilot, lambda: "gradient dL/dw" in screen_text(app), "the gradient")
        assert view.which == "grad" and layer.shown["which"] == "grad"
        await pilot.press("o")
        await wait_for(pilot, lambda: "sorted by shape ↑" in screen_text(app), "sorted by shape")
        await pilot.press("O")
        await wait_for(pilot, lambda: "sorted by shape ↓" in screen_text(app), "reversed")
        sizes = [math.prod(p.get("shape") or [0]) for p in table.params]
        assert table.descending and sizes == sorted(sizes, reverse=True)
        await pilot.press("a")
        grid = view.grid
        await wait_for(pilot, lambda: grid.display and grid.loaded_count, "all layers")
        assert not layer.display
        await pilot.press("a")
        await wait_for(pilot, lambda: layer.display and not grid.display, "one layer again")
        assert replies == []  # the step's reply came once; keys only changed state
        assert app.internal_errors == []


async def test_setting_the_weights_state_redraws_the_page(run_dir):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page, table = await _param_list(pilot)
        view, layer = page.query_one(WeightsView), page.query_one(LayerView)
        await wait_for(pilot, lambda: layer.shown, "the first parameter's picture")
        view.which = "update"
        await wait_for(pilot, lambda: (layer.shown or {}).get("which") == "update", "Δw")
        await wait_for(pilot, lambda: "· update" in screen_text(app), "Δw named on screen")
        last = table.params[-1]["name"]
        view.chosen = last
        await wait_for(pilot, lambda: (layer.shown or {}).get("name") == last, last)
        table.sort_column = 2  # ‖w‖
        await wait_for(pilot, lambda: "sorted by ‖w‖" in screen_text(app), "sorted by ‖w‖")


async def test_loss_keys_and_state_redraw_the_page_without_made_up_replies(run_dir):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await _open_page(pilot, "loss")
        view = page.query_one(LossView)
        worst = page.query_one(WorstTable)
        await wait_for(pilot, lambda: view.samples and view.detail, "the confusion matrix")
        await wait_for(pilot, lambda: worst.row_count > 1, "the worst samples")
        replies = record_replies(view)

        def listed() -> list[int]:
            return [int(row["sample"]) for row in worst.rows[:3]]

        losses = [r["sample"] for r in view.detail["worst"]][:3]
        assert listed() == losses  # worst first
        await pilot.press("o")
        await wait_for(pilot, lambda: listed() == sorted(listed()), "sample order")
        assert not view.worst_first
        view.worst_first = True  # state set by code redraws as a key does
        await wait_for(pilot, lambda: listed() == losses, "worst first again")
        await pilot.press("b")
        await wait_for(pilot, lambda: "batch 0," in screen_text(app), "this batch's matrix")
        view.whole_run = True
        await wait_for(pilot, lambda: "training batches" in screen_text(app), "the whole run")
        view.cell = (1, 0)
        await wait_for(
            pilot, lambda: view.query_one("#loss-picture").cursor == (1, 0), "the chosen cell"
        )
        assert replies == []
        assert app.internal_errors == []
