"""The Loss and Weights pages' agent methods over real recordings: text decoded as the
script's own decoder does, the reduction redone against the recorded loss, the loss across
the run, conv kernels as a grid, and matrices labelled and bounded (a 50k-token table)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from support import EXAMPLES, run_tvis

from tvis.agent.client import LocalClient
from tvis.agent.decode import NO_VOCABULARY, Vocabulary
from tvis.agent.protocol import AgentError, encode

# What the pages promise to fetch per view.
VIEW_BYTES = 64 << 10


def _record(folder: Path, script: str, *args: str) -> Path:
    result = run_tvis(
        "run", "--steps", "2", "--out", str(folder / "runs"), script, *args, cwd=folder
    )
    assert result.returncode == 0, result.stderr
    (run,) = (folder / "runs").iterdir()
    return run


def _training_batch(client) -> int:
    return next(b["index"] for b in client.call("run", run=".")["batches"] if not b["light"])


@pytest.fixture(scope="module")
def text_lm(tmp_path_factory) -> Path:
    return _record(tmp_path_factory.mktemp("text lm"), str(EXAMPLES / "text_lm" / "train.py"))


@pytest.fixture(scope="module")
def script_tokenizer():
    """The example's own CharTokenizer, built exactly as its main() builds it."""
    path = EXAMPLES / "text_lm" / "train.py"
    spec = importlib.util.spec_from_file_location("text_lm_example", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module.CharTokenizer((path.parent / "data.txt").read_text(encoding="utf-8"))


def test_sequence_texts_equal_the_scripts_own_decoder(text_lm, script_tokenizer):
    with LocalClient(text_lm) as client:
        batch = _training_batch(client)
        table = client.call("samples", run=".", batch=batch)
        for row in table["rows"][:4]:
            tokens = client.call("sample_table", run=".", batch=batch, sample=row["sample"])
            ids = [r["target"] for r in tokens["rows"] if not r["pad"]]
            preds = [r["pred"] for r in tokens["rows"] if not r["pad"]]
            assert row["target_text"] == script_tokenizer.decode(ids)
            assert row["pred_text"] == script_tokenizer.decode(preds)
            assert tokens["text"]["target"] == script_tokenizer.decode(ids)
        assert table["vocabulary"].startswith("vocabulary: ") and table["per_token"]


def test_tokenizer_call_shows_text_in_and_decoded_tokens_out(text_lm, script_tokenizer):
    with LocalClient(text_lm) as client:
        batch = _training_batch(client)
        (encode_call,) = client.call("find", run=".", batch=batch, query="CharTokenizer.encode")[:1]
        call = client.call("call", run=".", batch=batch, call=encode_call["id"])
    text = next(a["text"] for a in call["inputs"] if a["name"] == "text")
    (returned,) = call["outputs"]
    assert returned["ids"] == script_tokenizer.encode(text)
    assert returned["decoded"]["text"] == script_tokenizer.decode(returned["ids"]) == text
    assert returned["decoded"]["tokens"][0] == "<bos>"


def test_language_model_loss_reduction_matches_the_recorded_loss(text_lm):
    with LocalClient(text_lm) as client:
        detail = client.call("loss_detail", run=".", batch=_training_batch(client))
    check = detail["reduction_check"]
    assert check["reduction"] == "mean" and check["complete"] and check["matches"]
    assert check["divisor"] == check["terms"] == detail["n_valid"]  # padding is ignored
    assert check["computed"] == pytest.approx(detail["value"], rel=1e-5)


TWO_TERM_SCRIPT = """
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(2):
        x, y, v = torch.randn(8, 6), torch.randint(0, 3, (8,)), torch.randn(8)
        out = model(x)
        penalty = out.pow(2).mean()  # a hand-written term: no torch loss call
        loss = F.mse_loss(out[:, 0], v) + 0.1 * penalty
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_loss_call_that_is_one_term_says_what_backward_ran_on(tmp_path, text_lm):
    from tvis.tui.pages.loss import call_line

    (tmp_path / "train.py").write_text(textwrap.dedent(TWO_TERM_SCRIPT))
    with LocalClient(_record(tmp_path, "train.py")) as client:
        detail = client.call("loss_detail", run=".", batch=0)
        batch = client.call("run", run=".")["batches"][0]
    assert detail["fn"] == "mse_loss" and detail["backward_loss"] == batch["loss"]
    assert detail["backward_loss"] > detail["value"]  # plus the penalty
    # backward ran on the sum, each term weighted as the line weighs it
    assert "= 1 × F.mse_loss" in call_line(detail).plain
    assert "+ 0.1 × out.pow(2).mean()" in call_line(detail).plain
    with LocalClient(text_lm) as client:  # one loss call, backward on it
        single = client.call("loss_detail", run=".", batch=_training_batch(client))
    assert single["backward_loss"] == pytest.approx(single["value"])
    assert "backward ran on" not in call_line(single).plain


OWN_LOSS_FUNCTION_SCRIPT = """
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 6), nn.Sigmoid())
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def loss_function(recon, x):
    bce = F.binary_cross_entropy(recon, x, reduction="sum")
    penalty = 0.5 * torch.sum(recon.pow(2))
    return bce + penalty


