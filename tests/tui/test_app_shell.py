"""The app shell: connecting, errors, run picker, tabs, help, palette, status line, quit."""

from __future__ import annotations

from pathlib import Path

from fake_client import FakeClient
from rich.style import Style
from textual.command import CommandPalette
from textual.visual import RenderOptions
from viewer_support import make_app, open_explore, render_text, screen_text, showing, wait_for

from tvis.tui import keys
from tvis.tui.app import TvisApp
from tvis.tui.help import ID_COLUMN_FROM, HelpScreen, help_table
from tvis.tui.run_picker import RunPicker


async def test_connecting_state_shows_the_target_before_the_agent_answers(tmp_path: Path):
    gate = []

    def slow_connect():
        while not gate:
            import time

            time.sleep(0.01)
        raise RuntimeError("never mind")

    app = TvisApp(slow_connect, "ssh gpu:~/runs", "halfcell")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(
            pilot, lambda: "connecting to ssh gpu:~/runs" in screen_text(app), "connecting"
        )
        gate.append(1)


async def test_connection_failure_shows_one_sentence_and_quits_with_an_error(tmp_path: Path):
    app = make_app(tmp_path / "nowhere")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.error, "the connection error")
        text = screen_text(app)
        assert "Could not connect" in text and "is not a folder" in text
        assert "Traceback" not in text
        await pilot.press("q")
    assert app.return_code == 1


async def test_single_run_opens_on_replay_then_explore_with_status_line(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page first")
        await open_explore(pilot)
        text = screen_text(app)
        assert "2 Explore" in text
        status = text.splitlines()[-1]
        for part in (
            run_dir.name[:10],
            "batch 0/1",
            "step 0",
            "sample 0",
            "value",
            "images halfcell",
        ):
            assert part in status, (part, status)
        assert app.internal_errors == []


async def test_run_picker_lists_runs_newest_first_and_opens_the_pick(two_runs: Path):
    app = make_app(two_runs)
    async with app.run_test(size=(120, 40)) as pilot:
        picker = await wait_for(
            pilot, lambda: isinstance(app.screen, RunPicker) and app.screen, "picker"
        )
        table = await wait_for(pilot, lambda: picker.query_one("RunTable"), "the runs table")
        await wait_for(pilot, lambda: table.row_count == 2, "two runs listed")
        first = str(table.get_row_at(0)[0])
        assert first != "20000101-000000_train_000000"  # the newer run is first
        await pilot.press("j", "enter")
        await open_explore(pilot)
        assert app.run_id == "20000101-000000_train_000000"


async def test_help_shows_the_keys_on_screen_first_then_every_other_binding(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        text = screen_text(app)
        assert "tree.expand" in text and "explore.search" in text
        assert text.index("Call tree") < text.index("Explore")  # the focused pane first
        listed = render_text(help_table(app, app.keymap, app.screen.first), width=110)
        assert listed.index("Inspector") < listed.index("Everywhere") < listed.index("Elsewhere")
        assert listed.index("Elsewhere") < listed.index("live.older")
        for _, scope in keys.SCOPES:
            for binding in scope:
                assert (
                    binding.id if not binding.id.startswith("app.page") else "app.page1"
                ) in listed
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), "help closed")


async def test_help_is_built_once_and_shown_again_with_the_keys_of_the_page_under_it(
    run_dir: Path,
):
    """A second `?` shows the same screen (nothing composed or mounted again) and the
    sections drawn the first time; over another page it lists that page's keys first, from
    the same drawn sections (not one section drawn again), and opens at its top."""
    from textual.containers import VerticalScroll
    from textual.widgets import Static

    from tvis.tui.help import HelpSections

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        app.ahead.stop()  # no quiet spell draws the help ahead: the `?` draws it here
        await pilot.press("question_mark")
        help = await wait_for(
            pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen, "help"
        )
        table = help.query_one("#help-table", Static)
        shown = await wait_for(
            pilot, lambda: isinstance(table.visual, HelpSections) and table.visual, "the help"
        )
        drawing = shown.drawing
        await wait_for(pilot, lambda: drawing.draws == len(drawing.sections), "every section")
        widgets = list(help.walk_children())
        await pilot.press("j", "j", "escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), "help closed")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: app.screen is help, "the same help screen")
        await pilot.pause()
        assert list(help.walk_children()) == widgets  # nothing mounted again
        assert table.visual is shown  # the same sections, in the same order
        assert help.query_one(VerticalScroll).scroll_y == 0  # at its top, not where it was left
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), "help closed")
        await pilot.press("3")
        await wait_for(pilot, lambda: app.current_mode == "loss", "the Loss page")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: app.screen is help, "the same help screen")
        text = await wait_for(pilot, lambda: showing(app, "loss."), "the Loss keys")
        assert text.index("loss.") < text.index("Everywhere") and "tree.expand" not in text
        assert table.visual is not shown and table.visual.drawing is drawing
        assert drawing.draws == len(drawing.sections)  # the Loss help drew nothing


