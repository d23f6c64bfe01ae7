"""Recording with DataLoader workers leaves training bit-identical to real workers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from worker_pipelines import CONFIGS, train

from tvis.record.builder import Settings
from tvis.record.runner import record
from tvis.store.reader import RunReader

HERE = Path(__file__).resolve().parent
STEPS = 12


def _assert_same_log(plain: list, recorded: list) -> None:
    assert len(plain) == len(recorded) == STEPS + 1
    for step, (a, b) in enumerate(zip(plain[:-1], recorded[:-1], strict=True)):
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y), f"step {step} differs"
    (_, torch_a, numpy_a, random_a), (_, torch_b, numpy_b, random_b) = plain[-1], recorded[-1]
    assert torch.equal(torch_a, torch_b)  # the main streams were left where torch leaves them
    assert np.array_equal(numpy_a, numpy_b)
    assert random_a == random_b


@pytest.mark.parametrize("config", CONFIGS)
def test_training_bit_identical_with_real_workers_when_recorded(config, tmp_path):
    plain_log: list = []
    plain_model = train(config, STEPS, plain_log)
    log: list = []
    models: list = []
    outcome = record(
        lambda: models.append(train(config, STEPS, log)),
        Settings(steps=STEPS + 5),
        HERE,
        tmp_path / "run",
    )
    assert outcome.status == "complete", outcome.notices
    _assert_same_log(plain_log, log)
    for (name, p), q in zip(
        plain_model.state_dict().items(), models[0].state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), name
    assert any("keeps its own seeds" in n for n in outcome.notices)
    assert outcome.steps == STEPS


def test_worker_batches_keep_dataset_indices_when_recorded(tmp_path):
    outcome = record(lambda: train("map_shuffle", 3, []), Settings(steps=3), HERE, tmp_path / "run")
    run = RunReader(outcome.run_dir)
    batch = run.batch(run.index()["batches"][0]["index"])
    data = batch.record["data"]
    assert len(data["indices"]) == 4 and len(data["items"]) == 4
    assert data["batch"]  # the batch as it left the loader is recorded
