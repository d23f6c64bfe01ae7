"""Scripts in styles the other wild scripts do not have (tests/wild/scripts/<name>/train.py,
written as their public originals are): an LLM fine-tuning loop whose blocks run under
activation checkpointing, a Hugging Face-style model that computes its loss inside
forward from ``labels``, the PyTorch tutorial's GRU translator with teacher forcing and
two vocabularies, a multi-label tagger trained with BCEWithLogitsLoss, and a speech
model trained with CTC.

Each is recorded with `tvis run` as a user runs it, and what the viewer is given is
checked against what a reader of the script knows, computed here from the script's own
classes and the same seeds: each sample's loss, the texts, the labels sets.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from support import FirstBatch, printed_under_tvis, record_scripts

from tvis.agent.client import LocalClient

SCRIPTS = Path(__file__).resolve().parent / "scripts"
NAMES = (
    "ckpt_llama_finetune",
    "hf_loss_in_model",
    "seq2seq_gru_teacher",
    "multilabel_bce",
    "multilabel_label2id",
    "ctc_speech",
)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path | str]:
    root = tmp_path_factory.mktemp("wild_styles")
    return record_scripts(SCRIPTS, NAMES, root)


def _client(recordings, name: str) -> LocalClient:
    runs = recordings[name]
    assert isinstance(runs, Path), f"{name} failed under tvis:\n{runs}"
    return LocalClient(runs)


def _script(name: str) -> dict:
    """The script's classes and functions, its ``__main__`` block not run."""
    return runpy.run_path(str(SCRIPTS / name / "train.py"), run_name="wild_script")


def test_every_script_prints_under_tvis_what_it_prints_plainly(recordings):
    for name, runs in recordings.items():
        assert isinstance(runs, Path), f"{name} failed:\n{runs}"
        plain, lines = printed_under_tvis(runs)
        assert lines and lines == plain[: len(lines)], name  # same losses, same order


def test_checkpointed_blocks_are_recorded_once_with_their_activations_and_gradients(
    recordings,
):
    runs = recordings["ckpt_llama_finetune"]
    assert isinstance(runs, Path), runs
    # Both recorded steps print the loss and the clipped gradient's norm at full precision:
    # the recomputed forwards in backward gave the same gradients as the plain run's.
    printed = [x for x in (runs.parent / "tvis.txt").read_text().splitlines() if "iter" in x]
    assert len(printed) == 2
    with _client(recordings, "ckpt_llama_finetune") as client:
        rec = FirstBatch(client)
        notices = " ".join(n["text"] for n in rec.info["notices"])
        assert "activation checkpointing" in notices
        for batch in (b["index"] for b in rec.info["batches"] if not b.get("light")):
            rows = rec.call("layers", batch=batch)["rows"]
            for block in ("layers.0", "layers.1"):
                calls = [r for r in rows if r["name"] == block]
                assert len(calls) == 1, (batch, block)  # not again for the recomputation
                assert calls[0]["out_shape"] == [4, 16, 32] and calls[0]["phase"] == "forward"
                assert calls[0]["grad_norm"] > 0
            inner = [r for r in rows if r["name"] == "layers.1.ffn.w1"]
            assert len(inner) == 1 and inner[0]["grad_norm"] > 0
        events = rec.call("replay", sample=0, limit=2000)["events"]
        layers = [e["name"] for e in events if e["kind"] == "layer" and e["batch"] == rec.index]
        assert layers.count("layers.0.attn.wqkv") == 1 and layers.count("output") == 1
        grads = [e["name"] for e in events if e["kind"] == "grad" and e["batch"] == rec.index]
        assert grads.count("layers.0.attn.wqkv") == 1


def _hf_first_batch():
    s = _script("hf_loss_in_model")
    torch.manual_seed(0)
    tokenizer = s["WordTokenizer"](s["TEXTS"])
    model = s["TinyLMHeadModel"](len(tokenizer.vocab))
    batch = tokenizer([s["TEXTS"][i] for i in range(4)], max_length=9)
    labels = batch["input_ids"].clone()
    labels[batch["attention_mask"] == 0] = -100
    with torch.no_grad():
        logits = model(**batch, labels=labels).logits
    return tokenizer, batch["input_ids"], labels, logits


