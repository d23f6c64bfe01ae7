"""tvis stays quiet and honest at the edges: the script's warnings point at the script,
and tvis adds none of its own."""

from __future__ import annotations

import torch
from helpers import SCRIPTS, record_here
from support import run_tvis

from tvis.agent.api import AgentAPI
from tvis.store.reader import RunReader


def test_torch_warning_in_user_forward_points_at_the_users_line(tmp_path):
    result = run_tvis("run", "--out", str(tmp_path), str(SCRIPTS / "user_warning.py"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warning = next(line for line in result.stderr.splitlines() if "UserWarning" in line)
    source = (SCRIPTS / "user_warning.py").read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if "softmax(self.fc(x))" in text)
    assert warning.startswith(f"{SCRIPTS / 'user_warning.py'}:{line}: UserWarning: Implicit dim")


def test_heap_scan_for_raw_tensors_raises_no_future_warning(tmp_path):
    result = run_tvis(
        "run", "--out", str(tmp_path), str(SCRIPTS / "raw_tensors_distributed.py"), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr
    assert "complete" in result.stderr


class _Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def test_light_group_past_its_cap_summarises_dropped_calls_per_module(tmp_path):
    torch.manual_seed(0)
    model = _Small()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train():
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
            with torch.no_grad():
                for _ in range(400):  # 800 calls per evaluation: past the cap
                    model(torch.randn(2, 4))

    outcome = record_here(train, tmp_path, steps=2)
    run = RunReader(outcome.run_dir)
    group = next(b for b in run.index()["batches"] if b["light"] and b["dropped_calls"])
    record = run.batch(group["index"]).record
    sites = {(s["name"], s["cls"]): s["count"] for s in record["dropped_sites"]}
    assert sum(sites.values()) == group["dropped_calls"]
    root = next(name for name, cls in sites if cls == "_Small")
    assert sites[("fc", "Linear")] == sites[(root, "_Small")] > 0
    reply = AgentAPI(outcome.run_dir.parent).calls(outcome.run_dir.name, group["index"])
    assert reply["dropped"] == record["dropped_sites"]


def test_max_bytes_note_says_which_step_lost_parameter_values(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 256))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train():
        for _ in range(5):
            opt.zero_grad()
            model(torch.randn(2, 256)).sum().backward()
            opt.step()

    outcome = record_here(train, tmp_path, steps=3, max_bytes=1_200_000)
    steps = RunReader(outcome.run_dir).index()["steps"]
    cut = [s for s in steps if s.get("dropped")]
    assert cut, steps
    first = cut[0]
    note = (
        f"step {first['index']}: --max-bytes left no room for the values of "
        f"{first['dropped']['param_values']} of 4 parameters"
    )
    assert any(n.startswith(note) for n in outcome.notices), outcome.notices
