"""The histogram widget labels what is approximate about it."""

from __future__ import annotations

from tvis.tui.widgets.histogram import histogram


def test_subsampled_histogram_says_it_is_sampled():
    hist = {"lo": -1.0, "hi": 1.0, "counts": list(range(32)), "sampled": 33}
    assert "sampled 1/33" in histogram(hist, 48, diverging=False).plain


def test_whole_histogram_has_no_sampling_label():
    hist = {"lo": -1.0, "hi": 1.0, "counts": list(range(32))}
    text = histogram(hist, 48, diverging=False).plain
    assert "sampled" not in text and text.rstrip().endswith("1")
