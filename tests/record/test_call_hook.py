"""The call hook: off while a script sets up, on from the first batch, off after the run;
and both backends report the same entries and exits."""

from __future__ import annotations

import sys
import textwrap
import threading

import pytest

from tvis.record.builder import Settings
from tvis.record.call_hook import MonitoringHook, SettraceHook, new_call_hook
from tvis.record.runner import record_script
from tvis.store.reader import RunReader

SCRIPT = textwrap.dedent(
    """\
    import sys
    import torch


    def set_up():
        return sys.gettrace()


    def train_step(model, opt, x):
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()


    seen = set_up()
    with open(sys.argv[1], "w") as f:
        f.write("none" if seen is None else "traced")
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        train_step(model, opt, torch.randn(3, 4))
    """
)

needs_no_tracer = pytest.mark.skipif(
    sys.gettrace() is not None, reason="another tracer (coverage, a debugger) is active"
)
needs_monitoring = pytest.mark.skipif(
    sys.version_info < (3, 12) or MonitoringHook.free_tool() is None,
    reason="sys.monitoring needs Python 3.12 and a free tool id",
)
BACKENDS = [
    pytest.param(SettraceHook, marks=needs_no_tracer, id="settrace"),
    pytest.param(MonitoringHook, marks=needs_monitoring, id="monitoring"),
]


def _project_script(tmp_path, source: str):
    """``source`` as ``train.py`` of a project folder: (the script, the project)."""
    project = tmp_path / "project"
    project.mkdir()
    script = project / "train.py"
    script.write_text(source)
    return script, project


@needs_no_tracer
def test_script_sets_up_untraced_and_trains_traced(tmp_path):
    script, project = _project_script(tmp_path, SCRIPT)
    seen = tmp_path / "seen.txt"
    outcome = record_script(script, [str(seen)], Settings(steps=2), project, tmp_path / "runs")
    assert seen.read_text() == "none"  # imports and set-up ran at full speed
    calls = RunReader(outcome.run_dir).batch(1).record["calls"]
    assert any(c["kind"] == "function" and c["name"] == "train_step" for c in calls)
    assert sys.gettrace() is None


EPOCHS = textwrap.dedent(
    """\
    import torch


    def log(loss):
        return loss.item()


    def epoch(model, opt):
        for _ in range(2):
            loss = model(torch.randn(3, 4)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            log(loss)


    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        epoch(model, opt)
    """
)


@needs_no_tracer
def test_call_after_a_step_inside_a_longer_call_opens_the_next_batch(tmp_path):
    # The step ends its batch; the epoch's call (from an earlier batch) is still open
    # when log() runs: log() belongs to the next batch.
    script, project = _project_script(tmp_path, EPOCHS)
    outcome = record_script(script, [], Settings(steps=5), project, tmp_path / "runs")
    assert not [n for n in outcome.notices if "tvis failed" in n], outcome.notices
    reader = RunReader(outcome.run_dir)
    logged = [
        b["index"]
        for b in reader.index()["batches"]
        if any(c["name"] == "log" for c in reader.batch(b["index"]).record["calls"])
    ]
    assert len(logged) >= 3


@needs_monitoring
def test_functions_recorded_under_another_settrace_tracer_from_python_3_12(tmp_path):
    script, project = _project_script(tmp_path, SCRIPT)
    before = sys.gettrace()
    sys.settrace(lambda frame, event, arg: None)  # a debugger or coverage, say
    try:
        outcome = record_script(
            script, [str(tmp_path / "seen.txt")], Settings(steps=2), project, tmp_path / "runs"
        )
    finally:
        sys.settrace(before)
    calls = RunReader(outcome.run_dir).batch(1).record["calls"]
    assert any(c["kind"] == "function" and c["name"] == "train_step" for c in calls)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_lifted_and_put_back_sees_returns(backend):
    returned = []

    def on_call(frame):
        return returned.append

    def double(x):
        return 2 * x

    hook = backend(lambda code: code.co_name == "double", on_call)
    hook.start()
    try:
        double(1)
        assert hook.lift() and not hook.lift()
        double(2)  # lifted: not seen
        hook.put_back()
        double(3)
    finally:
        hook.stop()
    hook.put_back()  # stopped: stays off
    double(4)
    assert returned == [2, 6]
    assert sys.gettrace() is None


