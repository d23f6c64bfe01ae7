"""``counterpart``: a call of one batch found in another by where it stands in the tree
(names and occurrences from the root), not by its id, which shifts whenever a batch runs
a call more or fewer times (a data pipeline's item with one transform more)."""

from __future__ import annotations

import pytest

from tvis.agent.calltree import CallTree
from tvis.agent.protocol import AgentError


def _tree(calls: list[tuple[int, int, str]]) -> CallTree:
    """A batch's tree from ``(id, parent, name)`` in call order."""
    return CallTree(
        {"calls": [{"id": i, "parent": p, "name": n, "kind": "module"} for i, p, n in calls]},
        {},
    )


# Batch 0's first item ran two transforms, batch 1's only one: every later id shifts by one.
BATCH0 = _tree(
    [
        (0, -1, "Dataset.__getitem__"),
        (1, 0, "Resize"),
        (2, 0, "Normalize"),
        (3, -1, "Dataset.__getitem__"),
        (4, 3, "Normalize"),
        (5, -1, "Net"),
        (6, 5, "conv"),
        (7, 5, "relu"),
        (8, 5, "relu"),
    ]
)
BATCH1 = _tree(
    [
        (0, -1, "Dataset.__getitem__"),
        (1, 0, "Normalize"),
        (2, -1, "Dataset.__getitem__"),
        (3, 2, "Normalize"),
        (4, -1, "Net"),
        (5, 4, "conv"),
        (6, 4, "relu"),
        (7, 4, "relu"),
    ]
)


def test_the_same_call_is_followed_by_name_and_occurrence_when_ids_shift():
    # the second relu under Net: id 8 in batch 0, id 7 in batch 1 (batch 1's id 8: none)
    assert BATCH1.follow(BATCH0.route(8)) == [4, 7]
    # the second item's Normalize: id 4 in batch 0 is batch 1's id 3, not its Net
    assert BATCH1.follow(BATCH0.route(4)) == [2, 3]


def test_a_call_the_other_batch_lacks_is_followed_to_its_deepest_ancestor_there():
    # batch 0's Resize ran only in batch 0: its item is what batch 1 has of the way
    assert BATCH1.follow(BATCH0.route(1)) == [0]


def test_counterpart_answers_the_call_its_ancestors_and_whether_it_is_the_same(api, run):
    first, second = [b["index"] for b in api.run(run=run.name)["batches"][:2]]
    tree = api._tree(run.name, first)
    deepest = max(tree.order, key=lambda c: len(tree.path(c)))
    found = api.counterpart(run=run.name, batch=first, call=deepest, other=second)
    other = api._tree(run.name, second)
    assert found["exact"] is True
    assert other.route(found["call"]) == tree.route(deepest)
    assert found["path"] == other.path(found["call"])


def test_counterpart_of_a_call_the_batch_lacks_says_so_in_one_sentence(api, run):
    with pytest.raises(AgentError, match="this batch has no call 99999"):
        api.counterpart(run=run.name, batch=0, call=99999, other=0)
