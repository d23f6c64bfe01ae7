"""The insight methods: pipeline, sample tables, loss detail, Grad-CAM, attention and
rollout, embeddings. Exact checks run over small runs written here with known arrays;
the recorded example runs check the methods end to end."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from synthetic_run import hist, stats

from tvis.agent.client import AgentError, LocalClient
from tvis.store.format import COMPLETE
from tvis.store.writer import RunWriter

TVIS = str(Path(sys.executable).with_name("tvis"))
B, KEPT, T, HEADS = 4, 2, 5, 2
CLASSES = ["cat", "dog", "bird"]
VOCAB = ["<pad>", "<bos>", "the", "cat", "sat", "on", "mat", "a"]
MEAN, STD = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]


class _Chunk:
    """Tensor entries and values for one batch or step of a hand-written run."""

    def __init__(self) -> None:
        self.entries: list[dict] = []
        self.arrays: dict[int, np.ndarray] = {}

    def add(self, values: np.ndarray, batch_dim: int | None = None, **extra) -> int:
        tid = len(self.entries)
        self.entries.append(
            {
                "id": tid,
                "shape": list(values.shape),
                "dtype": str(values.dtype),
                "device": "cpu",
                "stats": stats(values),
                "hist": hist(values),
                "value": {"kept": "all"},
                "batch_dim": batch_dim,
                "batch_dim_inferred": False,
                "grad": None,
                "of": None,
                **extra,
            }
        )
        self.arrays[tid] = values
        return tid


def _call(cid, parent, kind, name, inputs=(), outputs=(), phase="data"):
    return {
        "id": cid,
        "parent": parent,
        "depth": 0 if parent == -1 else 1,
        "kind": kind,
        "name": name,
        "cls": name,
        "phase": phase,
        "def": None,
        "site": None,
        "inputs": list(inputs),
        "outputs": list(outputs),
        "t0": 0.0,
        "fwd_ms": 0.1,
        "bwd_ms": None,
        "no_grad": False,
        "flags": [],
    }


def _write(path: Path, batches: list[tuple[dict, dict]], steps: list, data: dict) -> None:
    writer = RunWriter(path, {"script": "train.py", "host": socket.gethostname(), "pid": -1})
    maps = []
    for i, (record, arrays) in enumerate(batches):
        record["batch"] = {"index": i, "step": 0, "light": False, "batch_size": B, "n_calls": 1}
        writer.write_batch(i, record, arrays)
        maps.append(record["batch"])
    for i, (record, arrays) in enumerate(steps):
        writer.write_step(i, record, arrays)
    writer.write_index({"batches": maps, "steps": [s[0]["step"] for s in steps], "data": data})
    writer.write_meta(status=COMPLETE, ended=time.time())


def _row_stochastic(rng, *shape) -> np.ndarray:
    a = rng.random(shape)
    return (a / a.sum(-1, keepdims=True)).astype(np.float32)


# -- a classification run: pipeline, Grad-CAM, attention, loss, PCA ---------------------


def _image_batch(rng, targets: list[int], preds: list[int]) -> tuple[dict, dict, dict]:
    c = _Chunk()
    raw = c.add(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8), raw_image="RGB")
    unit = c.add(rng.random((3, 8, 8), dtype=np.float32))
    normed = c.add(rng.standard_normal((3, 8, 8)).astype(np.float32))
    pixels = rng.random((B, 3, 8, 8), dtype=np.float32)
    given = c.add(((pixels - 0.5) / 0.25).astype(np.float32), batch_dim=0)
    calls = [
        _call(0, -1, "function", "Images.__getitem__", [{"name": "i", "repr": "7"}]),
        _call(1, 0, "transform", "Compose", [{"name": "img", "image": raw}], []),
        _call(2, 1, "transform", "ToTensor", [{"name": "img", "image": raw}], []),
        _call(3, 1, "transform", "Normalize", [{"name": "img", "tensor": unit}], []),
        _call(4, -1, "module", "net", [{"name": "x", "tensor": given}], [], "forward"),
    ]
    calls[2]["outputs"] = [{"name": "out", "tensor": unit}]
    calls[3]["outputs"] = [{"name": "out", "tensor": normed}]
    calls[1]["outputs"] = calls[0]["outputs"] = [{"name": "out", "tensor": normed}]
    cams = {w: rng.random((KEPT, 4, 4)).astype(np.float32) for w in ("pred", "true")}
    cams["pred"][0] = 0
    cams["pred"][0, 0, 0] = 2.0  # one hot cell: the top-left corner of the picture
    attention = [_row_stochastic(rng, KEPT, HEADS, T, T) for _ in range(2)]
    reprs = rng.standard_normal((B, 6)).astype(np.float32)
    p_target = rng.random(B).astype(np.float32)
    top_i = np.array([[p, (p + 1) % 3, (p + 2) % 3] for p in preds], np.int32)
    loss = {
        "call": 4,
        "fn": "cross_entropy",
        "reduction": "mean",
        "ignore_index": -100,
        "value": float(-np.log(p_target).mean()),
        "per_sample": (-np.log(p_target)).tolist(),
        "shape": [B],
        "classes": 3,
        "merged": False,
        "target": c.add(np.array(targets, np.int32)),
        "pred": c.add(np.array(preds, np.int32)),
        "p_target": c.add(p_target),
        "per_element": c.add(-np.log(p_target)),
        "valid": c.add(np.ones(B, bool)),
        "top_i": c.add(top_i),
        "top_p": c.add(np.full((B, 3), 1 / 3, np.float32)),
    }
    record = {
        "calls": calls,
        "tensors": c.entries,
        "data": {
            "batch": [{"name": "batch[0]", "tensor": given}],
            "indices": [7, 3, 1, 0],
            "items": [{"index": 7, "calls": [0, 4]}],
        },
        "loss": loss,
        "gradcam": [
            {"call": 4, "layer": "conv", "which": w, "tensor": c.add(cams[w]), "approximate": False}
            for w in ("pred", "true")
        ],
        "attention": [
            {"call": 4, "module": f"blocks.{i}", "tensor": c.add(a, 0), "heads": HEADS}
            for i, a in enumerate(attention)
        ],
        "repr": [{"call": 4, "module": "block", "depth": 1, "tensor": c.add(reprs)}],
    }
    known = {"cams": cams, "attention": attention, "reprs": reprs, "p_target": p_target}
    return record, c.arrays, known


def _table_step(rng) -> tuple[tuple[dict, dict], np.ndarray]:
    c = _Chunk()
    table = rng.standard_normal((len(VOCAB), 4)).astype(np.float32)
    weight = c.add(table)
    param = {"name": "embed.weight", "module": "embed", "weight": weight, "grad": None}
    step = {"index": 0, "batches": [0, 1]}
    return ({"step": step, "params": [param], "tensors": c.entries}, c.arrays), table


@pytest.fixture(scope="module")
def image_run(tmp_path_factory):
    rng = np.random.default_rng(4)
    root = tmp_path_factory.mktemp("insight runs")
    first = _image_batch(rng, [0, 1, 2, 0], [0, 2, 2, 1])
    second = _image_batch(rng, [1, 1, 0, 2], [1, 0, 0, 2])
    step, table = _table_step(rng)
    insights = {
        "gradcam": ["conv"],
        "attention": ["blocks.0", "blocks.1"],
        "repr": ["block"],
        "embeddings": [{"module": "embed", "param": "embed.weight", "rows": len(VOCAB)}],
    }
    data = {
        "classes": CLASSES,
        "vocab": VOCAB,
        "normalize": {"mean": MEAN, "std": STD},
        "insights": insights,
    }
    _write(root / "run", [first[:2], second[:2]], [step], data)
    with LocalClient(root) as client:
        yield client, [first[2], second[2]], table


def test_insights_name_the_pages_that_apply(image_run):
    client, _, _ = image_run
    found = client.call("insights", run="run")
    assert found["gradcam"] and found["attention"] and found["embeddings"]
    assert found["gradcam_layers"] == ["conv"]
    assert found["attention_layers"] == ["blocks.0", "blocks.1"]
    assert found["tables"][0]["param"] == "embed.weight"


def test_insights_of_a_run_without_them_are_all_off(run, runs_root):
    with LocalClient(runs_root) as client:
        found = client.call("insights", run=run.name)
    assert not (found["gradcam"] or found["attention"] or found["embeddings"])


def test_rollout_matches_a_direct_numpy_computation(image_run):
    client, known, _ = image_run
    reply = client.call("attention", run="run", batch=0, sample=1, rollout=True)
    expected = np.eye(T)
    for layer in known[0]["attention"]:
        a = layer[1].astype(np.float64).mean(axis=0)  # heads averaged
        a = 0.5 * a + 0.5 * np.eye(T)
        a = a / a.sum(axis=1, keepdims=True)
        expected = a @ expected
    np.testing.assert_allclose(reply["map"], expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(reply["map"].sum(axis=1), 1.0, rtol=1e-5)


def test_attention_map_for_a_head_and_the_mean_of_heads(image_run):
    client, known, _ = image_run
    stored = known[0]["attention"][1]
    one = client.call("attention", run="run", batch=0, layer=1, head=1, sample=1)
    np.testing.assert_array_equal(one["map"], stored[1, 1])
    mean = client.call("attention", run="run", batch=0, layer=1, sample=1)
    np.testing.assert_allclose(mean["map"], stored[1].mean(axis=0), rtol=1e-6)
    assert mean["module"] == "blocks.1" and mean["layers"] == ["blocks.0", "blocks.1"]
    assert mean["heads"] == HEADS
    assert mean["grid"] == {"h": 2, "w": 2, "offset": 1}  # image input: [CLS] + 2×2 patches


def test_attention_for_a_sample_not_kept_is_not_found(image_run):
    client, _, _ = image_run
    with pytest.raises(AgentError) as e:
        client.call("attention", run="run", batch=0, sample=KEPT)
    assert e.value.status == 404


def test_gradcam_resized_onto_the_input_picture(image_run):
    client, known, _ = image_run
    reply = client.call("gradcam", run="run", batch=0, sample=0, which="pred")
    assert reply["layers"] == ["conv"] and reply["choices"] == ["pred", "true"]
    assert reply["image"].shape == (8, 8, 3) and reply["map"].shape == (8, 8)
    assert reply["map"].dtype == np.float32 and "blend" not in reply
    assert reply["map"].max() == pytest.approx(1.0) and reply["map"].min() >= 0
    top_left = reply["map"][:4, :4].sum()
    assert top_left > 0.9 * reply["map"].sum()  # the hot cell lands where it was
    assert reply["peak"] == pytest.approx(2.0)
    assert (reply["class"], reply["class_name"]) == (0, "cat")
    true = client.call("gradcam", run="run", batch=0, sample=1, which="true")
    assert (true["class"], true["class_name"]) == (1, "dog")
    assert true["p"] == pytest.approx(known[0]["p_target"][1])  # p of the true class
    assert reply["p"] == pytest.approx(1 / 3)  # the predicted class's top-k probability
    cam = known[0]["cams"]["true"][1]
    corner = np.asarray(true["map"])[0, 0]  # pixel centres at the edge keep the corner cell
    assert corner == pytest.approx(cam[0, 0] / cam.max(), rel=1e-5)


def test_gradcam_starts_at_the_deepest_layer_whose_map_can_say_where(tmp_path):
    import torch

    from tvis.record.builder import Settings
    from tvis.record.runner import record

    def train() -> None:  # 8×8 maps, then 2×2, then 1×1 (a CIFAR ResNet's last layers)
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3, padding=1),
            torch.nn.MaxPool2d(4),
            torch.nn.Conv2d(4, 4, 3, padding=1),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(4, 3, 1),
            torch.nn.Flatten(),
        )
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            logits = model(torch.randn(4, 3, 8, 8))
            loss = torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2, 0]))
            opt.zero_grad()
            loss.backward()
            opt.step()

    record(train, Settings(steps=2), Path(__file__).parent, tmp_path / "run")
    with LocalClient(tmp_path) as client:
        first = client.call("gradcam", run="run", batch=0)
        grid = client.call("gradcam_grid", run="run", batch=0, width=8, height=8)
        last = client.call("gradcam", run="run", batch=0, layer=first["layers"][-1])
    assert first["layers"] == ["0", "2", "4"]
    assert first["layer"] == grid["layer"] == "0" and first["map_shape"] == [8, 8]
    assert last["map_shape"] == [1, 1]  # still there when asked for


def test_gradcam_grid_of_samples_for_one_layer(image_run):
    client, known, _ = image_run
    grid = client.call("gradcam_grid", run="run", batch=0, which="true", width=8, height=8)
    assert [c["sample"] for c in grid["cells"]] == list(range(KEPT))  # the kept samples
    for cell in grid["cells"]:
        single = client.call(
            "gradcam", run="run", batch=0, sample=cell["sample"], which="true", width=8, height=8
        )
        np.testing.assert_array_equal(cell["map"], single["map"])
        assert cell["class_name"] == single["class_name"]


def test_gradcam_grid_of_layers_for_one_sample(image_run):
    client, _, _ = image_run
    strip = client.call("gradcam_grid", run="run", batch=0, sample=1, width=8, height=8)
    assert [c["layer"] for c in strip["cells"]] == ["conv"] and strip["sample"] == 1


def test_gradcam_grid_beyond_its_pixel_budget_is_refused(image_run):
    client, _, _ = image_run
    with pytest.raises(AgentError) as e:
        client.call("gradcam_grid", run="run", batch=0, width=64, height=64, limit=64)
    assert e.value.status == 400 and "pixels" in e.value.message


def test_attention_heads_are_ordered_by_entropy(image_run):
    client, known, _ = image_run
    reply = client.call("attention_heads", run="run", batch=0, layer=0, sample=1, side=8)
    stored = known[0]["attention"][0][1].astype(np.float64)
    entropy = [(-(h * np.log(h)).sum(axis=-1)).mean() for h in stored]
    np.testing.assert_allclose(reply["entropy"], entropy, rtol=1e-5)
    assert reply["order"].tolist() == np.argsort(entropy).tolist()
    np.testing.assert_array_equal(reply["maps"], stored.astype(np.float32))  # T ≤ side: exact


def test_attention_labels_patches_and_cls_of_a_picture_input(image_run):
    client, _, _ = image_run
    reply = client.call("attention", run="run", batch=0, sample=0)
    assert reply["tokens"] == ["[CLS]", "p0", "p1", "p2", "p3"] and not reply["causal"]


def test_attention_overlay_paints_where_cls_looks_over_the_picture(image_run):
    client, known, _ = image_run
    reply = client.call("attention_overlay", run="run", batch=0, layer=1, head=0, sample=1)
    row = known[0]["attention"][1][1, 0, 0, 1:]  # [CLS]'s weights on the 2×2 patches
    np.testing.assert_array_equal(reply["patches"], row.reshape(2, 2))
    assert reply["image"].shape == (8, 8, 3) and reply["map"].shape == (8, 8)
    assert reply["map"].max() == pytest.approx(1.0) and reply["query_label"] == "[CLS]"
    hottest = np.unravel_index(np.argmax(row), (2, 2))
    quadrant = reply["map"][
        4 * hottest[0] : 4 * hottest[0] + 4, 4 * hottest[1] : 4 * hottest[1] + 4
    ]
    assert quadrant.mean() == reply["map"].reshape(2, 4, 2, 4).mean(axis=(1, 3)).max()


def test_attention_overlay_of_a_text_model_is_not_found(lm_run):
    client, _ = lm_run
    with pytest.raises(AgentError) as e:
        client.call("attention_overlay", run="run", batch=0)
    assert e.value.status == 404 and "patches" in e.value.message


def test_loss_detail_lists_worst_samples_first(image_run):
    client, known, _ = image_run
    detail = client.call("loss_detail", run="run", batch=0)
    assert detail["fn"] == "cross_entropy" and detail["call"]["name"] == "net"
    worst = detail["worst"]
    assert [r["loss"] for r in worst] == sorted((r["loss"] for r in worst), reverse=True)
    p = known[0]["p_target"]
    for row in worst:
        assert row["p_target"] == pytest.approx(p[row["sample"]], rel=1e-5)
        assert row["neg_log_p"] == pytest.approx(-np.log(p[row["sample"]]), rel=1e-5)
    assert detail["valid"].tolist() == [1] * B and detail["per_element"].shape == (B,)


def test_confusion_matrix_counts_every_captured_batch(image_run):
    client, _, _ = image_run
    matrix = client.call("loss_detail", run="run", batch=1)["confusion"]
    expected = np.zeros((3, 3), int)
    for t, p in zip([0, 1, 2, 0, 1, 1, 0, 2], [0, 2, 2, 1, 1, 0, 0, 2], strict=True):
        expected[t, p] += 1
    np.testing.assert_array_equal(matrix["matrix"], expected)
    assert matrix["names"] == CLASSES and matrix["batches"] == [0, 1]
    assert matrix["samples"] == 8 and matrix["accuracy"] == pytest.approx(5 / 8)


def test_sample_table_names_classes_and_top_k(image_run):
    client, _, _ = image_run
    table = client.call("sample_table", run="run", batch=0, offset=1, limit=2)
    assert table["kind"] == "samples" and table["total"] == B
    first, second = table["rows"]
    assert (first["sample"], first["target_name"], first["pred_name"]) == (1, "dog", "bird")
    assert first["correct"] is False and second["correct"] is True
    assert [t["name"] for t in first["top"]] == ["bird", "cat", "dog"]


def test_pipeline_goes_from_raw_item_through_stages_to_model_input(image_run):
    client, _, _ = image_run
    reply = client.call("pipeline", run="run", batch=0, sample=0, width=8, height=8)
    assert reply["index"] == 7
    assert reply["raw"]["kind"] == "image" and reply["raw"]["array"].shape == (8, 8, 3)
    assert [s["name"] for s in reply["stages"]] == ["ToTensor", "Normalize"]
    assert all(s["output"]["kind"] == "image" for s in reply["stages"])
    given = reply["input"]
    assert given["kind"] == "image" and given["normalized"] and given["scale"] == "unit"


def test_pca_of_representations_across_batches(image_run):
    client, known, _ = image_run
    reply = client.call("embeddings", run="run")
    points = np.concatenate([k["reprs"] for k in known]).astype(np.float64)
    assert reply["layer"] == "block" and reply["total"] == 2 * B
    assert reply["labels"].tolist() == [0, 1, 2, 0, 1, 1, 0, 2]
    centred = points - points.mean(axis=0)
    eigen = np.sort(np.linalg.eigvalsh(centred.T @ centred))[::-1]
    np.testing.assert_allclose(reply["explained"], eigen[:2] / eigen.sum(), rtol=1e-4)
    # Projections keep the data's spread on each axis and are uncorrelated.
    got = np.asarray(reply["points"], dtype=np.float64)
    np.testing.assert_allclose((got**2).sum(axis=0), eigen[:2], rtol=1e-4)
    assert abs(np.corrcoef(got.T)[0, 1]) < 1e-4


def test_pca_points_name_their_batch_and_sample(image_run):
    client, _, _ = image_run
    reply = client.call("embeddings", run="run")
    assert reply["batch"].tolist() == [0] * B + [1] * B
    assert reply["sample"].tolist() == list(range(B)) * 2
    assert reply["sampling"] == f"all {2 * B} points" and reply["label_kind"] == "class"
    assert reply["label_names"] == {"0": "cat", "1": "dog", "2": "bird"}


def test_pca_beyond_max_points_keeps_an_even_stride_and_says_so(image_run):
    client, _, _ = image_run
    full = client.call("embeddings", run="run")
    some = client.call("embeddings", run="run", max_points=3)
    np.testing.assert_array_equal(some["points"], full["points"][::3])
    assert some["sample"].tolist() == full["sample"][::3].tolist()
    assert some["sampling"] == f"one point in 3 of {2 * B}" and some["total"] == 2 * B


def test_pca_of_an_embedding_table_is_labelled_with_the_vocabulary(image_run):
    client, _, table = image_run
    reply = client.call("embeddings", run="run", table="embed")
    assert reply["kind"] == "table" and reply["tokens"] == VOCAB and reply["vocab"]
    centred = table.astype(np.float64) - table.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    pc1 = centred @ vt[0]
    assert abs(np.corrcoef(pc1, reply["points"][:, 0])[0, 1]) == pytest.approx(1.0, abs=1e-5)


# -- a language-model run: per-token rows, decoded text, token labels ---------------------


def _lm_batch(rng) -> tuple[dict, dict, dict]:
    c = _Chunk()
    ids = rng.integers(2, len(VOCAB), (B, T))
    ids[:, 0] = 1
    targets = np.roll(ids, -1, axis=1)
    targets[:, -1] = 0
    targets[1, 3:] = 0  # sample 1 padded from position 3
    valid = targets != 0
    pred = np.where(rng.random((B, T)) < 0.5, targets, 7)
    p = rng.random((B, T)).astype(np.float32)
    p[~valid] = np.nan
    nll = np.where(valid, -np.log(np.where(valid, p, 1.0)), 0).astype(np.float32)
    given = c.add(ids.astype(np.int64), batch_dim=0)
    record = {
        "calls": [_call(0, -1, "module", "lm", [{"name": "ids", "tensor": given}], [], "forward")],
        "tensors": c.entries,
        "data": {"batch": [{"name": "batch[0]", "tensor": given}]},
        "loss": {
            "call": 0,
            "fn": "cross_entropy",
            "ignore_index": 0,
            "merged": True,
            "shape": [B * T],
            "tokens_per_sample": T,
            "per_sample": [float(nll[i][valid[i]].mean()) for i in range(B)],
            "target": c.add(targets.reshape(-1).astype(np.int32)),
            "pred": c.add(pred.reshape(-1).astype(np.int32)),
            "p_target": c.add(p.reshape(-1)),
            "per_element": c.add(nll.reshape(-1)),
            "valid": c.add(valid.reshape(-1)),
        },
        "attention": [
            {"call": 0, "module": "attn", "tensor": c.add(_row_stochastic(rng, B, 1, T, T), 0)}
        ],
        "tokens": [
            {"call": 0, "item": None, "texts": ["the cat"] * B, "ids": ids.tolist(), "tokens": []}
        ],
    }
    return record, c.arrays, {"ids": ids, "targets": targets, "pred": pred, "valid": valid}


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm run")
    record, arrays, known = _lm_batch(np.random.default_rng(9))
    _write(root / "run", [(record, arrays)], [], {"vocab": VOCAB})
    with LocalClient(root) as client:
        yield client, known


def test_sample_table_of_a_language_model_has_one_row_per_token(lm_run):
    client, known = lm_run
    table = client.call("sample_table", run="run", batch=0, sample=1)
    assert table["kind"] == "tokens" and table["total"] == T
    rows = table["rows"]
    assert [r["pad"] for r in rows] == (~known["valid"][1]).tolist()
    assert [r["target_token"] for r in rows] == [VOCAB[t] for t in known["targets"][1]]
    assert [r["input_token"] for r in rows] == [VOCAB[t] for t in known["ids"][1]]
    real = known["valid"][1]
    hits = (known["pred"][1] == known["targets"][1])[real]
    assert table["accuracy"] == pytest.approx(hits.mean())
    words = [VOCAB[t] for t in known["targets"][1][real]]
    assert table["text"]["target"] == " ".join(words)
    assert all(np.isnan(r["p_target"]) for r in rows if r["pad"])


def test_sample_table_of_a_language_model_lists_sequences(lm_run):
    client, known = lm_run
    table = client.call("sample_table", run="run", batch=0)
    assert table["kind"] == "sequences" and table["total"] == B
    assert [r["tokens"] for r in table["rows"]] == known["valid"].sum(axis=1).tolist()


def test_attention_of_a_language_model_has_token_labels(lm_run):
    client, known = lm_run
    reply = client.call("attention", run="run", batch=0, sample=2)
    assert reply["tokens"] == [VOCAB[i] for i in known["ids"][2]] and reply["grid"] is None


def test_pipeline_of_a_batch_tokenized_at_once_gives_the_samples_row(lm_run):
    client, known = lm_run
    reply = client.call("pipeline", run="run", batch=0, sample=3)
    (tokens,) = reply["tokens"]
    assert tokens["ids"] == known["ids"][3].tolist() and tokens["text"] == "the cat"
    assert reply["input"]["kind"] == "ids"
    assert reply["input"]["tokens"] == [VOCAB[i] for i in known["ids"][3]]


def test_loss_detail_of_a_language_model_averages_valid_tokens(lm_run):
    client, known = lm_run
    detail = client.call("loss_detail", run="run", batch=0)
    assert detail["per_token"] and "confusion" not in detail
    assert detail["n_valid"] == int(known["valid"].sum())


# -- recorded runs ----------------------------------------------------------------------


def test_recorded_classifier_feeds_every_image_insight(recorded_run):
    with LocalClient(recorded_run) as client:
        found = client.call("insights", run=".")
        assert found["gradcam"] and found["embeddings"] and not found["attention"]
        cam = client.call("gradcam", run=".", batch=0, sample=0)
        # BatchNorm and dropout replayed for the kept samples: each map is its own
        assert cam["map"].shape == cam["image"].shape[:2] and not cam["approximate"]
        pipe = client.call("pipeline", run=".", batch=0, sample=0)
        assert pipe["raw"]["kind"] == "image" and pipe["input"]["kind"] == "image"
        assert pipe["stages"] and pipe["index"] is not None
        detail = client.call("loss_detail", run=".", batch=0)
        run = client.call("run", run=".")
        sizes = [b["batch_size"] for b in run["batches"] if not b["light"]]
        assert detail["confusion"]["samples"] == sum(sizes)
        pca = client.call("embeddings", run=".")
        assert pca["total"] == sum(sizes) and pca["labels"] is not None


LM_SCRIPT = """
    import math
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    VOCAB = ["<pad>", "<bos>"] + list("abcdefgh ")

    class Attention(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            scores = q @ k.transpose(1, 2) / math.sqrt(x.shape[-1])
            future = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
            weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
            return weights @ v

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(len(VOCAB), 8)
            self.attn = Attention(8)
            self.head = nn.Linear(8, len(VOCAB))

        def forward(self, ids):
            x = self.embed(ids)
            return self.head(x + self.attn(x))

    class Chars:
        itos = VOCAB

    torch.manual_seed(0)
    model = LM()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    tokenizer = Chars()
    for step in range(3):
        ids = torch.randint(1, len(VOCAB), (3, 6))
        targets = torch.roll(ids, -1, 1)
        targets[:, -1] = 0
        logits = model(ids)
        loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


@pytest.fixture(scope="module")
def recorded_lm(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("lm project")
    (folder / "train.py").write_text(textwrap.dedent(LM_SCRIPT))
    result = subprocess.run(
        [TVIS, "run", "--steps", "1", "--out", str(folder / "runs"), "train.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (run,) = (folder / "runs").iterdir()
    return run


def test_recorded_language_model_feeds_attention_and_token_tables(recorded_lm):
    with LocalClient(recorded_lm) as client:
        found = client.call("insights", run=".")
        assert found["attention_layers"] == ["attn"] and not found["gradcam"]
        attention = client.call("attention", run=".", batch=0, sample=0)
        assert attention["shape"] == [6, 6] and len(attention["tokens"]) == 6
        assert attention["causal"] and not np.triu(attention["map"], 1).any()
        table = client.call("sample_table", run=".", batch=0, sample=0)
        assert table["kind"] == "tokens" and table["total"] == 6 and table["rows"][-1]["pad"]
        pca = client.call("embeddings", run=".", table="embed")
        assert pca["stored_rows"] == 11 and pca["points"].shape == (11, 2)


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("find", {"query": "conv", "limit": -1}, "limit"),
        ("timeline", {"limit": -1}, "limit"),
        ("sample_table", {"sample": -1}, "sample"),
        ("loss_detail", {"limit": -1}, "limit"),
        ("calls", {"offset": -1}, "offset"),
        ("pipeline", {"sample": -1}, "sample"),
        ("gradcam", {"sample": -1}, "sample"),
        ("attention", {"sample": -1}, "sample"),
    ],
)
def test_negative_count_or_index_is_refused_naming_it(image_run, method, params, name):
    client = image_run[0]
    with pytest.raises(AgentError) as refused:
        client.call(method, run="run", batch=0, **params)
    assert refused.value.status == 400
    assert str(refused.value) == f"{name} must be 0 or more, not -1."
