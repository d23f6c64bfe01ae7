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


class _Deep(torch.nn.Module):
    """One forward of 301 module calls: a light group's cap is reached inside a forward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        with torch.no_grad():  # values that stay finite through 300 layers
            self.fc.weight.copy_(torch.eye(4))
            self.fc.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(300):
            x = self.fc(x)
        return x


def test_light_group_past_its_cap_summarises_dropped_calls_per_module(tmp_path):
    torch.manual_seed(0)
    model = _Deep()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)

    def train():
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
            with torch.no_grad():
                model(torch.randn(2, 4))  # 301 calls recorded
                model(torch.randn(3, 4))  # another line: 199 recorded, the cap counts 102

    outcome = record_here(train, tmp_path, steps=2)
    run = RunReader(outcome.run_dir)
    group = next(b for b in run.index()["batches"] if b["light"] and b["dropped_calls"])
    record = run.batch(group["index"]).record
    assert group["n_calls"] == 500 and "repeats" not in group
    (site,) = record["dropped_sites"]
    second = next(c for c in record["calls"] if c["depth"] == 0 and c["id"] > 0)
    assert (site["name"], site["cls"], site["parent"]) == ("fc", "Linear", second["id"])
    assert site["count"] == group["dropped_calls"] == 102 and "why" not in site
    reply = AgentAPI(outcome.run_dir.parent).calls(
        outcome.run_dir.name, group["index"], second["id"]
    )
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
