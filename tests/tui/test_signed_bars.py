"""Signed one-line charts keep the sign: a zero axis, negatives on one side in the negative
colour, positives on the other, one scale for both."""

from __future__ import annotations

import math

from tvis.tui.widgets.sparkline import BLOCKS, signed_hbar, signed_sparkline


def test_signed_sparkline_raises_positives_and_hangs_negatives_from_the_axis():
    up, down = signed_sparkline([1.0, -1.0, 0.5, -0.25, math.nan], 5, "red", "blue")
    assert up.plain == f"{BLOCKS[8]} {BLOCKS[4]}  "
    assert down.plain == f" {BLOCKS[0]} {BLOCKS[6]} "  # reversed: the top 8/8 and 2/8 filled
    negative = [span for span in down.spans if "blue" in str(span.style)]
    assert [(s.start, "reverse" in str(s.style)) for s in negative] == [(1, True), (3, True)]
    assert all("red" in str(span.style) for span in up.spans)


def test_signed_hbar_puts_negatives_left_and_positives_right_of_one_axis():
    negative = "".join(text for text, _ in signed_hbar(-2.0, 2.0, 4, 4))
    positive = "".join(text for text, _ in signed_hbar(1.0, 2.0, 4, 4))
    assert negative == "████│    " and positive == "    │██  "
    half = signed_hbar(-0.25, 2.0, 4, 4)  # one eighth of the side: a reversed edge cell
    assert [kind for text, kind in half if text] == ["", "neg-edge", "axis", ""]
