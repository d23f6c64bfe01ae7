"""The laptop against a hostile agent (tests/faults/hostile_agent.py): names become safe file
names, generated code quotes them, printed text is inert, replies decode within fixed
bounds, bad records are one sentence and a silent agent fails calls in bounded time."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hostile_agent import CLIMB, PARAM

from tvis.agent import client as client_module
from tvis.agent.client import ConnectionLost, PipeClient
from tvis.agent.protocol import AgentError
from tvis.listing import _show
from tvis.runs import Connection
from tvis.tui import export

AGENT = str(Path(__file__).with_name("hostile_agent.py"))
CONTROL = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (9, 10)]


def hostile(mode: str) -> PipeClient:
    client = PipeClient([sys.executable, AGENT, mode], name="hostile", echo_stderr=False)
    client.handshake()
    return client


@pytest.fixture
def names():
    with hostile("names") as client:
        yield client


def test_export_of_a_run_id_that_climbs_stays_in_the_export_folder(names, tmp_path: Path):
    run_id = names.call("run", run="r")["run_id"]
    assert run_id.startswith(CLIMB)  # what the agent said, escapes made visible
    item = export.ExportItem(
        run="r", run_id=run_id, tensor=7, value={"dtype": "<u1", "shape": [4], "nbytes": 4},
        label="x/../../y out (gradient)", batch=0,
    )  # fmt: skip
    folder = tmp_path / "deep" / "tvis_exports"
    (path,) = export.export(names, item, folder, with_pt=False)
    assert path.parent == folder
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [path.name]
    assert not any(c in path.name for c in "/\\") and not path.name.startswith(".")


def test_python_lines_quote_a_parameter_named_with_a_newline(names):
    info = names.call("run", run="r")
    param = info["params"][0]["name"]
    item = export.ExportItem(
        run="r", run_id=info["run_id"], tensor=3, value={}, label=f"{param} weight",
        step=0, param=param,
    )  # fmt: skip
    tree = ast.parse(export.python_lines(names, item))
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [a.name for n in imports for a in n.names] == ["tvis"]
    calls = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert calls == {"connect", "open", "param", "numpy"}
    constants = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert param in constants and PARAM in constants  # the newline travels, inside a literal


def test_tvis_ls_of_an_agent_prints_no_control_characters(names, capsys):
    _show(names.call("runs"), "hostile:~/runs", as_json=False)
    printed = capsys.readouterr().out
    assert "train.py" in printed and "complete" in printed
    assert not [c for c in CONTROL if c in printed]


def test_every_string_an_agent_sends_reaches_the_caller_printable(names):
    def strings(obj):
        if isinstance(obj, str):
            yield obj
        elif isinstance(obj, dict):
            for k, v in obj.items():
                yield from strings(k)
                yield from strings(v)
        elif isinstance(obj, list):
            for v in obj:
                yield from strings(v)

    found = [*strings(names.call("runs")), *strings(names.call("run", run="r"))]
    assert any("␛]52" in s for s in found)  # shown, not obeyed
    assert not [s for s in found if any(c in s for c in CONTROL)]


@pytest.mark.parametrize("tensor", [1, 2, 3, 4], ids=["object", "huge", "string", "overflow"])
def test_a_tensor_record_no_array_can_have_is_one_agent_error(tensor):
    with Connection(hostile("entries")) as runs:
        handle = runs.open("r").tensor(tensor, batch=0)
        with pytest.raises(AgentError) as e:
            handle.numpy()
    assert type(e.value) is AgentError and e.value.message.count(". ") == 0


def test_a_silent_agent_fails_the_waiting_call_within_the_link_limit():
    client = hostile("silent")
    start = time.monotonic()
    with pytest.raises(ConnectionLost) as e:
        Connection(client).open()
    waited = time.monotonic() - start
    assert client_module.LINK_SILENCE_S <= waited <= client_module.LINK_SILENCE_S + 2
    assert "hostile" in e.value.message and "runs" in e.value.message
    with pytest.raises(ConnectionLost):  # and every later call, at once
        client.call("runs")
    client.close()


def test_an_agent_that_beats_but_never_answers_fails_the_call_naming_it(monkeypatch):
    monkeypatch.setattr(client_module, "ANSWER_TIMEOUT_S", 1.5)
    with hostile("stuck") as client:
        assert client.silence() == 0.0
        with pytest.raises(AgentError) as e:
            client.call("calls", run="r", batch=0)
        assert type(e.value) is AgentError  # the link itself is alive
        assert "hostile did not answer calls within 2 s" in e.value.message


# The client measured in a process of its own: peak memory (VmHWM) above what it had
# connected, for a reply the agent makes as costly to decode as it can.
MEASURE = """
    import json, sys
    from tvis.agent.client import PipeClient
    def peak():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    client = PipeClient([sys.executable, sys.argv[1], sys.argv[2]], name="hostile",
                        echo_stderr=False)
    client.handshake()
    before = peak()
    try:
        outcome = repr(client.call("runs"))
    except Exception as e:
        outcome = type(e).__name__ + ": " + str(e)
    print(json.dumps({"grew_mb": peak() - before, "outcome": outcome}))
"""


def measure(mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(MEASURE), AGENT, mode],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_reply_of_millions_of_empty_arrays_stays_within_the_decode_bound():
    # 16 MiB of msgpack that decodes into 16M lists (1.1 GB before the bound).
    found = measure("flood")
    assert "ConnectionLost" in found["outcome"] and "objects" in found["outcome"]
    assert found["grew_mb"] < 200


def test_frames_nobody_asked_for_are_skipped_not_held():
    # A 60 MiB data frame and a 16 MiB reply for requests never sent, then the answer.
    found = measure("unsolicited")
    assert found["outcome"] == "[]"
    assert found["grew_mb"] < 60