def test_a_loss_computed_inside_the_model_shows_each_sequences_loss_and_text(recordings):
    tokenizer, input_ids, labels, logits = _hf_first_batch()
    shifted = labels[:, 1:]
    per_token = F.cross_entropy(logits[:, :-1].transpose(1, 2), shifted, reduction="none")
    valid = shifted != -100
    expected = (per_token * valid).sum(1) / valid.sum(1)
    with _client(recordings, "hf_loss_in_model") as client:
        rec = FirstBatch(client)
        d = rec.detail
        assert d["call"]["cls"] == "CrossEntropyLoss" and d["ignore_index"] == -100
        assert d["per_token"] and d["reduction_check"]["matches"]
        assert d["reduction_check"]["terms"] == int(valid.sum())  # -100 left out
        assert [r["loss"] for r in rec.rows] == pytest.approx(expected.tolist(), rel=1e-5)
        for i, row in enumerate(rec.rows):
            assert row["text"] == tokenizer.decode(shifted[i][valid[i]])
        tokens = rec.call("sample_table", batch=rec.index, sample=1)
        # The input as the script's tokenizer decodes it: its padding left out.
        assert tokens["text"]["input"] == tokenizer.decode(input_ids[1])
        assert "WordTokenizer" in tokens["vocabulary"] and "input_vocabulary" not in tokens


def test_a_translation_decodes_the_source_and_the_target_each_with_its_vocabulary(
    recordings,
):
    s = _script("seq2seq_gru_teacher")
    eng, fra = s["Lang"]("eng"), s["Lang"]("fra")
    for a, b in s["PAIRS"]:
        eng.addSentence(a)
        fra.addSentence(b)
    source = [s["tensorFromSentence"](eng, a) for a, _ in s["PAIRS"]]
    target = [s["tensorFromSentence"](fra, b) for _, b in s["PAIRS"]]

    def text(lang, ids):
        return " ".join(lang.index2word[i] for i in ids)

    with _client(recordings, "seq2seq_gru_teacher") as client:
        rec = FirstBatch(client)
        assert [r["text"] for r in rec.rows] == [text(fra, t) for t in target]
        tokens = rec.call("sample_table", batch=rec.index, sample=2)
        assert tokens["text"]["input"] == text(eng, source[2])  # "we are happy EOS …"
        assert tokens["text"]["target"] == text(fra, target[2])
        assert "input_lang" in tokens["input_vocabulary"] and "output_lang" in tokens["vocabulary"]
        assert [r["input_token"] for r in tokens["rows"]] == [eng.index2word[i] for i in source[2]]
        # In Explore, each call's ids decoded with the vocabulary of the side they feed.
        calls = {c["name"]: c["id"] for c in rec.call("calls", batch=rec.index)["calls"]}
        encoder = rec.call("call", batch=rec.index, call=calls["encoder"])
        assert encoder["inputs"][0]["decoded"]["text"] == text(eng, source[0])
        decoder = rec.call("call", batch=rec.index, call=calls["decoder"])
        assert decoder["inputs"][1]["decoded"]["text"] == text(fra, target[0])


def _tagger_first_batch():
    from torch.utils.data import DataLoader

    s = _script("multilabel_bce")
    torch.manual_seed(0)
    loader = DataLoader(s["TagDataset"](), batch_size=8, shuffle=True)
    model = s["MultiLabelNet"]()
    model.train()
    inputs, labels = next(iter(loader))
    with torch.no_grad():
        outputs = model(inputs)
    return s["TAGS"], outputs, labels


def test_a_multi_label_loss_shows_each_samples_labels_set_against_the_predicted_set(
    recordings,
):
    tags, outputs, labels = _tagger_first_batch()
    expected = F.binary_cross_entropy_with_logits(outputs, labels, reduction="none").mean(1)
    predicted = torch.sigmoid(outputs) > 0.5
    with _client(recordings, "multilabel_bce") as client:
        rec = FirstBatch(client)
        d = rec.detail
        assert d["call"]["cls"] == "BCEWithLogitsLoss" and d["multilabel"]
        assert d.get("confusion") is None  # no argmax classes of a 0/1 row
        assert [r["loss"] for r in rec.rows] == pytest.approx(expected.tolist(), rel=1e-5)
        for i, row in enumerate(rec.rows):
            assert row["labels"] == labels[i].nonzero().flatten().tolist()
            assert row["pred_labels"] == predicted[i].nonzero().flatten().tolist()
            assert row["label_names"] == [tags[c] for c in row["labels"]]  # the script's TAGS
            assert row["exact"] == bool((predicted[i] == labels[i].bool()).all())
            assert [e["p"] for e in row["per_label"]] == pytest.approx(
                torch.sigmoid(outputs[i]).tolist(), rel=1e-5
            )
        worst = {r["sample"]: r for r in d["worst"]}
        assert worst[0]["pred_label_names"] == [tags[c] for c in rec.rows[0]["pred_labels"]]


def test_multi_label_names_kept_only_as_a_name_to_index_dict_name_each_label(recordings):
    # The script's label2id maps names to indices out of the names' order.
    label2id = _script("multilabel_label2id")["label2id"]
    by_index = sorted(label2id, key=label2id.get)
    with _client(recordings, "multilabel_label2id") as client:
        rec = FirstBatch(client)
        assert rec.detail["multilabel"]
        assert rec.rows
        for row in rec.rows:
            assert row["label_names"] == [by_index[c] for c in row["labels"]]


