"""The histogram widget labels what is approximate about it."""

from __future__ import annotations

from tvis.tui.widgets.histogram import histogram


def test_subsampled_histogram_says_it_is_sampled():
    hist = {"lo": -1.0, "hi": 1.0, "counts": list(range(32)), "sampled": 33}
    assert "sampled 1/33" in histogram(hist, 48, diverging=False, depth="truecolor").plain


def test_whole_histogram_has_no_sampling_label():
    hist = {"lo": -1.0, "hi": 1.0, "counts": list(range(32))}
    text = histogram(hist, 48, diverging=False, depth="truecolor").plain
    assert "sampled" not in text and text.rstrip().endswith("1")


def test_a_constant_says_its_value_instead_of_a_made_up_axis():
    hist = {"lo": 1.769, "hi": 2.769, "counts": [1] + [0] * 31}
    assert histogram(hist, 48, diverging=False, depth="truecolor").plain == "every value is 1.769"


def test_a_sampled_histogram_in_one_bin_keeps_its_axis():
    hist = {"lo": 0.0, "hi": 5.0, "counts": [9] + [0] * 31, "sampled": 4}
    assert "sampled 1/4" in histogram(hist, 48, diverging=False, depth="truecolor").plain
