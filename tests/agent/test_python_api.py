"""The Python API (tvis.connect): recorded tensors as arrays, locally and over the real sshd
lab, and one sentence for every way it can fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import cut_agent_argv, write_large_run
from test_server import BLOCK_TORCH

import tvis
from tvis.agent.client import PipeClient
from tvis.agent.target import Target
from tvis.runs import AgentError, Connection
from tvis.store.reader import RunReader
from tvis.targets import save


def stored(run_path: Path, tensor: int, batch: int | None = None, step: int | None = None):
    """What the writer stored, read straight from the run directory."""
    reader = RunReader(run_path)
    chunk = reader.batch(batch) if batch is not None else reader.step(step)
    return np.array(chunk.array(tensor))


def test_activation_equals_the_stored_values_locally(run):
    with tvis.connect(run.root) as runs:
        out = runs.open().activation("features.0", batch=1)
        values = out.numpy()
    assert out.shape == (4, 8, 16, 16) and out.dtype == "float32"
    assert out.stats["numel"] == values.size
    assert values.flags.writeable
    np.testing.assert_array_equal(values, stored(run.path, run.conv, batch=1))


def test_gradient_by_call_id_equals_the_stored_gradient(run):
    with tvis.connect(run.root) as runs:
        r = runs.open(run.name)
        grad = r.gradient(run.conv_call, batch=0)
        entry = r.tensor(run.conv, batch=0).entry
        values = grad.numpy()
    np.testing.assert_array_equal(values, stored(run.path, entry["grad"], batch=0))


def test_values_kept_for_some_samples_come_with_their_stored_shape(run):
    with tvis.connect(run.root) as runs:
        capped = runs.open().activation("model.inner", batch=0, output=0)
        assert capped.kept == "samples" and capped.stored_shape == (2, 8, 16, 16)
        assert capped.numpy().shape == (2, 8, 16, 16)


def test_torch_gives_a_tensor_with_the_same_values(run):
    torch = pytest.importorskip("torch")
    with tvis.connect(run.root) as runs:
        logits = runs.open().activation("head", batch=0)
        assert torch.equal(logits.torch(), torch.from_numpy(logits.numpy()))


def test_param_update_is_weight_after_minus_weight_before_exactly(recorded_run):
    with tvis.connect(recorded_run) as runs:
        r = runs.open()
        assert r.steps[:2] == [0, 1]
        checked = 0
        for name in r.params:
            update = r.param(name, step=0, which="update")
            if update.kept != "all":
                continue
            before = r.param(name, step=0).numpy()
            after = r.param(name, step=1).numpy()
            assert np.array_equal(update.numpy(), after - before), name
            checked += 1
    assert checked >= 2


def test_progress_reaches_the_whole_tensor(run):
    seen = []
    with tvis.connect(run.root) as runs:
        runs.open().activation("features.0", batch=0).numpy(lambda done, total: seen.append(done))
    assert seen[-1] == 4 * 8 * 16 * 16 * 4


@pytest.fixture(scope="module")
def large_run(tmp_path_factory) -> tuple[Path, np.ndarray]:
    root = tmp_path_factory.mktemp("large")
    path, values = write_large_run(root)
    return root, values


def test_a_64_mib_activation_arrives_bit_identical_over_ssh(ssh_lab, large_run):
    root, values = large_run
    with tvis.connect(
        f"tvis-test:{root}",
        remote_tvis=ssh_lab.remote_tvis,
        ssh_command=ssh_lab.ssh_command,
        control_dir=ssh_lab.control_dir(),
    ) as runs:
        got = runs.open().activation("encoder").numpy()
    assert got.tobytes() == values.tobytes()


def test_a_saved_target_through_a_jump_host_serves_tensors(ssh_lab, run, tmp_path, monkeypatch):
    monkeypatch.setenv("TVIS_CONFIG_DIR", str(tmp_path))
    target = Target(
        path=str(run.root), host="tvis-test", via=("tvis-jump",), remote_tvis=ssh_lab.remote_tvis
    )
    save({"lab": target})
    before = ssh_lab.jump.accepted()
    with tvis.connect(
        "lab", ssh_command=ssh_lab.ssh_command, control_dir=ssh_lab.control_dir()
    ) as runs:
        update = runs.open().param("head.weight", step=0, which="update").numpy()
    assert ssh_lab.jump.accepted() == before + 1
    np.testing.assert_array_equal(update, stored(run.path, 5, step=0))


# -- bad input: one sentence each ------------------------------------------------------------


def test_unknown_call_names_the_close_ones(run):
    with tvis.connect(run.root) as runs, pytest.raises(AgentError) as e:
        runs.open().activation("feature", batch=0)
    assert str(e.value) == (
        "batch 0 has no call named 'feature'; calls containing it: features.0, features.1."
    )


def test_values_not_kept_is_one_sentence(run):
    with tvis.connect(run.root) as runs:
        stats_only = runs.open().activation("model.inner", batch=0, output=1)
        assert stats_only.kept is None and stats_only.stats["numel"] == 4 * 8 * 16 * 16
        with pytest.raises(AgentError, match=r"statistics only; its values were not kept"):
            stats_only.numpy()


def test_a_tensor_without_gradient_says_so(run):
    with tvis.connect(run.root) as runs, pytest.raises(AgentError, match="no recorded gradient"):
        runs.open().gradient("model.helper", batch=0)


def test_unknown_run_and_target_are_one_sentence(run, tmp_path, monkeypatch):
    monkeypatch.setenv("TVIS_CONFIG_DIR", str(tmp_path))
    with tvis.connect(run.root) as runs, pytest.raises(AgentError, match="there is no run 'zz'"):
        runs.open("zz")
    with pytest.raises(AgentError, match="is not a folder here, a saved target or HOST:PATH"):
        tvis.connect("no-such-thing")


def test_a_connection_dropped_mid_transfer_is_one_sentence(large_run):
    root, _ = large_run
    client = PipeClient(cut_agent_argv(root, 5_000_000), name="cut agent")  # in the 1st chunk
    client.handshake()
    with Connection(client) as runs:
        tensor = runs.open().activation("encoder")
        with pytest.raises(AgentError) as e:
            tensor.numpy()
    assert str(e.value).startswith("the connection to cut agent dropped")
    assert "\n" not in str(e.value)


def test_the_api_needs_no_torch(run):
    code = BLOCK_TORCH + (
        "import sys, tvis\n"
        f"with tvis.connect({str(run.root)!r}) as runs:\n"
        "    out = runs.open().activation('features.0', batch=0)\n"
        "    print(out.numpy().shape)\n"
        "    try:\n"
        "        out.torch()\n"
        "    except tvis.runs.AgentError as e:\n"
        "        print(e)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'textual')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "(4, 8, 16, 16)",
        "torch is not installed on this machine; use .numpy() instead.",
        "[]",
    ]


def test_a_rounded_value_says_so_and_an_exact_one_does_not(tmp_path):
    from tvis.store.rounding import round_mantissa
    from tvis.store.writer import RunWriter

    x = np.random.default_rng(0).standard_normal((2, 4, 8, 8)).astype(np.float32)
    labels = np.array([1, 0], np.int64)
    entries = [
        {"id": i, "shape": list(a.shape), "dtype": str(a.dtype), "stats": {}, "batch_dim": 0}
        for i, a in enumerate((x, labels))
    ]
    batch = {"index": 0, "step": 0, "micro": 0, "n_calls": 0, "phase_ms": {}}
    record = {"batch": batch, "calls": [], "tensors": entries}
    path = tmp_path / "runs" / "20260101-000000_rounded_000000"
    writer = RunWriter(path, {"script": "train.py", "status": "complete"}, mantissa_bits=10)
    writer.write_batch(0, record, {0: x, 1: labels})
    writer.write_index({"batches": [batch], "steps": [], "params": [], "notices": []})
    writer.write_meta(status="complete")
    with tvis.connect(tmp_path / "runs") as runs:
        run = runs.open()
        rounded, exact = run.tensor(0, batch=0), run.tensor(1, batch=0)
        assert rounded.bits == 10 and "values to 11 significant bits" in repr(rounded)
        assert exact.bits is None and "significant bits" not in repr(exact)
        np.testing.assert_array_equal(rounded.numpy(), round_mantissa(x, 10))
