"""The lists of the Weights and Loss pages, drawn line by line (``LineTable``): a model of
20,000 parameters fills at once and answers its keys, where a DataTable built 20,000 rows
first (~23 s); the parameter's picture follows a list move without holding up the cursor;
enter in the Loss list follows its sample."""

from __future__ import annotations

import pytest
from test_loss_weights_pages import _open_page, _param_list
from textual.app import App, ComposeResult
from viewer_support import make_app, screen_text, wait_for

from tvis.tui import fmt
from tvis.tui.pages import weights
from tvis.tui.pages.loss import WorstTable
from tvis.tui.pages.weights import LayerView, ParamList, WeightsView
from tvis.tui.widgets.lists import LineTable

PARAMETERS = 20_000


def step_params(count: int) -> list[dict]:
    """``count`` parameters as the agent's ``step`` reply lists them."""
    return [
        {
            "name": f"blocks.{i:05d}.linear.weight",
            "shape": [4, 4],
            "dtype": "float32",
            "norms": {"w": 1.0 + i, "grad": 0.5, "update": 0.01, "ratio": 1e-3 * (i % 97)},
            "weight": 3 * i,
            "grad": 3 * i + 1,
            "update": 3 * i + 2,
        }
        for i in range(count)
    ]


class ListApp(App):
    def compose(self) -> ComposeResult:
        yield ParamList()

    def on_mount(self) -> None:
        self.query_one(ParamList).focus()


async def test_a_list_of_20000_parameters_answers_its_keys_and_shows_the_last_after_G():
    app = ListApp()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(ParamList)
        table.fill(step_params(PARAMETERS), None)
        await pilot.pause()
        assert "blocks.00000.linear.weight" in screen_text(app)
        await pilot.press("G")
        assert table.cursor_row == PARAMETERS - 1
        assert "blocks.19999.linear.weight" in screen_text(app)
        # Nothing per row: a few widgets in all, and only the lines shown were drawn.
        assert len(list(app.screen.walk_children())) < 5
        assert len(table._lines) < 3 * app.size.height
        await pilot.press("k", "pageup")
        page = table.size.height - ParamList.HEADER
        assert table.cursor_row == PARAMETERS - 2 - page
        await pilot.press("pagedown", "j")
        assert table.cursor_row == PARAMETERS - 1
        await pilot.press("g")
        assert table.cursor_row == 0 and "blocks.00000.linear.weight" in screen_text(app)
        # Sorting keeps the cursor on its parameter: ‖w‖ largest first puts it last.
        table.sort_column = 2
        table.descending = True
        assert table.params[0]["name"] == "blocks.19999.linear.weight"
        assert table.cursor_row == PARAMETERS - 1
        assert "blocks.00000.linear.weight" in screen_text(app)


async def test_the_picture_follows_a_list_move_and_skips_the_rows_a_held_key_passes(
    run_dir, monkeypatch
):
    monkeypatch.setattr(weights, "PICTURE_DELAY", 5.0)  # keys pressed well inside it
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page, table = await _param_list(pilot)
        layer = page.query_one(LayerView)
        view = page.query_one(WeightsView)
        first = table.params[0]["name"]
        await wait_for(pilot, lambda: (layer.shown or {}).get("name") == first, first)
        shown: list[str] = []
        show = layer.show
        layer.show = lambda param, *a: (shown.append(param["name"]), show(param, *a))
        table.focus()
        await pilot.press("j")  # one key: the cursor moves and the picture follows
        assert table.cursor_row == 1
        second = table.params[1]["name"]
        await wait_for(pilot, lambda: (layer.shown or {}).get("name") == second, second)
        await pilot.press("j", "j", "j")  # a held key: the cursor moves with each press
        assert table.cursor_row == 4 and view.chosen == table.params[4]["name"]
        assert shown == [second]  # ... and no picture is asked for until it stops
        last = table.params[4]["name"]
        await wait_for(pilot, lambda: (layer.shown or {}).get("name") == last, last, timeout=20)
        assert shown == [second, last]  # the rows passed over were never asked for
        assert app.internal_errors == []


@pytest.mark.parametrize("rows", [0, 1])
async def test_a_short_or_empty_list_takes_every_key(rows):
    app = ListApp()
    async with app.run_test(size=(80, 20)) as pilot:
        table = app.query_one(ParamList)
        table.fill(step_params(rows), None)
        await pilot.press("j", "k", "G", "g", "pagedown", "pageup", "end", "home", "enter")
        assert table.cursor_row == 0


async def test_enter_in_the_loss_list_follows_its_sample_and_the_cursor_stays_on_it(run_dir):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await _open_page(pilot, "loss")
        worst = page.query_one(WorstTable)
        await wait_for(pilot, lambda: worst.row_count > 2, "the worst samples")
        worst.focus()
        await pilot.press("j", "j", "enter")
        chosen = worst.rows[2]["sample"]
        await wait_for(pilot, lambda: app.sample == chosen, "the chosen sample followed")
        await wait_for(pilot, lambda: worst.followed == chosen, "● on it")
        assert worst.cursor_row == 2
        marked = [ln.split() for ln in screen_text(app).splitlines() if "●" in ln]
        assert [words[1:2] for words in marked] == [[str(chosen)]]  # one ●, on it
        assert fmt.num(worst.rows[2]["loss"]) in marked[0]
        await pilot.press("o")  # sample order: the cursor stays on the sample
        await wait_for(pilot, lambda: worst.rows[worst.cursor_row]["sample"] == chosen, "kept")
        assert [r["sample"] for r in worst.rows] == sorted(r["sample"] for r in worst.rows)
        assert app.internal_errors == []


async def test_a_click_puts_the_cursor_on_a_row_and_a_second_click_selects_it():
    app = ListApp()
    seen: list[LineTable.Selected] = []

    def selected(message) -> None:  # called at each node the message bubbles through
        if isinstance(message, LineTable.Selected) and all(m is not message for m in seen):
            seen.append(message)

    def chosen() -> list[int]:
        return [m.row for m in seen]

    async with app.run_test(size=(80, 20), message_hook=selected) as pilot:
        table = app.query_one(ParamList)
        table.fill(step_params(50), None)
        await pilot.pause()
        await pilot.click(ParamList, offset=(3, ParamList.HEADER + 4))
        assert table.cursor_row == 4 and chosen() == []
        await pilot.click(ParamList, offset=(3, ParamList.HEADER + 4))
        assert chosen() == [4]
        await pilot.click(ParamList, offset=(3, 0))  # the titles: no row
        assert table.cursor_row == 4 and chosen() == [4]
