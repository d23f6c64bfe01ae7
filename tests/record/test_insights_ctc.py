"""A CTC loss's texts: each sample's target ids and the model's greedy transcription, and
the character map found in the script however it leaves out (or names) the blank."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import record_here

from tvis.record.ctc_decode import collapse, decoded
from tvis.record.ctc_vocabulary import BLANK, of_sequence, without_blank
from tvis.store.reader import RunReader

CHARS = " abcdefghijklmnopqrstuvwxyz'"  # 28 characters: 29 classes with the blank at 0
T, B, FEATURES = 12, 3, 8


def _setup(classes: int = 29):
    torch.manual_seed(0)
    model = torch.nn.Linear(FEATURES, classes)
    frames = torch.randn(T // 3, B, FEATURES).repeat_interleave(3, 0)  # repeats to collapse
    targets = torch.tensor([[3, 4, 4, 0], [9, 1, 0, 0], [20, 21, 22, 23]])  # padded (B, S)
    target_lengths = [3, 2, 4]
    input_lengths = [12, 9, 7]
    return model, frames, targets, input_lengths, target_lengths


def _greedy(log_probs: torch.Tensor, input_lengths: list[int], blank: int) -> list[list[int]]:
    """The best path worked out another way: unique_consecutive on each sample's frames."""
    out = []
    for i, n in enumerate(input_lengths):
        labels = torch.unique_consecutive(log_probs[:n, i].argmax(-1))
        out.append([int(c) for c in labels if int(c) != blank])
    return out


def _record(tmp_path, concatenated: bool = False, blank: int = 0):
    model, frames, targets, input_lengths, target_lengths = _setup()
    if concatenated:
        targets = torch.cat([targets[i, :n] for i, n in enumerate(target_lengths)])

    def step():
        log_probs = F.log_softmax(model(frames), dim=-1)
        F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=blank).backward()

    outcome = record_here(step, tmp_path, steps=1)
    run = RunReader(outcome.run_dir)
    with torch.no_grad():
        log_probs = F.log_softmax(model(frames), dim=-1)
    return run, log_probs, input_lengths


@pytest.mark.parametrize("concatenated", [False, True])
def test_each_samples_target_and_greedy_transcription_are_recorded(tmp_path, concatenated):
    itos = {i + 1: c for i, c in enumerate(CHARS)}  # noqa: F841 (found by the recorder)
    run, log_probs, input_lengths = _record(tmp_path, concatenated)
    found = run.batch(0).record["loss"]["ctc"]
    assert found["blank"] == 0 and found["classes"] == 29
    assert found["targets"] == [[3, 4, 4], [9, 1], [20, 21, 22, 23]]
    assert found["preds"] == _greedy(log_probs, input_lengths, 0)
    assert len(found["preds"][0]) < input_lengths[0]  # each frame's class said once
    data = run.index()["data"]
    assert data["vocab"] == [BLANK, *CHARS]
    assert "itos dict" in data["vocab_source"] and "blank 0 added" in data["vocab_source"]


def test_a_string_indexed_from_one_is_the_character_map(tmp_path):
    text = CHARS  # noqa: F841 (not a map by this name, still one by the next)
    alphabet = CHARS  # noqa: F841 (found by the recorder)
    run, _, _ = _record(tmp_path)
    data = run.index()["data"]
    assert data["vocab"] == [BLANK, *CHARS] and "alphabet string" in data["vocab_source"]


def test_a_list_naming_its_blank_is_taken_whole(tmp_path):
    labels = ["_", *CHARS]  # noqa: F841 (found by the recorder)
    run, _, _ = _record(tmp_path)
    data = run.index()["data"]
    assert data["vocab"] == ["_", *CHARS] and "labels list (29 entries)" in data["vocab_source"]


def test_without_a_character_map_the_run_says_why(tmp_path):
    run, _, _ = _record(tmp_path)
    data = run.index()["data"]
    assert "vocab" not in data
    assert "no character map fits the CTC model's 29 classes (blank 0)" in data["vocab_why"]


def test_the_best_path_keeps_a_label_repeated_across_a_blank():
    assert collapse([1, 1, 0, 1, 2, 2, 0, 0, 3], 0) == [1, 1, 2, 3]
    assert collapse([5, 5, 5], 5) == []


def test_an_unbatched_call_is_one_sample():
    model, frames, _, _, _ = _setup()
    with torch.no_grad():
        log_probs = F.log_softmax(model(frames[:, 0]), dim=-1)  # (T, C)
    params = {"log_probs": log_probs, "targets": torch.tensor([3, 4]), "blank": 0}
    found = decoded({**params, "input_lengths": T, "target_lengths": torch.tensor(2)})
    assert found == {
        "blank": 0,
        "targets": [[3, 4]],
        "preds": _greedy(log_probs[:, None], [T], 0),
    }
    assert decoded({**params, "input_lengths": [T, T], "target_lengths": 2}) is None


def test_maps_that_leave_out_the_blank_wherever_it_is():
    chars = {i + 1: c for i, c in enumerate("abc")}
    assert without_blank(chars, 4, 0) == [BLANK, "a", "b", "c"]
    assert without_blank({c: i for i, c in chars.items()}, 4, 0) == [BLANK, "a", "b", "c"]
    assert without_blank({0: "a", 1: "b", 2: "c"}, 4, 3) == ["a", "b", "c", BLANK]
    for not_a_map in ({1: "a", 2: "b", 4: "c"}, {1: "a", 2: "b"}, {1: "a", 2: 3, 3: "c"}):
        assert without_blank(not_a_map, 4, 0) is None, not_a_map
    assert of_sequence("abc", "chars", 4, 0) == [BLANK, "a", "b", "c"]
    assert of_sequence(["<blank>", "a", "b", "c"], "labels", 4, 0) == [BLANK, "a", "b", "c"]
    assert of_sequence("abc", "path", 4, 0) is None  # a string by any name is not a map
    assert of_sequence("abb", "chars", 4, 0) is None  # nor one that repeats a character


def test_ctc_loss_and_gradients_unchanged(tmp_path):
    model, frames, targets, input_lengths, target_lengths = _setup()
    plain = F.ctc_loss(F.log_softmax(model(frames), -1), targets, input_lengths, target_lengths)
    plain.backward()
    plain_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    seen = []

    def step():
        log_probs = F.log_softmax(model(frames), dim=-1)
        loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths)
        seen.append(loss)
        loss.backward()

    record_here(step, tmp_path, steps=1)
    assert torch.equal(seen[0].detach(), plain.detach())
    for p, g in zip(model.parameters(), plain_grads, strict=True):
        assert torch.equal(p.grad, g)