def test_multi_label_names_are_read_from_each_spelling_scripts_use():
    from tvis.record.label_names import _names_of

    tags = ["sky", "water", "tree"]
    for spelled in (
        tags,
        tuple(tags),
        {0: "sky", 1: "water", 2: "tree"},
        {"tree": 2, "sky": 0, "water": 1},
    ):
        assert _names_of(spelled, 3) == tags, spelled
    for not_names in ({0: "sky", 2: "tree", 3: "water"}, {"sky": 0, "water": 0, "x": 1}, tags[:2]):
        assert _names_of(not_names, 3) is None, not_names


def test_the_multi_label_view_lists_the_sets_not_a_confusion_matrix():
    from tvis.tui.pages.loss_labels import labels_text

    row = {
        "sample": 0,
        "labels": [0, 2],
        "pred_labels": [2, 3],
        "label_names": ["sky", "tree"],
        "pred_label_names": ["tree", "car"],
        "exact": False,
        "per_label": [],
    }
    text = labels_text([row, {**row, "sample": 1, "pred_labels": [0, 2], "exact": True}], 0)
    assert "1 of 2 samples predicted exactly" in text.plain
    assert "−sky ✓tree +car" in text.plain  # missed, right, extra


def _ctc_first_batch(texts: bool = False):
    s = _script("ctc_speech")
    torch.manual_seed(7)
    gen = torch.Generator().manual_seed(1)
    text_transform = s["TextTransform"]()
    model = s["SpeechRecognitionModel"]()
    words = [s["WORDS"][i % len(s["WORDS"])] for i in range(4)]
    batch = [s["synth_utterance"](w, text_transform, generator=gen) for w in words]
    spectrograms, labels, input_lengths, label_lengths = s["data_processing"](batch)
    with torch.no_grad():
        output = F.log_softmax(model(spectrograms), dim=2).transpose(0, 1)
    per_sample = F.ctc_loss(
        output, labels, input_lengths, label_lengths, zero_infinity=True, reduction="none"
    )
    if texts:
        return _greedy_texts(text_transform, output, labels, input_lengths, label_lengths)
    return per_sample / torch.tensor(label_lengths)


def _greedy_texts(text_transform, output, labels, input_lengths, label_lengths):
    """Each sample's (target, prediction) as the speech tutorial's ``GreedyDecoder`` gives
    them: the argmax of each frame, a label repeating the frame before skipped, blanks
    (0) dropped, turned into text by the script's own ``int_to_text``."""
    pairs = []
    for i, frames in enumerate(output.argmax(2).T.tolist()):
        decoded = [
            c
            for j, c in enumerate(frames[: input_lengths[i]])
            if c != 0 and not (j and c == frames[j - 1])
        ]
        target = labels[i][: label_lengths[i]].tolist()
        pairs.append((text_transform.int_to_text(target), text_transform.int_to_text(decoded)))
    return pairs


def test_ctc_shows_each_samples_loss_and_no_classes(recordings):
    expected = _ctc_first_batch()
    with _client(recordings, "ctc_speech") as client:
        rec = FirstBatch(client)
        d = rec.detail
        assert d["call"]["cls"] == "CTCLoss" and d["fn"] == "ctc_loss"
        assert d["reduction"] == "mean" and d["reduction_check"]["matches"]
        assert [r["loss"] for r in rec.rows] == pytest.approx(expected.tolist(), rel=1e-5)
        assert d["value"] == pytest.approx(expected.mean().item(), rel=1e-5)
        assert d["hist_of"] == "sample" and not d["per_token"]
        assert d.get("confusion") is None and all("target" not in r for r in rec.rows)
        assert not rec.call("insights")["gradcam"]


def test_ctc_rows_show_each_samples_target_and_greedy_transcription_as_text(recordings):
    expected = _ctc_first_batch(texts=True)
    assert len({t for t, _ in expected}) == len(expected)  # four different words
    with _client(recordings, "ctc_speech") as client:
        rec = FirstBatch(client)
        source = rec.detail["ctc"]["vocabulary"]
        assert "text_transform." in source and "blank 0 added" in source
        for rows in (rec.rows, rec.detail["worst"]):
            by_sample = {r["sample"]: r for r in rows}
            texts = [(by_sample[i]["target_text"], by_sample[i]["pred_text"]) for i in range(4)]
            assert texts == expected
            for row in rows:
                assert row["exact"] == (row["target_text"] == row["pred_text"])


def test_word_tokens_are_drawn_apart_and_characters_together():
    from tvis.tui.pages.loss import word_tokens

    def rows(tokens):
        return [{"pad": False, "target_token": t} for t in tokens]

    assert word_tokens(rows(["j", "ai", "froid"]), "j ai froid")
    assert not word_tokens(rows(["h", "i", " ", "y", "o"]), "hi yo")  # characters
    assert not word_tokens(rows(["Ġthe", "Ġcat"]), " the cat")  # byte-level BPE
