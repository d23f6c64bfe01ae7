"""The inspector: header, tensor cards, value/gradient toggle, leading dims, followed sample."""

from __future__ import annotations

from pathlib import Path

from viewer_support import count_requests, make_app, node_named, open_explore, screen_text, wait_for

from tvis.tui.messages import Selection
from tvis.tui.widgets.inspector import DEBOUNCE_S
from tvis.tui.widgets.inspector_requests import call_request
from tvis.tui.widgets.layer_views import LayerViews, OnImageView
from tvis.tui.widgets.tensor_card import Card, kept_note


async def _select(pilot, page, name: str) -> None:
    tree = page.calls.call_tree
    node = await wait_for(pilot, lambda: node_named(page, name), name)
    tree.move_cursor(node)
    await wait_for(
        pilot,
        lambda: (
            page.inspector.selection.row.get("name") == name
            and page.inspector.shown is page.inspector.selection
        ),
        f"{name} inspected",
    )


async def test_header_names_class_module_definition_site_and_approximate_backward(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        text = screen_text(app)
        assert "ShapesCNN" in text and "forward" in text
        assert "defined  model.py:" in text and "called   train.py:" in text
        assert "bwd ≈" in text and "(bwd approx.)" in text


async def test_cards_show_shape_dtype_stats_histogram_and_heatmap(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("l")
        await _select(pilot, page, "features")
        out = page.inspector.cards[0]
        await wait_for(pilot, lambda: out.has_data, "the output heatmap")
        text = await wait_for(  # on screen at the next frame
            pilot, lambda: "out  32×64×4×4 float32" in screen_text(app) and screen_text(app), "card"
        )
        for label in ("μ ", "σ ", "min ", "max ", "zeros "):
            assert label in text
        assert "sample 0" in text and "[0/64]" in text  # channel 0 of 64 for sample 0
        assert "tensor(" not in text  # never a repr


async def test_a_heatmap_is_asked_for_at_the_width_of_its_card(run_dir: Path):
    """A card asks for its view while it mounts, before it has a size of its own: the view
    must still fill the card, not come back as a few block means."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("l")
        await _select(pilot, page, "dropout")  # out: 32×64, one row of 64 values per sample
        out = page.inspector.cards[0]
        await wait_for(pilot, lambda: out.has_data, "the output heatmap")
        columns = out.values.shape[1]
        assert columns >= min(64, out.picture_width()), (columns, out.picture_width())


async def test_g_toggles_every_card_between_values_and_gradients(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("l")
        await _select(pilot, page, "head")
        heatmap = page.inspector.cards[0]
        await wait_for(pilot, lambda: heatmap.has_data, "the value heatmap")
        assert not heatmap.scale.signed
        await pilot.press("g")
        await wait_for(
            pilot, lambda: heatmap.scale.signed, "the gradient heatmap (diverging colours)"
        )
        assert "gradient" in screen_text(app)
        assert "· gradient" in screen_text(app).splitlines()[-1]
        await pilot.press("g")
        await wait_for(pilot, lambda: not heatmap.scale.signed, "values again")


async def test_leading_dim_and_followed_sample_change_the_slice(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("l")
        await _select(pilot, page, "features")
        card = page.inspector.cards[0]
        page.inspector.focus()
        await pilot.pause()
        await pilot.press("l", "l")
        await wait_for(pilot, lambda: card.index == [2], "channel 2")
        await wait_for(pilot, lambda: "[2/64]" in screen_text(app), "channel 2 shown")
        await pilot.press("right_square_bracket")
        assert app.sample == 1
        await wait_for(pilot, lambda: "sample 1" in screen_text(app), "sample 1 sliced out")


async def test_a_sample_that_was_not_kept_says_so(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        app.sample = 10  # the recorder keeps the values of the first 4 samples
        card = page.inspector.cards[0]
        await wait_for(
            pilot,
            lambda: "not kept" in card._note or "was not kept" in screen_text(app),
            "a sentence about the missing sample",
        )


async def test_the_layer_views_follow_the_inspected_call_sample_and_gradient(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("l")
        await _select(pilot, page, "features")
        call = page.inspector.selection.call

        def drawn_views():
            for views in page.inspector.query(LayerViews):
                drawn = views.query_one(OnImageView).drawn
                if drawn is not None and drawn.call == call:
                    return views
            return None

        views = await wait_for(pilot, drawn_views, "the layer painted on the input")
        page.inspector.focus()
        await pilot.press("v")
        assert views.current == "neurons"
        await pilot.press("g", "right_square_bracket")
        await wait_for(
            pilot,
            lambda: views.shown_layer.grad and views.shown_layer.sample == 1,
            "the views on sample 1's gradient",
        )


async def test_the_rows_beside_the_cursor_are_fetched_before_the_cursor_gets_there(
    run_dir: Path,
):
    """Moving the cursor prefetches what the next j/k will show: when it comes, the
    new call's header, cards and pictures are drawn without asking the agent again."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("l")
        await _select(pilot, page, "dropout")
        below = page.calls.call_tree.beside_cursor()[0]
        assert below.row.get("name") == "head"
        await wait_for(
            pilot,
            lambda: all(w.is_finished for w in app.workers),
            "the prefetch",
        )
        asked = count_requests(app)
        await pilot.press("j")
        inspector = page.inspector
        await wait_for(
            pilot,
            lambda: (
                inspector.shown is not None
                and inspector.shown.call == below.call
                and all(c.has_data for c in inspector.cards)
            ),
            "head's cards drawn",
        )
        shown = {c.ref.entry["id"] for c in inspector.cards}
        assert len(shown) == 2  # head's output and input
        # What was asked now is the next prefetch (the rows beside head), never head's own.
        assert not [a for a in asked if a.get("call") == below.call or a.get("tensor") in shown]
        # The prefetch of head's neighbours runs through the same client (the spy sees it),
        # before or after head's cards are drawn.
        await wait_for(pilot, lambda: asked, "the prefetch of head's neighbours")


async def test_a_call_after_a_pause_is_asked_at_once_and_a_held_key_s_rows_wait(run_dir: Path):
    """The inspector waits DEBOUNCE_S before asking for a call only when selections come
    faster than that (a held j): a filter's first hit, a search hit, a move after a pause
    are asked for at once, not a frame later."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        # No page built ahead meanwhile: the Loss page's fetches the loss call's record
        # (CI saw this test's calls answered from the cache, none asked).
        app.ahead.stop()
        await wait_for(pilot, lambda: all(w.is_finished for w in app.workers), "the prefetch")
        rows = app.data.call("layers", run=app.run_name, batch=0)["rows"]
        inspector = page.inspector
        # Calls nothing has fetched ahead, the furthest from the cursor.
        every = [Selection("call", batch=0, call=r["id"], row=r) for r in rows]
        cold = [s for s in every if not app.data.peek("call", **call_request(app.run_name, s))[0]]
        far = cold[-3:]
        assert len(far) == 3
        await pilot.pause(2 * DEBOUNCE_S)
        asked = count_requests(app)

        def calls_asked() -> list[int]:
            return [a["call"] for a in asked if a["method"] == "call" and not a.get("background")]

        inspector.show(far[0])
        assert inspector.settled  # asked for, not waiting
        inspector.show(far[1])  # at once after the first: a held key
        assert not inspector.settled
        inspector.show(far[2])
        await wait_for(pilot, lambda: inspector.shown is inspector.selection, "the last row")
        assert calls_asked() == [far[0].call, far[2].call]


async def test_shift_arrows_pick_a_place_on_the_inspected_layer_and_backspace_forgets_it(
    run_dir: Path,
):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("l")
        await _select(pilot, page, "features")  # a conv map
        call = page.inspector.selection.call
        view = await wait_for(
            pilot,
            lambda: next(
                (v for v in page.inspector.query(OnImageView) if v.drawn and v.drawn.call == call),
                None,
            ),
            "the layer painted on the input",
        )
        page.inspector.focus()
        await pilot.press("shift+down", "shift+right")
        mh, mw = view.map_shape
        assert view.location == (mh // 2 + 1, mw // 2 + 1)  # from the middle, down and right
        listed = view.query_one(".location")
        await wait_for(pilot, lambda: "neurons, largest" in str(listed.render()), "its values")
        assert f"at ({mh // 2 + 1}, {mw // 2 + 1})" in str(listed.render())
        assert page.inspector.has_focus  # the keys did not move the inspector's cursor
        await pilot.press("backspace")
        assert view.location is None and "neurons" not in str(listed.render())


async def test_keys_faster_than_a_mount_never_break_the_cards(run_dir: Path):
    """j k j k arriving together (as typed over a slow link), between a module (output,
    input, layer views) and the loss (two inputs): each new set of cards comes while the
    last is still mounting. ``pilot.press`` waits for the app to settle after each key,
    which hides the race, so the keys are posted as the terminal driver posts them."""
    from textual import events

    from tvis.tui.widgets.inspector import call_request

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await _select(pilot, page, "head")
        beside = page.calls.call_tree.beside_cursor()
        await wait_for(
            pilot,
            lambda: all(app.data.peek("call", **call_request(app.run_name, s))[0] for s in beside),
            "the calls beside the cursor prefetched",
        )
        for key in ("j", "k", "j"):
            app.post_message(events.Key(key, key))
        await pilot.press("k")  # queued behind them: when it returns, all four were handled
        inspector = page.inspector
        await wait_for(
            pilot,
            lambda: (
                inspector.settled
                and inspector.shown is inspector.selection
                and inspector.selection.row.get("name") == "head"
                and all(card.ref for card in inspector.cards)
            ),
            "head's cards after the burst",
        )
        assert [c.ref.title for c in inspector.cards] == ["out", "input"]
        text = screen_text(app)
        assert "out  32×5 float32" in text and "input  32×64 float32" in text
        assert app.internal_errors == []


async def test_neurons_bars_of_logits_keep_their_sign_on_a_zero_axis(run_dir: Path):
    """Logits below zero are drawn left of the axis and above it right, on one scale, in the
    order the title names (class-labelled values: highest first)."""
    from tvis.tui.widgets.layer_views import NeuronsView

    app = make_app(run_dir)
    async with app.run_test(size=(120, 50)) as pilot:
        page = await open_explore(pilot)
        await _select(pilot, page, "head")
        await pilot.press("i", "v")  # the inspector, then its Neurons view
        view = page.query_one(NeuronsView)
        await wait_for(pilot, lambda: view.total, "the logits as bars")
        values = [float(v) for v in view.last_reply["values"]]
        assert values == sorted(values, reverse=True) and min(values) < 0 < max(values)
        lines = screen_text(app).splitlines()
        assert any("values, highest first" in line for line in lines)
        for label, value in zip(view.last_reply["labels"], values, strict=True):
            line = next(line for line in lines if f"{label} " in line and "│" in line)
            left, right = line.split("│", 1)
            assert ("█" in left.split(label, 1)[1]) == (value < 0)
            assert ("█" in right) == (value > 0)


async def test_a_tree_move_mounts_and_removes_no_widget_in_the_inspector(run_dir: Path):
    """The header, sections and cards are lines of one widget and the layer views stay
    mounted: moving between calls with different cards (a module with an output, an input
    and layer views; the loss with two inputs and none) changes lines, not widgets, so a
    move is a repaint of what changed instead of a layout of dozens of widgets."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await _select(pilot, page, "head")
        inspector = page.inspector
        widgets = {id(w) for w in inspector.query("*")}

        async def moved(key: str, kind: str, cards: int) -> None:
            await pilot.press(key)
            await wait_for(
                pilot,
                lambda: (
                    inspector.settled
                    and inspector.shown is inspector.selection
                    and inspector.selection.row.get("kind") == kind
                    and len(inspector.cards) == cards
                    and "loading" not in screen_text(app)
                ),
                f"a {kind} call's {cards} cards",
            )
            assert {id(w) for w in inspector.query("*")} == widgets

        await moved("j", "loss", 3)  # F.cross_entropy: the loss, the logits and the targets
        assert not inspector.layer_views.display
        assert "target  32 int64" in screen_text(app)
        assert "value 0" in screen_text(app)  # the followed sample's target, said
        await moved("k", "module", 2)  # back: out and input, and the layer views again
        assert inspector.layer_views.display
        assert "this layer, for the followed sample" in screen_text(app)


async def test_a_hidden_inspector_asks_its_card_pictures_only_at_the_width_it_will_have(
    run_dir: Path,
):
    """80 columns: the tree alone, the inspector hidden. Moving asks the cards' pictures
    (the cursor's and those beside it) at the width the inspector has once Enter shows it,
    never at a width that would be asked again then."""
    app = make_app(run_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        page = await open_explore(pilot)
        assert page.layout_name == "compact" and "inspector" not in page.visible_panes()
        asked = count_requests(app)
        await pilot.press("j")
        await pilot.pause(0.5)
        await wait_for(pilot, lambda: all(w.is_finished for w in app.workers), "the prefetch")
        await pilot.press("enter")
        inspector = page.inspector
        await wait_for(
            pilot, lambda: inspector.cards and all(c.has_data for c in inspector.cards), "cards"
        )
        widths = {a["width"] for a in asked if a["method"] == "view"}
        assert widths == {inspector.lines.picture_width()}
        assert app.internal_errors == []


async def test_a_move_to_a_call_with_more_lines_builds_each_card_once(run_dir: Path):
    """The inspector's height follows its lines: a move from a module's two cards to the
    loss's three makes it taller, and the resize that follows must not build the cards'
    lines again (the lines depend on the width alone; built twice, they were ≈ 18 ms of
    Loss `u` into Explore)."""
    built: list[Card] = []
    lines = Card.lines

    def counted(self, *args, **kwargs):
        built.append(self)
        return lines(self, *args, **kwargs)

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await _select(pilot, page, "head")
        inspector = page.inspector
        await wait_for(pilot, lambda: all(c.has_data for c in inspector.cards), "head's cards")
        await pilot.pause(0.6)  # the cards beside the cursor fetched ahead: the move draws once
        height = inspector.lines.size.height
        Card.lines = counted  # type: ignore[method-assign]
        try:
            await pilot.press("j")
            await wait_for(
                pilot,
                lambda: (
                    inspector.settled
                    and inspector.selection.row.get("kind") == "loss"
                    and len(inspector.cards) == 3
                    and "loading" not in screen_text(app)
                ),
                "the loss's three cards",
            )
            await pilot.pause(0.3)
        finally:
            Card.lines = lines  # type: ignore[method-assign]
        assert inspector.lines.size.height != height  # it was resized
        assert sorted(map(id, built)) == sorted(map(id, inspector.cards))
        assert app.internal_errors == []


def test_a_card_says_how_many_samples_or_rows_were_kept_and_nothing_when_all_were():
    """A batch no bigger than ``--samples`` is stored whole, its count None: the card said
    "values kept for the first None samples"."""
    assert kept_note({"kept": "samples", "count": 3}) == "  values kept for the first 3 samples"
    assert kept_note({"kept": "rows", "count": 64}) == "  values kept for the first 64 rows"
    assert kept_note({"kept": "samples", "count": None}) == ""
    assert kept_note({"kept": "all"}) == ""
    assert kept_note({}) == ""
