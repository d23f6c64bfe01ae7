"""Every record a recording writes and the agent serves has the fields tvis/store/schema.py
declares, and every flag it carries is in the one flag table the viewer draws from."""

from __future__ import annotations

from pathlib import Path

import msgpack

from tvis.agent.client import LocalClient
from tvis.store import format, schema
from tvis.tui import marks


def _batches(run: Path) -> list[dict]:
    return [
        msgpack.unpackb((d / format.INDEX).read_bytes(), raw=False)
        for d in sorted((run / format.BATCHES).iterdir())
    ]


def test_recorded_calls_and_tensors_use_only_schema_fields(recorded_run: Path):
    for batch in _batches(recorded_run):
        assert not schema.unknown_fields(batch["batch"], schema.BatchInfo)
        for call in batch["calls"]:
            assert not schema.unknown_fields(call, schema.Call), call["name"]
            for arg in call["inputs"] + call["outputs"]:
                assert not schema.unknown_fields(arg, schema.Arg)
        for entry in batch["tensors"]:
            assert not schema.unknown_fields(entry, schema.TensorEntry)
            assert not schema.unknown_fields(entry.get("stats") or {}, schema.Stats)


def test_every_recorded_flag_is_in_the_flag_table(recorded_run: Path):
    seen = {f for batch in _batches(recorded_run) for c in batch["calls"] for f in c["flags"]}
    assert seen, "the example records flags (bwd_inferred at least)"
    assert seen <= set(schema.FLAGS), seen - set(schema.FLAGS)


def test_every_warning_flag_has_a_mark_and_info_flags_have_words():
    for key, flag in schema.FLAGS.items():
        if flag.warning:
            assert marks.MARKS[key].symbol == flag.symbol
        else:
            assert marks.info_flags([key]) == [flag.label]


def test_agent_rows_have_exactly_the_schema_fields(recorded_run: Path):
    with LocalClient(recorded_run.parent) as client:
        run = client.call("runs")[0]["run"]
        layers = client.call("layers", run=run, batch=0)["rows"]
        rows = client.call("calls", run=run, batch=0)["calls"]
        info = client.call("run", run=run)
    assert layers and rows
    for row in layers:
        assert set(row) == set(schema.LayerRow.__annotations__)
    for row in rows:
        assert not schema.unknown_fields(row, schema.CallRow)
    for step in info["steps"]:
        assert not schema.unknown_fields(step, schema.StepInfo)


def test_statistics_imply_the_same_warnings_everywhere():
    assert schema.stat_flags({"numel": 4, "nan": 1}) == [schema.NONFINITE]
    assert schema.stat_flags({"numel": 4, "zeros": 0.95}) == [schema.DEAD]
    assert schema.stat_flags({"numel": 1, "zeros": 1.0}) == []  # one zero is not a dead layer
    assert schema.stat_flags({}, grad_norm=0.0) == [schema.VANISHING]
    row = {"flags": [], "out_stats": {"numel": 8, "inf": 2}, "grad_norm": None}
    assert [m.key for m in marks.of_row(row)] == [schema.NONFINITE]