for step in range(2):
    x = torch.rand(8, 6)
    loss = loss_function(model(x), x)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_loss_function_of_the_scripts_own_is_not_shown_with_arguments_it_never_took(tmp_path):
    """``loss_function(recon, x)`` adds a summed BCE and a penalty (a VAE's loss is
    written so): the line says the loss is summed over the batch, not ``loss_function(reduction='sum')`` as if the script passed that."""
    from tvis.tui.pages.loss import call_line

    (tmp_path / "train.py").write_text(OWN_LOSS_FUNCTION_SCRIPT)
    with LocalClient(_record(tmp_path, "train.py")) as client:
        detail = client.call("loss_detail", run=".", batch=0)
    assert detail["call"]["name"] == "loss_function" and detail["reduction"] == "sum"
    shown = call_line(detail).plain
    assert shown.startswith("loss_function(…)   summed over the batch   called at train.py:")
    assert "reduction=" not in shown


def test_loss_call_site_is_the_scripts_loss_line(text_lm):
    source = (EXAMPLES / "text_lm" / "train.py").read_text().splitlines()
    with LocalClient(text_lm) as client:
        detail = client.call("loss_detail", run=".", batch=_training_batch(client))
    file, line = detail["call"]["site"]
    # Named from the project root: the repository holding the example, else its folder.
    assert Path(file).name == "train.py" and "F.cross_entropy(" in source[line - 1]


def test_loss_curve_marks_steps_and_decimates_to_the_width(text_lm):
    with LocalClient(text_lm) as client:
        run = client.call("run", run=".")
        curve = client.call("loss_curve", run=".", width=200)
        narrow = client.call("loss_curve", run=".", width=1)
    losses = [b["loss"] for b in run["batches"] if b.get("loss") is not None]
    assert [c["mean"] for c in curve["columns"]] == pytest.approx(losses)
    assert [s["step"] for s in curve["steps"]] == sorted({b["step"] for b in run["batches"]})
    (column,) = narrow["columns"]
    assert column["lo"] == min(losses) and column["hi"] == max(losses)