async def test_help_drawn_section_by_section_reads_as_the_one_table(run_dir: Path):
    """The sections, drawn apart and stacked, are the help as one table: the same lines,
    the columns lined up, at a wide help and a narrow one (ids under the descriptions)."""
    for size in ((120, 40), (70, 40)):
        drawn, whole, wide = await help_drawn_and_whole(make_app(run_dir), size)
        assert drawn == whole
        assert any("tree.up" in line and "Up" in line for line in drawn) == wide


async def help_drawn_and_whole(app, size: tuple[int, int]) -> tuple[list[str], list[str], bool]:
    """The help of Explore as drawn on screen, section by section, and as one table; and
    whether it was wide enough for a column of ids."""
    from textual.widgets import Static

    async with app.run_test(size=size) as pilot:
        await open_explore(pilot)
        await pilot.press("question_mark")
        help = await wait_for(
            pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen, "help"
        )
        table = help.query_one("#help-table", Static)
        await wait_for(pilot, lambda: table.content_region.height > 100, "the help drawn")
        width = table.content_region.width
        options = RenderOptions(table._get_style, table.styles)
        drawn = table.visual._lines(width, table.visual_style, options)
        whole = render_text(help_table(app, app.keymap, help.first, width), width=width)
        return (
            [strip.text.rstrip() for strip in drawn],
            [line.rstrip() for line in whole.splitlines()],
            width >= ID_COLUMN_FROM,
        )


async def test_help_on_the_live_page_lists_the_live_keys_first():
    app = TvisApp(None, "live", "halfcell", live_address="127.0.0.1:0")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "live", "the Live page")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        text = screen_text(app)
        assert text.index("live.older") < text.index("Everywhere")
        assert "list.down" in text and "tree.down" not in text


async def test_a_remapped_pane_key_shows_its_new_letter_and_works(run_dir: Path):
    app = make_app(run_dir, keymap={"explore.layers": "L"})
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        bar = screen_text(app).splitlines()[1]
        assert " L layers " in bar and " y layers " not in bar
        await pilot.press("L")
        await wait_for(pilot, lambda: "layers" in page.visible_panes(), "the layers pane")


async def test_escape_steps_back_from_the_inspector_at_80x24(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("i")
        await wait_for(pilot, lambda: page.visible_panes() == ["inspector"], "the inspector")
        await pilot.press("escape")
        await wait_for(pilot, lambda: page.visible_panes() == ["calls"], "back on the tree")
        assert app.focused is page.calls.call_tree


async def test_the_tab_bar_hints_the_focused_panes_keys(run_dir: Path):
    app = make_app(run_dir, keymap={"tree.expand": "E"})
    async with app.run_test(size=(160, 40)) as pilot:
        await open_explore(pilot)
        # the hints follow the focus Explore's start gives the tree: the next frame has them
        tabs = await wait_for(
            pilot, lambda: "j down" in (line := screen_text(app).splitlines()[0]) and line, "hints"
        )
        assert "E expand" in tabs and "? keys" in tabs


async def test_keymap_remaps_a_binding_and_help_shows_the_new_key(run_dir: Path):
    app = make_app(run_dir, keymap={"app.toggle_grad": "G"})
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        await pilot.press("g")
        assert app.show_grad is False
        await pilot.press("G")
        assert app.show_grad is True


async def test_palette_opens_and_jumps_to_a_call_by_name(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"head")
        await wait_for(pilot, lambda: "go to head" in screen_text(app), "a call hit")
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: page.selection and page.selection.row.get("name") == "head",
            "head selected",
        )


