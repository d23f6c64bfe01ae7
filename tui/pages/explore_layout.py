"""Explore's panes and their widths, from the terminal's width alone.

The page sizes its panes from these before its first layout (``ExplorePage._size_panes``),
and the app asks for the first screen's card pictures with the run, before the page
exists, at the width the inspector will give them (``inspector_picture_width``): a picture
asked at another width would be asked again once the page is laid out. It imports nothing
the first page has not loaded: the app's prefetch thread imports it while that page builds.
"""

from __future__ import annotations

from fractions import Fraction

from tvis.tui.widgets.tensor_card import picture_width

WIDE_MIN = 160
"""Columns from which three panes fit side by side (tree 50, inspector 55, one more)."""

MEDIUM_MIN = 100
"""Columns from which the tree and one pane fit side by side; below, one pane at a time."""

SHARES: dict[str, dict[str, int]] = {
    "wide": {"calls": 30, "inspector": 34},
    "medium": {"calls": 42},
}
"""Per layout, the panes with a fixed share of the width, in percent; the last pane on
screen takes the rest."""

INSPECTOR_FRAME = 2 + 1
"""Columns of the inspector that are not its lines: its padding (one either side) and its
scroll rail."""


def layout_for(width: int) -> str:
    if width >= WIDE_MIN:
        return "wide"
    if width >= MEDIUM_MIN:
        return "medium"
    return "compact"


def inspector_width(width: int) -> int | None:
    """Columns of the inspector's pane (border included) on a terminal ``width`` wide, as
    Textual lays out the row of panes — each pane starts at the whole column its share so
    far reaches — or None where the first screen has no inspector (compact: the tree
    alone)."""
    layout = layout_for(width)
    if layout == "compact":
        return None
    shares = SHARES[layout]
    start = int(Fraction(width * shares["calls"], 100))
    if "inspector" not in shares:  # it takes the rest
        return width - start
    return int(Fraction(width * (shares["calls"] + shares["inspector"]), 100)) - start


def last_pane_width(width: int) -> int:
    """Columns of the last pane on screen (the one that takes the rest), on a terminal
    ``width`` wide, as Textual lays out the row of panes."""
    shares = SHARES.get(layout_for(width), {})
    return width - int(Fraction(width * sum(shares.values()), 100))


def inspector_picture_width(width: int) -> int | None:
    """Columns the first Explore screen's cards ask their pictures at, on a terminal
    ``width`` wide (None: no inspector on it). In the wide layout the inspector is divided
    from the pane beside it by a border of one column."""
    pane = inspector_width(width)
    if pane is None:
        return None
    border = 1 if layout_for(width) == "wide" else 0
    return picture_width(pane - border - INSPECTOR_FRAME)


def shown_inspector_picture_width(width: int) -> int:
    """Columns the cards ask their pictures at once the inspector is on screen, on a
    terminal ``width`` wide: in the compact layout it is shown alone, the whole width."""
    first = inspector_picture_width(width)
    return picture_width(width - INSPECTOR_FRAME) if first is None else first