WEIGHTED_SCRIPT = """
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3), torch.nn.Flatten(), torch.nn.Linear(6 * 4 * 4, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    weight = torch.tensor([1.0, 2.0, 0.5, 3.0])
    for step in range(2):
        x, y = torch.randn(8, 3, 6, 6), torch.randint(0, 4, (8,))
        loss = F.cross_entropy(model(x), y, weight=weight, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


@pytest.fixture(scope="module")
def weighted(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("weighted")
    (folder / "train.py").write_text(textwrap.dedent(WEIGHTED_SCRIPT))
    return _record(folder, "train.py")


def test_weighted_mean_reduction_divides_by_the_summed_class_weights(weighted):
    with LocalClient(weighted) as client:
        detail = client.call("loss_detail", run=".", batch=_training_batch(client))
    check = detail["reduction_check"]
    assert check["weighted"] and check["matches"]
    assert check["divisor"] != check["terms"]
    assert detail["label_smoothing"] == 0.1


def test_kernel_grid_is_filters_by_channels_on_one_scale(weighted):
    with LocalClient(weighted) as client:
        grid = client.call("kernel_grid", run=".", step=0, name="0.weight", filters=4, channels=3)
        whole = client.call("array", run=".", step=0, tensor=_weight_tensor(client, "0.weight"))
    weight = np.asarray(whole["array"]).reshape(6, 3, 3, 3)
    assert grid["array"].shape == (4, 3, 3, 3) and not grid["downsampled"]
    np.testing.assert_array_equal(grid["array"], weight[:4])
    assert grid["lo"] == pytest.approx(float(weight[:4].min()))
    averaged = client_call(weighted, "kernel_grid", step=0, name="0.weight", cell=1, first_filter=2)
    np.testing.assert_allclose(
        averaged["array"][:, :, 0, 0], weight[2:].mean(axis=(2, 3)), rtol=1e-5
    )


def test_kernel_grid_of_a_matrix_says_what_it_is(weighted):
    with pytest.raises(AgentError, match="not a conv kernel"):
        client_call(weighted, "kernel_grid", step=0, name="2.weight")


def client_call(run: Path, method: str, **params):
    with LocalClient(run) as client:
        return client.call(method, run=".", **params)


def _weight_tensor(client, name: str) -> int:
    params = client.call("step", run=".", step=0)["params"]
    return next(p["weight"] for p in params if p["name"] == name)


BIG_VOCAB_SCRIPT = """
    import torch
    import torch.nn.functional as F

    class Words:
        itos = [f"w{i}" for i in range(50000)]

    class Tokens(torch.utils.data.Dataset):
        tokenizer = Words()

        def __len__(self):
            return 8

        def __getitem__(self, i):
            return torch.arange(i, i + 5) * 997 % 50000

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(50000, 32), torch.nn.Linear(32, 50000))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for ids in torch.utils.data.DataLoader(Tokens(), batch_size=4):
        loss = F.cross_entropy(model(ids[:, :-1]).transpose(1, 2), ids[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


@pytest.fixture(scope="module")
def big_vocab(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("big vocab")
    (folder / "train.py").write_text(textwrap.dedent(BIG_VOCAB_SCRIPT))
    return _record(folder, "train.py")


def test_embedding_table_view_is_labelled_by_token_and_bounded(big_vocab):
    view = client_call(big_vocab, "matrix", step=0, name="0.weight", width=32, height=40)
    assert view["array"].shape == (40, 32) and view["downsampled"]
    assert view["row_labels"][0] == "w0" and len(view["row_labels"]) == 40
    assert view["row_labels"][1] == f"w{view['row_starts'][1]}"
    assert len(encode(view)) < VIEW_BYTES
    zoom = client_call(big_vocab, "matrix", step=0, name="0.weight", window=[997, 1002, 0, 32])
    assert zoom["row_labels"] == [f"w{r}" for r in range(997, 1002)] and not zoom["downsampled"]


def test_classifier_head_rows_are_labelled_only_when_they_match_the_vocabulary(big_vocab):
    head = client_call(big_vocab, "matrix", step=0, name="1.weight", height=8)
    assert head["row_labels"] is not None  # 50000 rows: one per token
    bias = client_call(big_vocab, "matrix", step=0, name="1.bias")
    assert bias["row_labels"] is None


def test_vocabulary_without_one_says_why():
    vocab = Vocabulary({})
    assert not vocab.known and vocab.why == NO_VOCABULARY
    assert vocab.decoded([3, 4]) == {"why": NO_VOCABULARY} and vocab.text([3]) is None


def test_vocabulary_drops_special_ids_and_joins_by_convention():
    chars = Vocabulary(
        {"vocab": ["<pad>", "<eos>", "h", "i", " "], "tokenizer": {"specials": [1], "pad_id": 0}}
    )
    assert chars.text([2, 3, 4, 2, 1, 0]) == "hi h"
    bpe = Vocabulary({"vocab": ["Hello", "Ġworld", "!"]})
    assert bpe.text([0, 1, 2]) == "Hello world!" and bpe.token(7) == "<7>"
