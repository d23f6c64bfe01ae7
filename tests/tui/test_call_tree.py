"""The call tree: lazy loading, grouping, expand/collapse, filter, search, step mode."""

from __future__ import annotations

import gc
import warnings
from pathlib import Path

from fake_client import FakeClient
from support import record_script
from viewer_support import make_app, node_named, open_explore, screen_text, wait_for

from tvis.agent.replies import CallRowView
from tvis.tui.app import TvisApp
from tvis.tui.widgets.call_tree import PAGE, group_label, group_runs


def test_a_library_datasets_items_fold_into_one_data_pipeline_row():
    # torchvision's FakeData: each item is a ToPILImage call, then the script's Compose.
    items = [
        CallRowView.decode({"name": name, "cls": name, "kind": "transform", "phase": "data"})
        for _ in range(32)
        for name in ("ToPILImage", "Compose")
    ]
    blocks = [
        CallRowView.decode({"name": f"blocks.{i}", "cls": "Block", "kind": "module"})
        for i in range(4)
    ]
    model = CallRowView.decode({"name": "Net", "cls": "Net", "kind": "module", "phase": "forward"})
    pipeline, forward = group_runs([*items, model])
    assert pipeline == items and forward is model
    assert group_label(pipeline) == "data pipeline"
    (folded,) = group_runs(blocks)  # repeated blocks fold as before
    assert group_label(folded) == "blocks.0…3"