async def test_the_palette_labels_textuals_own_commands_apart_from_tvis(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"screenshot")
        await wait_for(pilot, lambda: "Textual: Screenshot" in screen_text(app), "labelled")


async def test_q_quits_cleanly(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        await pilot.press("q")
    assert app.return_code == 0


async def test_a_run_still_recording_shows_live_and_follows_new_batches():
    client = FakeClient(n_batches=1, status="running")
    app = TvisApp(lambda: client, "fake", "halfcell")
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        assert "● live" in screen_text(app).splitlines()[-1]
        client.n_batches = 2  # the recorder finishes another batch
        await wait_for(pilot, lambda: app.batch == 1, "the new batch followed")
        await wait_for(pilot, lambda: page.calls.call_tree.batch_index == 1, "the tree on batch 1")
        client.status = "complete"
        await wait_for(
            pilot, lambda: "● live" not in screen_text(app).splitlines()[-1], "no longer live"
        )


async def test_live_only_opens_the_live_page_without_any_recording():
    app = TvisApp(None, "live", "halfcell", live_address="127.0.0.1:0")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "live", "the Live page")
        assert "1 Live" in screen_text(app)
        await pilot.press("q")
    assert app.return_code == 0


async def test_run_option_opens_that_run_without_the_picker(two_runs: Path):
    app = make_app(two_runs, run="20000101-000000_train_000000")
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        assert app.run_id == "20000101-000000_train_000000"
        assert not isinstance(app.screen, RunPicker)


async def test_run_option_naming_no_run_says_so(two_runs: Path):
    app = make_app(two_runs, run="nope")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.error, "the error")
        assert "there is no run 'nope'" in screen_text(app)


async def test_number_keys_switch_pages_and_each_page_gets_tabs_and_status(
    run_dir: Path,
):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        await pilot.press("6")
        await wait_for(pilot, lambda: app.current_mode == "live", "the Live page")
        await wait_for(
            pilot,
            lambda: app.screen.query("PageTabs") and app.screen.query("StatusLine"),
            "tab bar and status line on the Live page",
        )
        text = screen_text(app)
        assert "1 Replay" in text and "2 Explore" in text and "6 Live" in text
        assert app.page_screens["live"].server is None  # visiting binds no port
        await pilot.press("2")
        await wait_for(pilot, lambda: app.current_mode == "explore", "back on Explore")
        assert app.internal_errors == []


