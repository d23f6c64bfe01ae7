"""What every page's screen shares: a resume that restyles the page only when it comes back,
and frames that are whole.

Textual restyles a whole screen at each ``ScreenResume``, and a page's first visit sends two
(``App._init_mode`` posts one, ``switch_mode`` another): on the first screen that was two
restyles of every widget of Replay, then two of Explore's, each 20–60 ms of the app's
thread, restyling widgets that were styled as they registered, with the stylesheet of
that moment (``TvisApp._build_page``). What the restyle catches up on is what changed while
the page was away. A first visit has missed none of it: its two resumes restyle nothing. A
page that comes back restyles only when the app-wide state its
rules can match changed since it was last shown (``_app_state``: the terminal's focus, the
theme's darkness, ANSI or no colour, inline; a whole-screen restyle there was 20–25 ms of
every return to a page, Loss `u` into Explore among them, for nothing).

What stays covered without it: a class set on a hidden page's widget restyles that widget
at once (Textual's ``add_class``), as does a widget's own focus, hover (Textual's
``_set_mouse_over`` at the suspend restyles the widget it leaves) or disabling; a
stylesheet changed meanwhile (a theme) is re-applied by ``switch_mode`` itself
(``_css_update_count``), and a widget mounted later is styled as it registers. Not covered
on a first visit: the app's own ``:focus``/``:blur`` pseudo-classes in a rule of a page's
widgets, which no page uses (Textual's only one is its ``Header``'s).

A page also draws nothing while the app holds the display. ``switch_mode`` holds it for the
switch (on a page's first visit until the page has mounted, ``TvisApp.action_page``), and a
layout inside the hold still rendered the whole page — 30–40 ms of the app's thread on
Explore's first visit — for a frame the app then dropped (``App._display``). The end of the
hold refreshes the screen, which draws the page once, then.

A key's screen is drawn in one frame. Textual draws a layout's frame, then, a screen update
later (20–40 ms), what the layout itself asked for: the scroll bars and virtual sizes it
set, the layouts that auto-height containers and newly overflowing content need. A pane's
first showing was complete in its third frame. Here a layout runs its follow-ups at once
(``LAYOUT_PASSES``) and draws, in its frame, every widget it asked to repaint. A focus
change does not repaint the whole page either (``focused``).
"""

from __future__ import annotations

from textual import events
from textual.geometry import Size
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget

FRAME_WAIT_S = 0.002
FRAME_WAITS = 3
"""A frame waits at most this often, this long each time, for asks on their way to it."""

LAYOUT_PASSES = 3
"""Layouts run for one frame at most: the first, then what it asked for, then once more
(a scroll bar that appears once the content is known to overflow)."""


def _displayed(widget: Widget) -> bool:
    """Whether ``widget`` takes part in its screen's layout (it and its ancestors shown)."""
    return widget.display and all(a.display for a in widget.ancestors if isinstance(a, Widget))


def _lay_out_again(widget: Widget) -> None:
    """What Textual does for a widget that asked for a layout before posting it to the
    screen (``Widget._check_refresh``): its arrangement and its auto-sized ancestors' are
    made again at the next layout."""
    widget._layout_required = False
    for ancestor in widget.ancestors:
        if not isinstance(ancestor, Widget):
            break
        ancestor._clear_arrangement_cache()
        ancestor._layout_updates += 1
        if not ancestor.styles.auto_dimensions:
            break


