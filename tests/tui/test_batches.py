"""Batches are addressed by their recorded index: evaluation between steps leaves gaps."""

from __future__ import annotations

from pathlib import Path

from viewer_support import make_app, open_explore, screen_text, wait_for


async def test_batch_keys_walk_every_recorded_batch_of_a_run_with_gaps(gapped_run: Path):
    app = make_app(gapped_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        indices = app.batch_indices
        assert indices != list(range(len(indices)))  # light no-grad groups left gaps
        tree = page.calls.call_tree
        shown = lambda: tree.batch_index == app.batch and tree.call_nodes()  # noqa: E731
        await wait_for(pilot, shown, "the first batch's tree")  # the page takes keys now
        trained = [b["index"] for b in app.run_info["batches"] if not b.get("light")]
        assert app.batch == trained[0] != indices[0]  # opens where training starts
        for _ in range(3):  # the evaluation before it is one key back
            await pilot.press("comma")
            await pilot.pause(0.2)
            if app.batch == indices[0]:
                break
        assert app.batch == indices[0]
        await wait_for(pilot, shown, "the evaluation group's tree")
        seen = [app.batch]
        for _ in indices[1:]:
            before = app.batch
            for _ in range(3):  # a key Pilot sends while the page is still mounting is lost
                await pilot.press("full_stop")
                for _ in range(40):
                    if app.batch != before:
                        break
                    await pilot.pause(0.05)
                if app.batch != before:
                    break
            await wait_for(pilot, shown, "the tree on the next recorded batch")
            seen.append(app.batch)
        assert seen == indices
        await pilot.press("full_stop")  # past the last one: stays there
        assert app.batch == indices[-1]
        assert f"batch {indices[-1]}/{indices[-1]}" in screen_text(app).splitlines()[-1]
        await pilot.press("comma")
        assert app.batch == indices[-2]
        assert "has no batch" not in screen_text(app) and app.internal_errors == []


async def test_choosing_a_batch_by_index_shows_that_batch(gapped_run: Path):
    app = make_app(gapped_run)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        train = [b["index"] for b in app.run_info["batches"] if not b.get("light")]
        app.set_batch(train[-1])  # what the palette's "batch N" does
        await wait_for(
            pilot, lambda: page.calls.call_tree.batch_index == train[-1], "the last training batch"
        )
        assert app.batch_info["index"] == train[-1] and not app.batch_info.get("light")
        assert app.current_step == app.batch_info["step"]


async def test_following_a_sample_goes_to_its_batch_by_index_not_position(gapped_run: Path):
    from tvis.tui.widgets.insight_context import follow

    app = make_app(gapped_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        train = [b["index"] for b in app.run_info["batches"] if not b.get("light")]
        assert train[-1] != app.batch_indices.index(train[-1])  # index and position differ
        follow(app, train[-1], 1)  # what choosing a point on the Embeddings scatter does
        assert (app.batch, app.sample) == (train[-1], 1)
        follow(app, max(app.batch_indices) + 100, 0)  # a batch the run lacks: nothing moves
        assert (app.batch, app.sample) == (train[-1], 1)
