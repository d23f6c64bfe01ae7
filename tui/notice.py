"""A full-screen sentence: "connecting to …", or what went wrong and what to do."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tvis.tui import colors


class Notice(Static):
    """Centered message with an optional hint line."""

    DEFAULT_CSS = """
    Notice { width: 100%; height: 1fr; content-align: center middle; text-align: center; padding: 1 2; }
    """

    def say(self, message: str, hint: str = "", error: bool = False) -> None:
        text = Text(message, style=f"bold {colors.BAD}" if error else "bold")
        if hint:
            text.append("\n\n" + hint, style=colors.MUTED)
        self.update(text)
