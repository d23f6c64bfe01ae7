"""Scripts in the styles of public training code (tests/wild/scripts/<name>/train.py, each
knowing nothing of tvis), recorded with `tvis run` as a user runs it; every page that
applies must have content, and every "nothing here" sentence must be true.

Attention (fused SDPA recomputed from q·k, grouped heads, a timm-style ViT, torch's own
TransformerEncoder, an nn.Softmax module, a minGPT package at a repository's root), the
Weights page's kernel grid on a conv bigger than a step keeps whole, the loss of a masked
node-classification GCN, a custom autograd.Function over raw leaf tensors updated by hand,
a frozen embedding handed to the optimizer, the embeddings of a DCGAN, and Grad-CAM of a ResNet.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import run_tvis

from tvis.agent.client import LocalClient
from tvis.agent.protocol import AgentError
from tvis.store.reader import RunReader, find_runs

SCRIPTS = Path(__file__).parent / "scripts"

# name -> (the script inside its folder, what its attention is: "recomputed" for fused
# attention tvis recomputes from q·k, "own" for the model's own softmax, None for none)
CASES = {
    "nanogpt_sdpa": ("train.py", "recomputed"),
    "gqa_llama": ("train.py", "recomputed"),
    "vit_sdpa": ("train.py", "recomputed"),
    "torch_transformer": ("train.py", "recomputed"),
    "softmax_module": ("train.py", "own"),
    "mingpt_repo": ("projects/chargpt/train.py", "own"),
    "gcn_masked": ("train.py", None),
    "autograd_function": ("train.py", None),
    "frozen_embedding": ("train.py", None),
    "dcgan": ("train.py", None),
    "resnet_bigconv": ("train.py", None),
}
TRANSFORMERS = [name for name, (_, attention) in CASES.items() if attention]


# -- recording, once per script --------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """``recorded(name)``: the run of script ``name``, recorded on first use."""
    runs: dict[str, Path] = {}

    def record(name: str) -> Path:
        if name not in runs:
            runs[name] = _record(tmp_path_factory.mktemp(name), name)
        return runs[name]

    return record


def _record(folder: Path, name: str) -> Path:
    """The script's folder copied to ``folder`` (made a git repository when it is one:
    ``mingpt_repo``) and recorded there with `tvis run --steps 2`."""
    shutil.copytree(SCRIPTS / name, folder, dirs_exist_ok=True)
    script = folder / CASES[name][0]
    env = {}
    if name == "mingpt_repo":
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
        env = {"PYTHONPATH": str(folder)}  # as `pip install -e .` of the repository would
    result = run_tvis("run", "--steps", "2", str(script), cwd=script.parent, env=env)
    assert result.returncode == 0, result.stderr
    (run,) = find_runs(script.parent / "tvis_runs")
    return run


def _client(run: Path) -> LocalClient:
    return LocalClient(run)


def _training_batch(client) -> int:
    return next(b["index"] for b in client.call("run", run=".")["batches"] if not b["light"])


def _has_content(reply: dict, *keys: str) -> None:
    for key in keys:
        value = reply.get(key)
        assert value is not None, f"{key} is missing"
        if isinstance(value, np.ndarray):
            assert value.size and np.isfinite(value).any(), f"{key} is empty"
        elif isinstance(value, (list, dict, str)):
            assert len(value), f"{key} is empty"


# -- attention ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_every_transformer_shows_attention(name, recorded):
    with _client(recorded(name)) as client:
        found = client.call("insights", run=".")
        assert found["attention"], found.get("attention_absent")
        assert found["attention_absent"] is None
        batch = _training_batch(client)
        for layer in range(len(found["attention_layers"])):
            reply = client.call("attention", run=".", batch=batch, layer=layer)
            _has_content(reply, "map", "module")
            rows = reply["map"].sum(axis=-1)
            assert np.allclose(rows[rows > 0], rows[rows > 0].max(), rtol=0.05)  # softmax rows
            expected = "recomputed from q·k" if CASES[name][1] == "recomputed" else None
            assert reply["recomputed"] == expected
        heads = client.call("attention_heads", run=".", batch=batch, layer=0, side=8)
        _has_content(heads, "maps", "entropy")


def test_grouped_query_attention_shows_every_query_head(recorded):
    with _client(recorded("gqa_llama")) as client:
        reply = client.call("attention", run=".", batch=_training_batch(client), layer=0)
        assert reply["heads"] == 8 and reply["causal"]


def test_vit_attention_lies_over_the_picture(recorded):
    with _client(recorded("vit_sdpa")) as client:
        batch = _training_batch(client)
        reply = client.call("attention_overlay", run=".", batch=batch, layer=1)
        _has_content(reply, "map", "image")
        assert reply["grid"] == {"h": 4, "w": 4, "offset": 1}


def test_repository_package_is_the_users_code(recorded):
    """minGPT's projects/chargpt/train.py: the model and the loop live in `mingpt` at the
    repository root; its functions, lines and softmax are recorded as the user's."""
    run = RunReader(recorded("mingpt_repo"))
    assert {"mingpt/model.py", "mingpt/trainer.py"} <= set(run.sources())
    batch = run.batch(run.batch_ids()[0]).record
    assert any(line["file"] == "mingpt/model.py" for line in batch["lines"])
    assert [a["module"] for a in batch["attention"]] == [
        "transformer.h.0.attn",
        "transformer.h.1.attn",
    ]
    attention = next(c for c in batch["calls"] if c["name"] == "transformer.h.0.attn")
    assert attention["def"][0] == "mingpt/model.py"  # the user's file, not a library's