async def test_roots_show_the_model_and_fold_repeated_siblings(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        tree = page.calls.call_tree
        kinds = [
            (n.data.kind, n.data.text or getattr(n.data.call, "name", None))
            for n in tree.root.children
        ]
        assert ("call", "ShapesCNN") in kinds
        group = next(n for n in tree.root.children if n.data.kind == "group")
        assert group.data.text == "ShapesDataset.__getitem__"
        assert len(group.data.rows) == 3  # the kept samples; later items run unobserved
        assert getattr(tree.cursor_node.data.call, "name", None) == "ShapesCNN"


async def test_the_model_opens_on_its_layers_and_h_collapses_back(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await wait_for(pilot, lambda: node_named(page, "features"), "features under ShapesCNN")
        assert node_named(page, "head") is not None
        assert node_named(page, "features.0") is None  # one level, not the whole model
        await pilot.press("l")  # onto the first child
        await wait_for(
            pilot,
            lambda: getattr(page.calls.call_tree.cursor_node.data.call, "name", None) == "features",
            "cursor on features",
        )
        await pilot.press("h")  # back to the parent
        await wait_for(
            pilot,
            lambda: (
                getattr(page.calls.call_tree.cursor_node.data.call, "name", None) == "ShapesCNN"
            ),
            "cursor back on ShapesCNN",
        )
        await pilot.press("h")  # collapse it
        await wait_for(pilot, lambda: node_named(page, "features") is None, "features hidden")


WRAPPED_MODEL = """
import torch
from torch import nn


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


class Wrapper(nn.Module):  # what DDP, EMA or a Lightning module put around the model
    def __init__(self):
        super().__init__()
        self.net = Inner()

    def forward(self, x):
        return self.net(x)


torch.manual_seed(0)
model = Wrapper()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = nn.functional.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 2, (8,)))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


async def test_a_wrapped_model_opens_through_its_wrapper_to_the_first_layers(tmp_path: Path):
    run = record_script(tmp_path, WRAPPED_MODEL, "--steps", "1")
    app = make_app(run.parent)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        # Wrapper holds only net: the tree goes on into net, whose level has a layer (head).
        await wait_for(pilot, lambda: node_named(page, "net.head"), "head, two levels down")
        assert node_named(page, "net.encoder") is not None
        assert node_named(page, "net.encoder.0") is None  # the first level with layers only


async def test_cursor_moves_update_the_inspector(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await wait_for(pilot, lambda: node_named(page, "features"), "the model opened")
        await pilot.press("l")
        await wait_for(
            pilot, lambda: page.selection.row.get("name") == "features", "features selected"
        )
        await pilot.press("j")
        await wait_for(
            pilot,
            lambda: (
                page.inspector.selection.row.get("name") == "flatten_features"
                or page.inspector.selection.row.get("name") == "dropout"
            ),
            "the next call",
        )
        await wait_for(
            pilot, lambda: page.inspector.shown is page.inspector.selection, "cards of the new call"
        )


async def test_filter_lists_only_calls_of_one_kind(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("f")
        hits = page.calls.hits
        await wait_for(pilot, lambda: hits.hit_rows, "filtered rows")
        assert page.calls.filter == "module"
        assert {r["kind"] for r in hits.hit_rows} == {"module"}
        assert any(r["name"] == "features.2.0" for r in hits.hit_rows)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not hits.has_class("-shown"), "back to the tree")
        assert page.calls.filter == "all"


async def test_the_loss_filter_finds_the_loss_call_and_enter_reveals_it(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        hits = page.calls.hits
        await pilot.press("f", "f", "f")  # module, function, loss
        await wait_for(pilot, lambda: page.calls.filter == "loss" and hits.hit_rows, "loss rows")
        await wait_for(pilot, lambda: {r["kind"] for r in hits.hit_rows} == {"loss"}, "loss only")
        assert app.focused is hits
        assert "1 call found" in screen_text(app)
        loss = hits.hit_rows[0]
        await wait_for(
            pilot, lambda: page.inspector.selection.row.get("id") == loss["id"], "its cards"
        )
        await pilot.press("enter")
        tree = page.calls.call_tree
        await wait_for(
            pilot,
            lambda: getattr(tree.cursor_node.data.call, "id", None) == loss["id"],
            "the loss call revealed in the tree",
        )


async def test_search_then_enter_reveals_a_deep_call_in_the_tree(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("slash", *"features.1.0")
        hits = page.calls.hits
        await wait_for(
            pilot, lambda: hits.hit_rows and hits.hit_rows[0]["name"] == "features.1.0", "a hit"
        )
        await pilot.press("enter")
        assert not page.calls.query_one("#search").display  # enter ends typing: the box closes
        assert app.focused is hits
        await pilot.press("enter")
        tree = page.calls.call_tree
        await wait_for(
            pilot,
            lambda: getattr(tree.cursor_node.data.call, "name", None) == "features.1.0",
            "the hit revealed in the tree",
        )
        assert [getattr(n.data.call, "name", None) for n in _ancestors(tree.cursor_node)] == [
            "features.1",
            "features",
            "ShapesCNN",
        ]


def _ancestors(node):
    """Call rows above ``node`` (group rows such as ``features.0…2`` skipped)."""
    out = []
    node = node.parent
    while node is not None and node.data is not None and node.data.kind in ("call", "group"):
        if node.data.kind == "call":
            out.append(node)
        node = node.parent
    return out


class CountingClient(FakeClient):
    """The fake agent, remembering which pages of which parents were asked for."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.pages: list[tuple[int, int]] = []

    def _calls(self, run, batch, parent=-1, offset=0, limit=200):
        self.pages.append((parent, offset))
        return super()._calls(run, batch, parent, offset, limit)


async def test_a_node_with_thousands_of_children_loads_a_page_at_a_time():
    client = CountingClient(n_blocks=3000)
    app = TvisApp(lambda: client, "fake", "halfcell")
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        tree = page.calls.call_tree
        blocks = await wait_for(pilot, lambda: node_named(page, "blocks"), "the blocks module")
        model = tree.cursor_node.data.call.id
        # The roots, then the model's own children (it opens on its layers); nothing deeper.
        assert client.pages == [(-1, 0), (model, 0)]
        tree.move_cursor(blocks)
        await pilot.press("l")
        await wait_for(pilot, lambda: (blocks.data.call.id, 0) in client.pages, "the first page")
        group = await wait_for(
            pilot, lambda: blocks.children and blocks.children[0], "the first page rows"
        )
        assert group.data.kind == "group" and len(group.data.rows) == PAGE
        more = blocks.children[-1]
        assert more.data.kind == "more" and "2800 more" in more.data.text
        tree.move_cursor(more)
        await wait_for(
            pilot, lambda: (blocks.data.call.id, PAGE) in client.pages, "the second page"
        )
        assert app.internal_errors == []


async def test_step_mode_shows_micro_batches_and_parameters(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("m")
        tree = page.calls.call_tree
        await wait_for(
            pilot,
            lambda: [n.data.kind for n in tree.root.children] == ["batch", "params"],
            "the step's rows",
        )
        params = tree.root.children[1]
        params.expand()
        await pilot.pause()
        heading = next(line for line in screen_text(app).splitlines() if "parameters (" in line)
        assert "shape" in heading and "‖Δw‖/‖w‖" in heading  # the numbers below have a title
        tree.move_cursor(params.children[0])
        await wait_for(
            pilot, lambda: page.inspector.selection.kind == "param", "a parameter selected"
        )
        await wait_for(
            pilot,
            lambda: [c.ref.which for c in page.inspector.cards] == ["weight", "grad", "update"],
            "weight, grad and update cards",
        )


async def test_opening_the_layers_pane_redraws_the_tree_without_laying_out_its_rows(
    run_dir: Path,
):
    """The tree loses focus when the layers pane opens: its lines are drawn again (its tint,
    guides and cursor change) from row texts kept per node, not laid out again."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        tree = page.calls.call_tree
        await wait_for(pilot, lambda: node_named(page, "ShapesCNN"), "the model")
        await pilot.pause()
        before = screen_text(app).splitlines()
        built, drawn = tree.rows_built, []
        draw = tree._row_text

        def counted(data, width):
            drawn.append(data)
            return draw(data, width)

        tree._row_text = counted
        await pilot.press("y")
        await wait_for(pilot, lambda: not tree.has_focus, "the layers table focused")
        await pilot.pause()
        after = screen_text(app).splitlines()
        assert tree.rows_built == built and not [d for d in drawn if d.kind in ("call", "group")]
        tree_width = tree.size.width
        assert [line[:tree_width] for line in after[2:20]] == [
            line[:tree_width] for line in before[2:20]
        ]


async def test_a_lazy_load_cancelled_before_it_starts_leaves_no_coroutine_never_awaited(
    run_dir: Path,
):
    # A child's page asked for as the app quits: the worker is cancelled before it runs,
    # and a coroutine made for it beforehand would be reported "never awaited" when freed.
    app = make_app(run_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with app.run_test(size=(120, 40)) as pilot:
            page = await open_explore(pilot)
            tree = page.calls.call_tree
            unloaded = [n for n in tree.root.children if n.data is not None and not n.data.loaded]
            assert unloaded, "a root whose children are not loaded yet"
            for node in unloaded:
                tree._ensure_loaded_soon(node)
            app.workers.cancel_node(tree)
        gc.collect()
    never_awaited = [str(w.message) for w in caught if "never awaited" in str(w.message)]
    assert never_awaited == []