def test_new_call_hook_is_monitoring_from_python_3_12():
    hook = new_call_hook(lambda code: False, lambda frame: None)
    if sys.version_info >= (3, 12) and MonitoringHook.free_tool() is not None:
        assert isinstance(hook, MonitoringHook)
    elif sys.gettrace() is None:
        assert isinstance(hook, SettraceHook)
    else:
        assert hook is None


# Code the backends are compared on. Each names the calls it makes in ``log`` only through
# the hook, so the sequences below are what a hook reported.


def plain(x):
    return x + 1


def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)


def counter(n):
    yield from range(n)
    return "done"


def catcher():
    try:
        yield 1
    except KeyError:
        yield 2


def boom():
    raise ValueError("boom")


def caller():
    try:
        boom()
    except ValueError:
        pass
    return "caught"


def outer():
    def inner(y):
        return y * 3

    return inner(2)


TRACED = {"plain", "fact", "counter", "catcher", "boom", "caller", "outer", "inner"}


def _wanted(code):
    return code.co_filename == __file__ and code.co_name in TRACED


def _observe(backend, run):
    """What ``backend`` reports while ``run`` runs: ('call', name) and ('return', name,
    value) in order."""
    log = []

    def on_call(frame):
        name = frame.f_code.co_name
        log.append(("call", name))
        return lambda value: log.append(("return", name, value))

    hook = backend(_wanted, on_call)
    hook.start()
    try:
        run()
    finally:
        hook.stop()
    return log


def _generators():
    assert list(counter(2)) == [0, 1]
    it = catcher()
    assert next(it) == 1
    assert it.throw(KeyError) == 2
    it.close()
    with pytest.raises(KeyError):
        catcher().throw(KeyError)  # thrown into before it started