@pytest.mark.parametrize("name", [n for n, (_, a) in CASES.items() if a is None])
def test_runs_without_attention_say_the_true_reason(name, recorded):
    with _client(recorded(name)) as client:
        found = client.call("insights", run=".")
        assert not found["attention"]
        assert "made no scaled_dot_product_attention call" in found["attention_absent"]
        with pytest.raises(AgentError, match="no attention weights"):
            client.call("attention", run=".", batch=_training_batch(client))


# -- every script: loss and replay -----------------------------------------------------------


# autograd_function's loss is written by hand, with no loss function to recognise: the loss
# from whatever backward ran on is another change's (issue 28 item 4).
@pytest.mark.parametrize("name", [n for n in CASES if n != "autograd_function"])
def test_every_script_shows_its_loss_and_replays_kept_values(name, recorded):
    with _client(recorded(name)) as client:
        batch = _training_batch(client)
        detail = client.call("loss_detail", run=".", batch=batch)
        assert detail["value"] is not None and np.isfinite(detail["value"])
        replay = client.call("replay", run=".", sample=0)
        said = " ".join(replay["missing"])
        assert "no sample values were kept" not in said, said
        layers = [e for e in replay["events"] if e["kind"] == "layer"]
        assert layers and any(e.get("tensor") is not None for e in layers)


def test_masked_node_loss_shows_the_training_nodes(recorded):
    with _client(recorded("gcn_masked")) as client:
        detail = client.call("loss_detail", run=".", batch=_training_batch(client))
        assert detail["fn"] == "nll_loss" and "40 rows" in detail["picked"]
        assert len(detail["worst"]) == 40 and detail["reduction_check"]["matches"]
        rows = client.call("sample_table", run=".", batch=_training_batch(client))
        assert rows["total"] == 40 and rows["picked_from"] == 120  # the training nodes


# -- weights ---------------------------------------------------------------------------------------


def test_kernel_grid_of_a_conv_kept_in_part_shows_the_kept_filters(recorded):
    """A 512×512×3×3 conv keeps only a prefix at --param-elems' default: the grid shows the
    whole kernels kept, for the weight, its gradient and Δw, and says how many of how many."""
    with _client(recorded("resnet_bigconv")) as client:
        params = {p["name"]: p for p in client.call("step", run=".", step=0)["params"]}
        name = "layer4.1.conv2.weight"
        assert params[name]["shape"] == [512, 512, 3, 3] and params[name]["kept"]["kept"] != "all"
        for which in ("weight", "grad", "update"):
            grid = client.call("kernel_grid", run=".", step=0, name=name, which=which)
            _has_content(grid, "array")
            assert grid["shape"] == [512, 512, 3, 3] and 0 < grid["kept_filters"] < 512
            assert f"{grid['kept_filters']} of 512 filters kept" in grid["kept_note"]


def test_raw_leaf_tensors_updated_by_hand_have_statistics(recorded):
    run = recorded("autograd_function")
    with _client(run) as client:
        params = client.call("step", run=".", step=0)["params"]
        assert sorted(p["name"] for p in params) == ["a", "b", "c", "d"]
        for p in params:
            assert p["norms"]["grad"] and p["norms"]["update"], p
    notices = [n["text"] for n in RunReader(run).index().get("notices", [])]
    assert not [n for n in notices if "could not" in n], notices


def test_frozen_embedding_in_the_optimizer_is_no_anomaly(recorded):
    run = RunReader(recorded("frozen_embedding"))
    notices = " ".join(n["text"] for n in run.index().get("notices", []))
    assert "without ever a gradient" not in notices
    with _client(recorded("frozen_embedding")) as client:
        params = {p["name"]: p for p in client.call("step", run=".", step=0)["params"]}
        assert "embedding.weight" in params and params["embedding.weight"]["grad"] is None


def test_dcgan_embeddings_show_every_sample(recorded):
    """Two models whose layers share names (each has a `main` Sequential): every layer of
    both shows its embeddings, the second model's named under its own name."""
    with _client(recorded("dcgan")) as client:
        found = client.call("insights", run=".")
        assert "main.0" in found["repr_layers"] and "netG.main.0" in found["repr_layers"]
        for layer in found["repr_layers"]:
            _has_content(client.call("embeddings", run=".", layer=layer), "points")
        names = {p["name"] for s in (0, 1) for p in client.call("step", run=".", step=s)["params"]}
        assert "main.0.weight" in names and "netG.main.0.weight" in names


def test_cnn_classifier_shows_grad_cam(recorded):
    with _client(recorded("resnet_bigconv")) as client:
        found = client.call("insights", run=".")
        assert found["gradcam"] and "layer4.1.conv2" in found["gradcam_layers"]
        reply = client.call("gradcam", run=".", batch=_training_batch(client))
        _has_content(reply, "map", "image")
