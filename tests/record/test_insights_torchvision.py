"""torchvision transforms stage by stage, against real torchvision (v1 and v2 Compose).

torchvision only comes as a large CUDA build here, so it lives in its own environment,
``.venv-tv`` at the repository root (``python3 -m venv .venv-tv && .venv-tv/bin/pip
install torch==2.14.1 torchvision==0.29.1 && .venv-tv/bin/pip install -e .``); without it
these tests skip (.ci/run builds it).
The script is recorded there by ``tvis run``, and the run is read here.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tvis.agent.client import LocalClient
from tvis.store.reader import RunReader

ROOT = Path(__file__).resolve().parents[2]
TV_TVIS = ROOT / ".venv-tv" / "bin" / "tvis"

pytestmark = pytest.mark.skipif(
    not TV_TVIS.exists(),
    reason="needs torchvision in .venv-tv (python3 -m venv .venv-tv && .venv-tv/bin/pip "
    "install torch==2.14.1 torchvision==0.29.1 && .venv-tv/bin/pip install -e .)",
)

SCRIPT = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset
    from torchvision import transforms as T
    from torchvision.transforms import v2

    MEAN, STD = [0.5, 0.4, 0.3], [0.25, 0.2, 0.2]
    V1 = T.Compose([T.Resize(12), T.CenterCrop(10), T.ToTensor(), T.Normalize(MEAN, STD)])
    V2 = v2.Compose(
        [
            v2.ToImage(),
            v2.Resize(12),
            v2.CenterCrop(10),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
        ]
    )


    class Squares(Dataset):
        classes = ["dim", "bright"]

        def __init__(self, transform):
            self.transform = transform

        def __len__(self):
            return 8

        def __getitem__(self, index):
            picture = Image.new("RGB", (16, 16), (20 * index, 100, 200))
            return self.transform(picture), index % 2


    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for transform in (V1, V2):
        for x, y in DataLoader(Squares(transform), batch_size=4, shuffle=True):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            break
"""


@pytest.fixture(scope="module")
def tv_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("torchvision project")
    (folder / "train.py").write_text(textwrap.dedent(SCRIPT))
    result = subprocess.run(
        [str(TV_TVIS), "run", "--steps", "2", "--samples", "2", "--out", "runs", "train.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    (run,) = (folder / "runs").iterdir()
    return run


def _item_calls(record: dict, position: int) -> list[dict]:
    first, end = record["data"]["items"][position]["calls"]
    return record["calls"][first:end]


def test_v1_compose_recorded_stage_by_stage(tv_run):
    batch = RunReader(tv_run).batch(0)
    record = batch.record
    calls = _item_calls(record, 0)
    assert [c["name"] for c in calls] == [
        "Squares.__getitem__",
        "Compose",
        "Resize",
        "CenterCrop",
        "ToTensor",
        "Normalize",
    ]
    assert all(c["kind"] == "transform" and c["phase"] == "data" for c in calls[1:])
    raw = np.array(batch.array(calls[1]["inputs"][0]["image"]))
    assert raw.shape == (16, 16, 3)
    resized = np.array(batch.array(calls[2]["outputs"][0]["image"]))
    cropped = np.array(batch.array(calls[3]["outputs"][0]["image"]))
    assert resized.shape == (12, 12, 3) and cropped.shape == (10, 10, 3)
    assert batch.tensor(calls[4]["outputs"][0]["tensor"])["shape"] == [3, 10, 10]
    index = record["data"]["indices"][0]
    assert raw[0, 0].tolist() == [20 * index, 100, 200]


def test_v2_compose_recorded_stage_by_stage(tv_run):
    record = RunReader(tv_run).batch(1).record
    calls = _item_calls(record, 0)
    assert [c["cls"] for c in calls[1:]] == [
        "Compose",
        "ToImage",
        "Resize",
        "CenterCrop",
        "ToDtype",
        "Normalize",
    ]
    assert calls[1]["name"] == "V2"  # a module is named by the script's variable
    assert all(c["kind"] == "transform" for c in calls[1:])
    assert "image" in calls[1]["inputs"][0]


def test_normalize_remembered_and_later_samples_not_kept(tv_run):
    run = RunReader(tv_run)
    assert run.index()["data"]["normalize"] == {"mean": [0.5, 0.4, 0.3], "std": [0.25, 0.2, 0.2]}
    batch = run.batch(0)
    later = _item_calls(batch.record, 3)
    assert "image" not in later[1]["inputs"][0]  # --samples 2: pictures of items 0 and 1 only
    assert batch.tensor(later[4]["outputs"][0]["tensor"])["value"] is None


def test_agent_pipeline_shows_raw_picture_stages_and_input(tv_run):
    with LocalClient(tv_run) as client:
        reply = client.call("pipeline", run=".", batch=0, sample=1, width=16, height=16)
    assert reply["raw"]["kind"] == "image" and reply["raw"]["shape"] == [16, 16]
    assert [s["name"] for s in reply["stages"]] == ["Resize", "CenterCrop", "ToTensor", "Normalize"]
    assert reply["input"]["kind"] == "image" and reply["input"]["normalized"]