CASES = {
    "plain": (lambda: plain(1), [("call", "plain"), ("return", "plain", 2)]),
    "recursion": (
        lambda: fact(3),
        [("call", "fact"), ("call", "fact"), ("call", "fact")]
        + [("return", "fact", 1), ("return", "fact", 2), ("return", "fact", 6)],
    ),
    "generators": (
        _generators,
        [("call", "counter"), ("return", "counter", 0)]
        + [("call", "counter"), ("return", "counter", 1)]
        + [("call", "counter"), ("return", "counter", "done")]
        + [("call", "catcher"), ("return", "catcher", 1)]
        + [("call", "catcher"), ("return", "catcher", 2)]  # resumed by throw
        + [("call", "catcher"), ("return", "catcher", None)]  # closed: GeneratorExit
        + [("call", "catcher"), ("return", "catcher", None)],
    ),
    "raising": (
        caller,
        [("call", "caller"), ("call", "boom"), ("return", "boom", None)]
        + [("return", "caller", "caught")],
    ),
    "nested": (
        outer,
        [("call", "outer"), ("call", "inner"), ("return", "inner", 6), ("return", "outer", 6)],
    ),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_reports_entries_and_exits_as_settrace(backend, case):
    run, expected = CASES[case]
    assert _observe(backend, run) == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_ignores_threads_not_started(backend):
    def run():
        other = threading.Thread(target=lambda: (plain(1), fact(2)))
        other.start()
        other.join()
        plain(5)

    assert _observe(backend, run) == [("call", "plain"), ("return", "plain", 6)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_exit_of_entry_ignored_is_not_reported(backend):
    log = []

    def on_call(frame):  # ignores caller: only boom's exit is reported
        if frame.f_code.co_name == "caller":
            return None
        return lambda value: log.append((frame.f_code.co_name, value))

    hook = backend(_wanted, on_call)
    hook.start()
    try:
        caller()
    finally:
        hook.stop()
    assert log == [("boom", None)]


@needs_monitoring
def test_monitoring_keeps_code_wanted_seen_after_other_threads_and_lifts():
    log = []
    hook = MonitoringHook(_wanted, lambda frame: log.append)
    hook.start()
    try:
        other = threading.Thread(target=plain, args=(1,))  # unobserved thread first
        other.start()
        other.join()
        hook.lift()
        plain(2)  # lifted
        hook.put_back()
        plain(3)
    finally:
        hook.stop()
    assert log == [4]


@needs_monitoring
def test_monitoring_second_hook_sees_code_the_first_refused():
    first = MonitoringHook(lambda code: False, lambda frame: None)
    first.start()
    plain(1)  # refused: disabled for the first hook's tool id
    first.stop()
    assert sys.monitoring.get_tool(sys.monitoring.PROFILER_ID) is None  # freed
    assert _observe(MonitoringHook, lambda: plain(1)) == CASES["plain"][1]


@needs_monitoring
def test_monitoring_uses_debugger_id_when_profiler_id_is_taken():
    sys.monitoring.use_tool_id(sys.monitoring.PROFILER_ID, "another profiler")
    try:
        assert _observe(MonitoringHook, lambda: plain(1)) == CASES["plain"][1]
        sys.monitoring.use_tool_id(sys.monitoring.DEBUGGER_ID, "a debugger")
        try:
            assert MonitoringHook.free_tool() is None
            hook = new_call_hook(_wanted, lambda frame: None)
            assert isinstance(hook, SettraceHook) or sys.gettrace() is not None
        finally:
            sys.monitoring.free_tool_id(sys.monitoring.DEBUGGER_ID)
    finally:
        sys.monitoring.free_tool_id(sys.monitoring.PROFILER_ID)


@needs_monitoring
def test_monitoring_asks_wants_once_per_code_object():
    asked = []

    def wants(code):
        if code.co_filename == __file__:
            asked.append(code.co_name)
        return code.co_name == "outer"  # inner is refused, then runs unobserved

    hook = MonitoringHook(wants, lambda frame: None)
    hook.start()
    try:
        for _ in range(3):
            outer()
            plain(1)
    finally:
        hook.stop()
    # A nested def makes a new function at each call of outer, but over the same code
    # object: inner too is asked once.
    assert sorted(asked) == ["inner", "outer", "plain"]


TREE_SCRIPT = textwrap.dedent(
    """\
    import torch


    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x):
            return scale(self.fc(x), 2)


    def scale(x, k):
        def twice(y):
            return y * 2

        return twice(x) if k > 1 else x


    def depth(n):
        return 0 if n == 0 else 1 + depth(n - 1)


    def checked(x):
        if not torch.isfinite(x).all():
            raise ValueError("not finite")
        return x


    def batches():
        for _ in range(3):
            yield torch.randn(3, 4)


    def train_step(model, opt, x):
        try:
            checked(x / 0)
        except ValueError:
            pass
        loss = model(checked(x)).sum() * depth(3)
        opt.zero_grad()
        loss.backward()
        opt.step()


    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in batches():
        train_step(model, opt, x)
    """
)


@needs_monitoring
@needs_no_tracer
def test_call_tree_same_with_either_backend(tmp_path, monkeypatch):
    import tvis.record.functions as functions

    script, project = _project_script(tmp_path, TREE_SCRIPT)
    trees = {}
    for backend in (SettraceHook, MonitoringHook):
        monkeypatch.setattr(functions, "new_call_hook", backend)
        outcome = record_script(script, [], Settings(steps=2), project, tmp_path / backend.__name__)
        reader = RunReader(outcome.run_dir)
        keys = ("kind", "name", "parent", "depth", "def", "site", "phase")
        trees[backend] = [
            [{k: c.get(k) for k in keys} for c in reader.batch(i).record["calls"]]
            for i in reader.batch_ids()
        ]
    names = [c["name"] for batch in trees[MonitoringHook] for c in batch]
    assert {"train_step", "checked", "depth", "scale", "scale.<locals>.twice"} <= set(names)
    assert trees[MonitoringHook] == trees[SettraceHook]
