"""The `?` / F1 screen: every key of the viewer, generated from the bindings (after the
user's keymap), so it never disagrees with what the keys do."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tvis.tui import colors, keys


def effective_keys(binding: Binding, keymap: dict[str, str]) -> list[str]:
    """The keys that trigger ``binding`` once the user's keymap is applied."""
    spec = keymap.get(binding.id or "", binding.key)
    return [k.strip() for k in spec.split(",") if k.strip()]


def key_label(app, key: str) -> str:
    return app.get_key_display(Binding(key, ""))


def help_table(app, keymap: dict[str, str]) -> Table:
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("keys", style="bold", no_wrap=True, min_width=12)
    table.add_column("does")
    table.add_column("id", style=colors.MUTED, no_wrap=True)
    for title, scope in keys.SCOPES:
        table.add_row(Text(title, style=f"bold {colors.PHASE['forward']}"), "", "")
        for binding in scope:
            if binding.id and binding.id.startswith("app.page"):
                if binding.id == "app.page1":  # the nine page keys read better as one row
                    table.add_row("1 … 9", "jump to the n-th page of the tab bar", "app.page1…9")
                continue
            shown = " ".join(key_label(app, k) for k in effective_keys(binding, keymap))
            table.add_row(shown, binding.description, binding.id or "")
        table.add_row("", "", "")
    return table


class HelpScreen(ModalScreen[None]):
    """Every key, grouped by where it works."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close", id="help.close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 110; height: 90%; border: round $accent; padding: 0 1; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(
                Text("Keys — remap any of them by id in " + str(keys.keymap_path()), style="bold")
            )
            yield Static(help_table(self.app, self.app.keymap))
            yield Static(Text("escape closes", style=colors.MUTED))
