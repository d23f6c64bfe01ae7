"""The tab bar: the pages that exist for what is open, each with its number key."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widgets import Static


class PageTabs(Static):
    """``1 Explore  2 Live`` with the current page highlighted; click or press the number."""

    DEFAULT_CSS = """
    PageTabs { dock: top; height: 1; background: $panel; padding: 0 1; }
    """

    def show(self, titles: list[str], current: int | None, right: str = "") -> None:
        text = Text()
        for i, title in enumerate(titles):
            style = Style(
                reverse=i == current, bold=i == current, meta={"@click": f"app.page({i + 1})"}
            )
            text.append(f" {i + 1} {title} ", style=style)
            text.append(" ")
        if right:
            pad = max(1, self.size.width - 2 - text.cell_len - len(right))
            text.append(" " * pad + right, style="dim")
        self.update(text)
