"""The data pipeline: indices per batch, each item's calls, values of the first samples
only, Normalize remembered, embedding tables and representations noted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from helpers import record_here
from insight_models import (
    PAD,
    ConvNet,
    ModuleTransformed,
    PictureNet,
    Pictures,
    TinyLM,
    token_batch,
)
from torch.utils.data import DataLoader

from tvis.store.reader import RunReader


def _picture_run(tmp_path, samples: int = 2):
    torch.manual_seed(0)
    model = PictureNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Pictures(), batch_size=6, shuffle=True)
    seen = []

    def train():
        for x, y, index in loader:
            seen.append(index.tolist())
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

    outcome = record_here(train, tmp_path, steps=2, samples=samples)
    return RunReader(outcome.run_dir), seen


def test_dataset_indices_recorded_per_batch(tmp_path):
    run, seen = _picture_run(tmp_path)
    for b, indices in enumerate(seen):
        data = run.batch(b).record["data"]
        assert data["indices"] == indices
        assert [item["index"] for item in data["items"]] == indices


def test_each_item_holds_the_calls_made_while_fetching_it(tmp_path):
    run, seen = _picture_run(tmp_path)
    record = run.batch(1).record
    calls = record["calls"]
    kept = run.meta["settings"]["samples"]
    items = record["data"]["items"]
    assert [item["index"] for item in items] == [int(i) for i in seen[1]]
    for position, (item, index) in enumerate(zip(items, seen[1], strict=True)):
        first, end = item["calls"]
        names = [c["name"] for c in calls[first:end]]
        if position >= kept:
            assert names == []  # fetched unobserved, past the kept samples
            continue
        assert names == [
            "Pictures.__getitem__",
            "Compose.__call__",
            "ToTensor.__call__",
            "Normalize.__call__",
        ]
        assert calls[first]["inputs"][0]["repr"] == str(index)


def test_a_dataset_s_items_are_called_from_torch_s_loader_not_from_tvis(tmp_path):
    """The recorder fetches the kept items in a loop of its own, in place of the fetcher's:
    the site recorded is the torch code that asked for them (the loader), not tvis's."""
    run, _ = _picture_run(tmp_path)
    calls = run.batch(0).record["calls"]
    sites = {c["site"][0] for c in calls if c["name"] == "Pictures.__getitem__"}
    loader_file = Path(torch.utils.data.dataloader.__file__).resolve()
    assert sites and {Path(site).resolve() for site in sites} == {loader_file}


def test_pipeline_values_kept_for_the_first_samples_only(tmp_path):
    run, _ = _picture_run(tmp_path, samples=2)
    batch = run.batch(0)
    record = batch.record
    for position, item in enumerate(record["data"]["items"]):
        first, end = item["calls"]
        if position >= 2:
            assert first == end  # no calls, pictures or values past the kept samples
            continue
        picture = record["calls"][first + 1]["inputs"][0]
        to_tensor = record["calls"][first + 2]
        value = batch.tensor(to_tensor["outputs"][0]["tensor"])["value"]
        raw = np.array(batch.array(picture["image"]))
        assert raw.shape == (8, 8, 3) and value is not None


def test_normalize_mean_and_std_remembered(tmp_path):
    run, _ = _picture_run(tmp_path)
    data = run.index()["data"]
    assert data["normalize"] == {"mean": [0.5, 0.4, 0.3], "std": [0.2, 0.2, 0.2]}
    assert data["classes"] == ["red", "green"]


def test_embedding_tables_and_representations_noted(tmp_path):
    torch.manual_seed(0)
    model = TinyLM()
    ids, targets = token_batch()

    def step():
        logits = model(ids)
        F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD).backward()

    run = RunReader(record_here(step, tmp_path, steps=1).run_dir)
    insights = run.index()["data"]["insights"]
    assert insights["embeddings"] == [
        {"module": "embed", "param": "embed.weight", "rows": 12, "dim": 16, "padding_idx": None}
    ]
    batch = run.batch(0)
    pooled = {r["module"]: r for r in batch.record["repr"]}
    assert set(insights["repr"]) == set(pooled)
    with torch.no_grad():
        expected = model.embed(ids).mean(dim=1)
    got = torch.from_numpy(np.array(batch.array(pooled["embed"]["tensor"])))
    # stored to the run's mantissa bits, as the activations they pool
    assert batch.tensor(pooled["embed"]["tensor"])["value"]["bits"] == 10
    torch.testing.assert_close(got, expected, rtol=2**-11 + 1e-6, atol=1e-7)


def test_batch_size_not_taken_from_a_module_transform_on_one_item(tmp_path):
    torch.manual_seed(0)
    model = ConvNet()
    loader = DataLoader(ModuleTransformed(), batch_size=8)

    def step():
        x, y = next(iter(loader))
        F.cross_entropy(model(x), y).backward()

    batch = RunReader(record_here(step, tmp_path, steps=1).run_dir).batch(0)
    assert batch.record["batch"]["batch_size"] == 8
    collated = batch.record["data"]["batch"][0]["tensor"]
    assert batch.tensor(collated)["batch_dim"] == 0


def test_index_and_fetch_patches_removed_after_recording(tmp_path):
    from torch.utils.data import dataloader
    from torch.utils.data._utils import fetch

    _picture_run(tmp_path)
    for function in (dataloader._BaseDataLoaderIter._next_index, fetch._MapDatasetFetcher.fetch):
        assert function.__module__.startswith("torch."), function
