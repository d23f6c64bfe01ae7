"""The agent API is services composed by AgentAPI: every protocol method is answered by
exactly one service, and a service works on its own from what its constructor is given
(no attribute borrowed from a class it is mixed into)."""

from __future__ import annotations

from synthetic_run import SyntheticRun

from tvis.agent.api import AgentAPI
from tvis.agent.dispatch import METHODS, handle
from tvis.agent.layer_api import LayerViewsAPI
from tvis.agent.lookups import Lookups
from tvis.agent.ranks import RanksAPI
from tvis.agent.replay import ReplayAPI
from tvis.agent.runs import RunsAPI
from tvis.agent.store import RunStore
from tvis.agent.tensors import TensorsAPI
from tvis.agent.traffic import Traffic
from tvis.agent.weights import WeightsAPI


def test_every_method_is_answered_by_one_service(api: AgentAPI):
    for name, func in METHODS.items():
        owners = [s for s in api.services if getattr(type(s), name, None) is func]
        assert len(owners) == 1, f"{name} is answered by {owners}"
        assert api.receiver(func) is owners[0]
        assert getattr(api, name).__self__ is owners[0]


def test_a_service_answers_from_what_its_constructor_is_given(run: SyntheticRun):
    store = RunStore(run.root)
    lookups = Lookups(store)
    tensors = TensorsAPI(lookups)
    assert tensors.tensor(run.name, run.conv, batch=0)["grad_entry"] is not None
    replay = ReplayAPI(lookups, Traffic())
    assert replay.replay(run.name)["total"] > 0
    layers = LayerViewsAPI(lookups)
    thumbs = layers.thumbs(run.name, 0, [run.conv_call])["thumbs"]
    assert thumbs[0]["call"] == run.conv_call and thumbs[0]["array"] is not None
    described = RunsAPI(store, RanksAPI(store)).run(run.name)
    assert described["run"] == run.name and described["ranks"] == []
    matrix = WeightsAPI(store, tensors).matrix(run.name, 0, "head.weight", width=16, height=8)
    assert matrix["name"] == "head.weight" and matrix["array"].shape[0] <= 8


def test_a_request_runs_on_its_service_through_handle(api: AgentAPI, run: SyntheticRun):
    reply = handle(
        api,
        {
            "id": 3,
            "method": "thumbs",
            "params": {"run": run.name, "batch": 0, "calls": [run.conv_call]},
        },
    )
    assert reply["id"] == 3 and reply["result"]["thumbs"][0]["call"] == run.conv_call
    unknown = handle(api, {"id": 4, "method": "nothing"})
    assert unknown["status"] == 400 and "thumbs" in unknown["error"]