class Page(Screen):
    """A page of the viewer (a Textual screen installed as an app mode)."""

    focused: Reactive[Widget | None] = Reactive(None, repaint=False)
    """Textual's, without its repaint of the whole screen at every focus change: the widgets
    that gain and lose the focus repaint themselves (their restyle), and the rest of the
    screen — 15–22 KB of a pane key's output — was sent again unchanged."""

    _frame_waits = 0
    """How many times the frame due has waited for asks on the way (``FRAME_WAITS``)."""

    _frame_held = False
    """While a layout pass runs that another will follow, in the same frame."""

    _asked_before_layout: set[Widget] | None = None
    """During a layout, the widgets that had asked to be repainted before it began."""

    _shown_in: tuple[object, ...] | None = None
    """``_app_state`` at the page's last resume (its styles matched it then); None before."""

    def _app_state(self) -> tuple[object, ...]:
        """What a rule can match outside the page's own widgets: the app's pseudo-classes
        (``App:blur``, ``:dark``/``:light``, ``:ansi``, ``:nocolor``, ``:inline``). Textual
        restyles the screen on show for some of their changes and for some (``:ansi``)
        none, so a change while the page was shown counts too. A changed stylesheet is
        ``switch_mode``'s to re-apply."""
        app = self.app
        return (
            app.app_focus,
            app.current_theme.dark,
            app.native_ansi_color,
            app.no_color,
            app.is_inline,
        )

    def _screen_resized(self, size: Size) -> None:
        # Textual's (private), called by ``switch_mode`` as a page is shown again: it laid
        # the page out and drew it at once, and the ScreenResume that follows repainted the
        # whole page a frame later (two writes of the page, 15–17 KB each). At its size
        # already, the page is laid out and drawn once, in the resume's frame. A terminal
        # resized goes Textual's way.
        switching = getattr(self.app, "switching_page", False)
        if switching and size == self.size and self.is_attached:
            self._layout_required = True
            self.check_idle()
            return
        super()._screen_resized(size)

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        # Runs before Screen's own handler, which restyles the page when this is True.
        state = self._app_state()
        changed = self._shown_in is not None and self._shown_in != state
        event.refresh_styles = event.refresh_styles and changed
        self._shown_in = state

    def _on_timer_update(self) -> None:
        # Textual's (private): the screen's frame, at its update timer's tick. A widget
        # that asked to be repainted or laid out tells the screen when its own task next
        # runs, and one with a message waiting (the Focus and Blur of a focus move, a
        # watcher's callback) has yet to ask; at the tick, it was drawn a frame later,
        # 20–40 ms on (Tab: the panes' restyle, then the inspector's mark and the tab
        # bar's keys). The frame waits for them, a few milliseconds at most.
        if self._frame_waits < FRAME_WAITS and self.is_current and self._asks_on_the_way():
            self._frame_waits += 1
            self._update_timer.pause()
            self.set_timer(FRAME_WAIT_S, self._on_timer_update)
            return
        self._frame_waits = 0
        super()._on_timer_update()

    def _asks_on_the_way(self) -> bool:
        """Whether a widget on screen has asked for a repaint or a layout that has not
        reached the screen yet, or has a message waiting that may ask for one."""
        # A focus move on its way (``Widget.focus`` goes through the app), or the screen's
        # own messages: the repaints widgets have told it of and it has not taken yet.
        if self.app.message_queue_size or self.message_queue_size:
            return True
        return any(
            w._repaint_required or w._layout_required or w.message_queue_size
            for w in self._compositor.visible_widgets
            if w is not self  # the screen's own asks are this frame's to draw
        )

    def _refresh_layout(self, size: Size | None = None, scroll: bool = False) -> None:
        # Textual's (private). A layout that sizes new content asks for more as it goes:
        # auto-height containers measured with their children's cached heights, scroll
        # bars that appear once the content is known to overflow. Textual laid each out
        # and drew it in a frame of its own, a screen update apart, so a pane's first
        # showing was complete in its third frame (≈ 80 ms after the one that showed it).
        # Here those layouts run at once, and only the last is drawn.
        if scroll:  # a scroll's partial reflow: Textual's own
            super()._refresh_layout(size, scroll)
            return
        widgets = list(self.walk_children(Widget))
        # What asks to be repainted before the layout runs is not the layout's doing;
        # what asks while it runs is (see `_compositor_refresh`).
        self._asked_before_layout = {w for w in widgets if w._repaint_required}
        try:
            for passes_left in range(LAYOUT_PASSES - 1, -1, -1):
                waiting = {w for w in widgets if w._layout_required}
                self._frame_held = passes_left > 0
                try:
                    super()._refresh_layout(size, scroll)
                finally:
                    self._frame_held = False
                # Not only the visible (scroll bars among them, which are no one's
                # children): a widget laid out at no size or scrolled out of view (an
                # empty picture's row) asks too, and would have a frame of its own.
                asked = {
                    w
                    for w in (*self._compositor.visible_widgets, *widgets)
                    if w._layout_required and w not in waiting and _displayed(w)
                }
                if not asked or not passes_left:
                    break
                for widget in asked:
                    _lay_out_again(widget)
                widgets = list(self.walk_children(Widget))
            if passes_left and self.is_current:
                self._compositor_refresh()  # the pass drawn is the last, which was held
        finally:
            self._asked_before_layout = None

    def _compositor_refresh(self) -> None:
        # Textual's (private): render what changed and hand it to the app to write, which
        # writes nothing while a batch holds the display. Drawn when the batch ends.
        if self._frame_held or (self.app._batch_count and self is self.app.screen):
            return
        if self is self.app.screen and self._asked_before_layout is not None:
            self._draw_what_the_layout_asked()
        super()._compositor_refresh()

    def _draw_what_the_layout_asked(self) -> None:
        """Widgets on screen that asked to be repainted while this layout ran are drawn in
        its frame. A layout gives a scrolling widget its size, and its scroll bars their
        extent; a widget its virtual size; a view placed by the size it gets, its scroll:
        each asks for a repaint as it happens, and Textual drew them in a frame of their own,
        a screen update later (20–40 ms): when a pane key's screen was complete. The layout
        runs without an await, so what they draw is whole."""
        before = self._asked_before_layout or set()
        compositor = self._compositor
        due = {w for w in compositor.visible_widgets if w._repaint_required and w not in before}
        if due:
            for widget in due:
                widget._repaint_required = False  # its Update would draw it again
            compositor.update_widgets(due)
