"""Names inferred from the call's source text, at the call."""

from __future__ import annotations

import types

import pytest

import tvis
from tvis.live import naming


def name_of(obj, *_, **__) -> str:
    """Stands in for catch: returns the name catch would infer for this call."""
    import sys

    return naming.infer_name(sys._getframe(1))


def catch(obj, *_, **__) -> str:
    import sys

    return naming.infer_name(sys._getframe(1))


class Model:
    def __init__(self):
        self.lm_head = types.SimpleNamespace(weight=1.0)


def test_attribute_chain_becomes_underscored_identifier():
    model = Model()
    assert catch(model.lm_head.weight) == "model_lm_head_weight"


def test_plain_variable_keeps_its_name():
    loss = 0.5
    assert catch(loss) == "loss"


def test_two_calls_on_one_line_get_their_own_names():
    a, b = 1, 2
    names = (catch(a), catch(b))
    assert names == ("a", "b")


def test_call_spanning_lines_is_read_whole():
    weights = {"fc": 1}
    name = catch(
        weights["fc"],
        every=10,
    )
    assert name == "weights_fc"


def test_any_alias_of_catch_works_when_columns_are_known():
    grads = [1]
    assert name_of(grads[0]) == "grads_0"


def test_keyword_argument_obj_is_named_too():
    hidden = 3
    assert catch(obj=hidden, every=2) == "hidden"


def test_repeated_calls_at_one_site_hit_the_cache():
    x = 1
    naming._cache.clear()
    for _ in range(3):
        assert catch(x) == "x"
    assert len(naming._cache) == 1


def test_code_without_source_falls_back_to_value():
    namespace = {"catch": catch, "x": 1}
    exec(compile("result = catch(x)", "<no source>", "exec"), namespace)
    assert namespace["result"] == naming.FALLBACK


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("model.lm_head.weight", "model_lm_head_weight"),
        ("x[0].grad", "x_0_grad"),
        ("out['logits']", "out_logits"),
        ("loss.item()", "loss_item"),
        ("2 * x", "_2_x"),
        ("lambda", "_lambda"),
        ("--", naming.FALLBACK),
    ],
)
def test_identifier_is_valid_python(text, name):
    assert naming.identifier(text) == name
    assert naming.identifier(text).isidentifier()


def test_tvis_catch_infers_from_the_callers_line(monkeypatch):
    seen = []
    monkeypatch.setattr("tvis.live.catching.Sender.put", lambda self, name, *a: seen.append(name))
    model = Model()
    model.lm_head.weight = 2.0
    tvis.catch(model.lm_head.weight)
    loss = 1.0
    tvis.catch(loss)
    tvis.catch(loss, name="explicit")
    assert seen == ["model_lm_head_weight", "loss", "explicit"]