async def test_help_at_80x24_gives_descriptions_room_and_scrolls_with_j_and_k(run_dir):
    from textual.containers import VerticalScroll

    app = make_app(run_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_explore(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: "Open in inspector" in screen_text(app), "the help")
        line = next(r for r in screen_text(app).splitlines() if "Open in inspector" in r)
        assert line.index("Open in inspector") < 30  # not squeezed behind wide key/id columns
        box = app.screen.query_one(VerticalScroll)
        await pilot.press("j", "j", "j")
        await wait_for(pilot, lambda: box.scroll_y == 3, "three lines down")
        await pilot.press("k")
        await wait_for(pilot, lambda: box.scroll_y == 2, "one line up")


async def test_status_line_in_16_colours_keeps_the_lines_own_colour(run_dir):
    """With 16 colours the value marker's blue becomes ANSI dark blue on the line's grey:
    there the state is drawn in the line's own colour (bold), not in a colour of its own."""
    from rich.color import ColorSystem

    from tvis.tui.widgets.status_line import StatusLine

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        status = app.screen.query_one(StatusLine)
        app.console._color_system = ColorSystem.TRUECOLOR
        status._changed()
        coloured = [s for s in status.content.spans if Style.parse(str(s.style)).color]
        assert coloured  # 24-bit: the state has its colours
        app.console._color_system = ColorSystem.STANDARD
        status._changed()
        assert "value" in status.content.plain
        assert not [s for s in status.content.spans if Style.parse(str(s.style)).color]


async def test_a_first_visit_restyles_only_the_new_page_and_follows_the_theme(run_dir):
    """A page shown for the first time is styled as its widgets register: no whole-app
    re-parse and restyle on the switch (Textual's for a screen it takes for stale), and a
    theme chosen before the visit is the page's theme."""
    app = make_app(run_dir)
    restyles: list[bool] = []
    whole_app = app.refresh_css

    def counted(animate: bool = True) -> None:
        restyles.append(animate)
        whole_app(animate)

    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        app.theme = "textual-light"
        await pilot.pause()
        light = app.screen.query_one("StatusLine").styles.background
        app.refresh_css = counted  # type: ignore[method-assign]
        await pilot.press("3")
        await wait_for(pilot, lambda: app.current_mode == "loss", "the Loss page")
        await wait_for(pilot, lambda: app.screen.query("StatusLine"), "the Loss status line")
        assert app.screen.query_one("StatusLine").styles.background == light
        assert restyles == []
        assert app.internal_errors == []


async def test_a_page_is_restyled_whole_only_when_the_app_changed_while_it_was_away(run_dir):
    """A first visit restyles no page whole at its resumes (Textual sends two, each a restyle
    of every widget of the page, already styled as they registered); nor does a page shown
    again when nothing its rules can match changed meanwhile (Textual restyles it whole at
    every return: 20–25 ms of Loss `u` into Explore). One shown again after the app's
    colours went ANSI while it was away (``LineTable:ansi``; Textual restyles nothing for
    that) is restyled once. Pins Textual's ``ScreenResume.refresh_styles`` and
    its subclass-first dispatch."""
    from textual.screen import Screen

    app = make_app(run_dir)
    whole: list[str] = []  # the pages restyled whole, in order
    restyle = app.update_styles

    def counted(node, animate: bool = True) -> None:
        if isinstance(node, Screen) and node.id != "_default":
            whole.append(type(node).__name__)
        restyle(node, animate)

    app.update_styles = counted  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        page = await open_explore(pilot)
        await pilot.pause(0.1)
        assert whole == []
        await pilot.press("1")
        await wait_for(pilot, lambda: app.current_mode == "replay", "Replay again")
        await pilot.pause(0.1)
        await pilot.press("2")
        await wait_for(pilot, lambda: app.screen is page, "Explore again")
        await pilot.pause(0.1)
        assert whole == []  # both came back to an unchanged app
        await pilot.press("1")
        await wait_for(pilot, lambda: app.current_mode == "replay", "Replay again")
        await pilot.pause(0.1)
        app.ansi_color = True  # while Explore was away
        await pilot.pause(0.1)
        await pilot.press("2")
        await wait_for(pilot, lambda: app.screen is page, "Explore again")
        await pilot.pause(0.1)
        assert whole == ["ExplorePage"]
        await pilot.press("1")
        await wait_for(pilot, lambda: app.current_mode == "replay", "Replay again")
        await pilot.pause(0.1)
        await pilot.press("2")
        await wait_for(pilot, lambda: app.screen is page, "Explore again")
        await pilot.pause(0.1)
        assert whole == ["ExplorePage", "ReplayPage"]  # Replay left before the change
        assert app.internal_errors == []


async def test_the_run_is_asked_for_by_the_connection_itself_once(run_dir):
    """Connecting asks for the run it will open right after the list of runs, from the same
    worker (no hop to the UI thread, busy drawing "connecting …", and back); once."""
    import traceback

    app = make_app(run_dir)
    dial = app.link.connector
    asked: list[bool] = []  # per `run` request: whether the connection's worker sent it

    class Spy:
        def __init__(self, client):
            self.client, self.on_lost = client, None

        def call(self, method, **params):
            if method == "run":
                asked.append("_connect" in [f.name for f in traceback.extract_stack()])
            return self.client.call(method, **params)

        def __getattr__(self, name):
            return getattr(self.client, name)

    app.link.connector = lambda: Spy(dial())
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        assert asked == [True]
        assert app.run_name is not None and app.internal_errors == []


async def test_the_tab_bar_shown_again_unchanged_is_left_as_drawn(run_dir: Path):
    """Each visit shows the page's tab bar again: unchanged (a page built ahead composed it
    with its own tab current) it is left as drawn, asking no layout of the page under the
    key; changed, it is drawn again."""
    from tvis.tui.widgets.page_tabs import PageTabs

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        tabs = app.screen.query_one(PageTabs)
        await pilot.pause()
        drawn = tabs.visual
        tabs.show(list(tabs.titles), tabs.current)
        assert tabs.visual is drawn and not tabs._layout_required
        tabs.show(list(tabs.titles), 0)
        assert tabs.visual is not drawn
        await pilot.pause()
        assert " 1 Replay " in screen_text(app).splitlines()[0]
