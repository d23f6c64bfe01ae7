"""Every key binding of the viewer, each with an id so a user can remap it.

A keymap is a JSON object ``{"binding id": "keys"}`` read from ``$TVIS_KEYMAP`` or
``~/.config/tvis/keymap.json``; e.g. ``{"tree.down": "j,down,ctrl+n"}``. The help screen is
generated from the scopes below, so it lists exactly the keys that work.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from textual.binding import Binding


def _b(
    keys: str, action: str, description: str, id: str, show: bool = False, priority: bool = False
) -> Binding:
    return Binding(
        keys, action, description, show=show, id=id, tooltip=description, priority=priority
    )


def page_bindings() -> list[Binding]:
    """``1``–``9`` jump to the n-th page in the tab bar."""
    return [_b(str(n), f"page({n})", f"page {n}", f"app.page{n}") for n in range(1, 10)]


APP = [
    _b("q", "quit", "Quit", "app.quit", show=True),
    _b("question_mark,f1", "help", "Keys", "app.help", show=True),
    _b("ctrl+p", "command_palette", "Palette", "app.palette", show=True),
    _b("r", "pick_run", "Runs", "app.runs", show=True),
    _b("g", "toggle_grad", "Value / gradient", "app.toggle_grad", show=True),
    _b("left_square_bracket", "sample(-1)", "Previous sample", "app.sample_prev"),
    _b("right_square_bracket", "sample(1)", "Next sample", "app.sample_next"),
    _b("full_stop", "batch(1)", "Next batch", "app.batch_next"),
    _b("comma", "batch(-1)", "Previous batch", "app.batch_prev"),
    _b("R", "reconnect", "Reconnect after the connection dropped", "app.reconnect"),
    _b("left_curly_bracket", "rank(-1)", "Previous rank (multi-process runs)", "app.rank_prev"),
    _b("right_curly_bracket", "rank(1)", "Next rank (multi-process runs)", "app.rank_next"),
    *page_bindings(),
]

EXPLORE = [
    _b("c", "pane('calls')", "Call tree", "explore.calls"),
    _b("i", "pane('inspector')", "Inspector", "explore.inspector"),
    _b("s", "pane('source')", "Source", "explore.source"),
    _b("y", "pane('layers')", "Layers table", "explore.layers"),
    _b("t", "pane('timeline')", "Timeline", "explore.timeline"),
    _b("p", "pane('step')", "Step (parameters)", "explore.step"),
    _b("a", "pane('samples')", "Samples", "explore.samples"),
    _b("m", "toggle_mode", "Batch / step mode", "explore.mode"),
    _b("slash", "search", "Search calls", "explore.search"),
    _b("f", "cycle_filter", "Filter by kind", "explore.filter"),
    _b("d", "goto_source('def')", "Source of the definition", "explore.goto_def"),
    _b("u", "goto_source('site')", "Source of the call site", "explore.goto_site"),
    _b("escape", "back", "Back to the call tree", "explore.back"),
]

TREE = [
    _b("j,down", "cursor_down", "Down", "tree.down"),
    _b("k,up", "cursor_up", "Up", "tree.up"),
    _b("l,right", "expand", "Expand", "tree.expand"),
    _b("h,left", "collapse", "Collapse / parent", "tree.collapse"),
    _b("space", "toggle_node", "Expand / collapse", "tree.toggle"),
    _b("enter", "select_cursor", "Open in inspector", "tree.select"),
    _b("home", "scroll_home", "First call", "tree.home"),
    _b("end", "scroll_end", "Last loaded call", "tree.end"),
    _b("pagedown", "page_down", "Page down", "tree.page_down"),
    _b("pageup", "page_up", "Page up", "tree.page_up"),
]

LIST = [
    _b("j,down", "cursor_down", "Down", "list.down"),
    _b("k,up", "cursor_up", "Up", "list.up"),
    _b("g", "first_row", "First row", "list.first"),
    _b("G", "last_row", "Last row", "list.last"),
]
"""Keys of every list and table (see ``widgets.lists``); enter selects the row in each."""

LAYERS = [
    _b("o", "sort_next", "Sort by next column", "layers.sort"),
    _b("O", "sort_reverse", "Reverse sort", "layers.reverse"),
    _b("enter", "select", "Show the call in the tree", "layers.select"),
    _b("pagedown", "page_down", "Page down", "layers.page_down"),
    _b("pageup", "page_up", "Page up", "layers.page_up"),
]

INSPECTOR = [
    _b("j,down", "next_card", "Next tensor", "inspector.next"),
    _b("k,up", "prev_card", "Previous tensor", "inspector.prev"),
    _b("greater_than_sign,l,right", "index(1)", "Next leading index", "inspector.index_next"),
    _b("less_than_sign,h,left", "index(-1)", "Previous leading index", "inspector.index_prev"),
    _b("e", "export", "Save the tensor to .npy (and .pt)", "inspector.export"),
    _b("v", "cycle_view", "Layer view (On image · Neurons · Stats)", "inspector.view"),
]

TIMELINE = [
    _b("l,right", "bar(1)", "Next bar", "timeline.next"),
    _b("h,left", "bar(-1)", "Previous bar", "timeline.prev"),
    _b("k,up", "lane(-1)", "Up a level", "timeline.up"),
    _b("j,down", "lane(1)", "Down a level", "timeline.down"),
    _b("plus,equals_sign", "zoom(2)", "Zoom in", "timeline.zoom_in"),
    _b("minus", "zoom(0.5)", "Zoom out", "timeline.zoom_out"),
    _b("enter", "select_bar", "Select the call", "timeline.select"),
]

SOURCE = [
    _b("j,down", "cursor(1)", "Down", "source.down"),
    _b("k,up", "cursor(-1)", "Up", "source.up"),
    _b("n", "next_annotated(1)", "Next executed line", "source.next"),
    _b("N", "next_annotated(-1)", "Previous executed line", "source.prev"),
    _b("pagedown", "cursor(20)", "Page down", "source.page_down"),
    _b("pageup", "cursor(-20)", "Page up", "source.page_up"),
    _b("enter", "select_line", "Select the line's call", "source.select"),
    _b("F", "next_file", "Next source file", "source.file"),
]

LIVE = [
    _b("L", "listen", "Listen for catches (on a free port if taken)", "live.listen"),
    # Priority: the table would take left/right for its columns, the app [ ] for samples.
    _b("left_square_bracket,left", "step(-1)", "Older value", "live.older", priority=True),
    _b("right_square_bracket,right", "step(1)", "Newer value", "live.newer", priority=True),
    _b("end", "newest", "Follow the newest value", "live.newest", priority=True),
    _b(
        "f",
        "rank_filter",
        "Show one rank's catches, the next, then all",
        "live.rank",
        priority=True,
    ),
]

SEARCH = [
    _b("escape", "close", "Back to the tree", "calls.close"),
]

HITS = [
    _b("escape", "close", "Back to the tree", "hits.close"),
]

RUNS = [
    _b("escape", "cancel", "Close the run picker", "runs.close"),
]

HELP = [
    _b("escape,q,question_mark,f1", "dismiss", "Close the keys", "help.close"),
    _b("j,down", "scroll(1)", "Scroll down", "help.down"),
    _b("k,up", "scroll(-1)", "Scroll up", "help.up"),
    _b("pagedown,space", "scroll(10)", "Page down", "help.page_down"),
    _b("pageup", "scroll(-10)", "Page up", "help.page_up"),
]

REPLAY = [
    _b("space", "play", "Play / pause", "replay.play", show=True),
    _b("right,l", "step(1)", "Step forward", "replay.next"),
    _b("left,h", "step(-1)", "Step back", "replay.prev"),
    _b("n", "jump(1)", "Next phase", "replay.phase_next"),
    _b("N", "jump(-1)", "Previous phase", "replay.phase_prev"),
    _b("home", "seek_end(0)", "Start of the recording", "replay.start"),
    _b("end", "seek_end(1)", "End of the recording", "replay.end"),
    _b("z", "cycle_size", "Step size (layer · call · phase · batch)", "replay.size", show=True),
    _b("plus,equals_sign", "speed(1)", "Faster", "replay.faster"),
    _b("minus", "speed(-1)", "Slower", "replay.slower"),
    _b("v", "cycle_view", "Layer view (On image · Neurons · Stats)", "replay.view", show=True),
    _b("pagedown", "neurons_page(1)", "Next neurons", "replay.neurons_next"),
    _b("pageup", "neurons_page(-1)", "Previous neurons", "replay.neurons_prev"),
    _b("o", "toggle_light", "Open / close a light (no-grad) group", "replay.light", show=True),
    _b("enter", "explore", "Open the layer in Explore (a light group: open it)", "replay.explore"),
]

LAYER_VIEWS = [
    _b("shift+up", "place(-1,0)", "Picked place up (On image)", "views.place_up"),
    _b("shift+down", "place(1,0)", "Picked place down", "views.place_down"),
    _b("shift+left", "place(0,-1)", "Picked place left", "views.place_left"),
    _b("shift+right", "place(0,1)", "Picked place right", "views.place_right"),
    _b("backspace", "forget_place", "Forget the place (attention: back to [CLS])", "views.forget"),
]
"""Keys of the On image view wherever the layer views are (Replay, Explore's inspector):
the picked place's values, or for attention the query patch whose gaze is painted."""

LOSS = [
    _b("o", "sort_worst", "Worst first / sample order", "loss.sort"),
    _b("l,right", "token(1)", "Next token", "loss.token_next"),
    _b("h,left", "token(-1)", "Previous token", "loss.token_prev"),
    _b("shift+right", "cell(0,1)", "Confusion cell right", "loss.cell_right"),
    _b("shift+left", "cell(0,-1)", "Confusion cell left", "loss.cell_left"),
    _b("shift+down", "cell(1,0)", "Confusion cell down", "loss.cell_down"),
    _b("shift+up", "cell(-1,0)", "Confusion cell up", "loss.cell_up"),
    _b("b", "toggle_scope", "Confusion: this batch / all batches", "loss.scope"),
    _b("u", "goto_loss_call", "The loss call in Explore", "loss.goto_call"),
]

WEIGHTS = [
    _b("w", "cycle_which", "Weight / gradient / update Δw", "weights.which"),
    _b("n", "slide(1)", "Next recorded step", "weights.step_next"),
    _b("p", "slide(-1)", "Previous recorded step", "weights.step_prev"),
    _b("o", "sort_next", "Sort by next column", "weights.sort"),
    _b("O", "sort_reverse", "Reverse sort", "weights.reverse"),
    _b("a", "toggle_all", "All layers / one layer", "weights.all"),
    _b("greater_than_sign", "filters(1)", "Next filters of a conv kernel", "weights.filters_next"),
    _b("less_than_sign", "filters(-1)", "Previous filters", "weights.filters_prev"),
]

RANKS = [
    _b("x", "first_failure", "Rank that failed first", "ranks.failure"),
]

INSIGHTS = [
    _b("a", "view('attention')", "Attention", "insights.attention", show=True),
    _b("c", "view('gradcam')", "Grad-CAM", "insights.gradcam", show=True),
    _b("e", "view('embeddings')", "Embeddings", "insights.embeddings", show=True),
    _b("h,left", "move(0, -1)", "Cursor left", "insights.left"),
    _b("l,right", "move(0, 1)", "Cursor right", "insights.right"),
    _b("k,up", "move(-1, 0)", "Cursor up / previous point", "insights.up"),
    _b("j,down", "move(1, 0)", "Cursor down / next point", "insights.down"),
    _b("less_than_sign", "layer(-1)", "Previous layer (shallower)", "insights.layer_prev"),
    _b("greater_than_sign", "layer(1)", "Next layer (deeper)", "insights.layer_next"),
    _b("left_curly_bracket", "head(-1)", "Previous head (attention)", "insights.head_prev"),
    _b("right_curly_bracket", "head(1)", "Next head (attention)", "insights.head_next"),
    _b("o", "rollout", "Rollout across layers (attention)", "insights.rollout"),
    _b("w", "heads", "All heads, by entropy (attention)", "insights.heads"),
    _b("t", "which", "Predicted / true class (Grad-CAM)", "insights.which"),
    _b(
        "m",
        "mode",
        "One / samples / layers (Grad-CAM); layers / tables (Embeddings)",
        "insights.mode",
    ),
    _b("slash", "search", "Search tokens (embedding table)", "insights.search"),
    _b("escape", "close_search", "Close the search", "insights.close_search"),
]

SCOPES: list[tuple[str, list[Binding]]] = [
    ("Everywhere", APP),
    ("Replay", REPLAY),
    ("Explore", EXPLORE),
    ("Call tree", TREE),
    ("Inspector", INSPECTOR),
    ("Layer views (Replay, inspector)", LAYER_VIEWS),
    ("Source", SOURCE),
    ("Layers", LAYERS),
    ("Timeline", TIMELINE),
    ("Loss", LOSS),
    ("Weights", WEIGHTS),
    ("Insights", INSIGHTS),
    ("Ranks", RANKS),
    ("Live", LIVE),
    ("Lists and tables", LIST),
    ("Search results", [*SEARCH, *HITS]),
    ("Run picker", RUNS),
    ("This screen", HELP),
]
"""The scopes the help screen lists, in the order a user meets them."""


def binding(id: str) -> Binding:
    """The binding with ``id`` as the table defines it."""
    return next(b for _, scope in SCOPES for b in scope if b.id == id)


def keys_of(id: str, keymap: dict[str, str]) -> list[str]:
    """The keys that trigger binding ``id`` once the user's keymap is applied."""
    spec = keymap.get(id, binding(id).key)
    return [k.strip() for k in spec.split(",") if k.strip()]


def shown(app, id: str) -> str:
    """How binding ``id``'s first key reads on screen after ``app``'s keymap (``"c"``, ``"^p"``)."""
    first = keys_of(id, getattr(app, "keymap", None) or {})[0]
    return app.get_key_display(Binding(first, ""))


def hint(app, *parts: tuple[str | tuple[str, ...], str]) -> str:
    """A line of key hints as the user's keymap has them, e.g. ``hjkl cursor · <> layer``:
    each part is the binding ids (one, or several shown together) and what they do."""
    shown_parts = []
    for ids, what in parts:
        names = [shown(app, i) for i in ((ids,) if isinstance(ids, str) else ids)]
        # hjkl, <>, [] read as one; two letters (n/p, o/O) or longer names need the slash
        single = all(len(n) == 1 for n in names)
        together = single and (len(names) > 2 or not any(n.isalnum() for n in names))
        joined = "".join(names) if together else "/".join(names)
        shown_parts.append(f"{joined} {what}")
    return " · ".join(shown_parts)


def keymap_path() -> Path:
    env = os.environ.get("TVIS_KEYMAP")
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "tvis" / "keymap.json"


def load_keymap(path: Path | None = None) -> tuple[dict[str, str], str | None]:
    """The user's keymap and, when the file is unusable, a sentence saying why (never raises)."""
    path = path or keymap_path()
    if not path.is_file():
        return {}, None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return {}, f"ignored the keymap {path}: {e}"
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        return {}, f"ignored the keymap {path}: it must map binding ids to key strings."
    known = {b.id for _, scope in SCOPES for b in scope}
    unknown = sorted(set(data) - known)
    if unknown:
        return {k: v for k, v in data.items() if k in known}, (
            f"keymap {path}: unknown binding ids {', '.join(unknown)}"
        )
    return data, None
