"""The Ranks page over a real 2-rank DDP recording (torchrun -m tvis run), with Pilot."""

from __future__ import annotations

from viewer_support import make_app, open_explore, screen_text, wait_for

from tvis.tui.pages.ranks import RanksPage


def _rank_name(recording, rank: int) -> str:
    return f"{recording.group.name}/rank{rank}"


async def _open_ranks(pilot):
    app = pilot.app
    await open_explore(pilot)
    await wait_for(pilot, lambda: "Ranks" in [p.title for p in app.pages()], "the Ranks tab")
    await pilot.press(str([p.id for p in app.pages()].index("ranks") + 1))
    await wait_for(pilot, lambda: isinstance(app.screen, RanksPage), "the Ranks page")
    await wait_for(pilot, lambda: "loss per step" in screen_text(app), "the comparison")


async def test_ranks_page_compares_losses_phases_and_gradients(ddp_recording):
    app = make_app(ddp_recording.group.parent, run=_rank_name(ddp_recording, 0))
    async with app.run_test(size=(120, 60)) as pilot:
        await _open_ranks(pilot)
        await wait_for(pilot, lambda: "‖grad‖ r1" in screen_text(app), "the parameter table")
        text = screen_text(app)
        assert "2 ranks (torchrun)" in text
        assert "gradients bit-identical across ranks" in text
        assert "every rank trained on its own batches" in text
        assert "parameters got no gradient (module.spare.weight" in text
        assert "time per phase" in text and "backward" in text
        page = app.screen
        losses = [row["losses"] for row in page.reply["loss"]]
        assert f"{losses[0][1]:.6g}" in text  # rank 1's loss at step 0


async def test_rank_keys_switch_the_viewer_to_another_rank_on_any_page(ddp_recording):
    app = make_app(ddp_recording.group.parent, run=_rank_name(ddp_recording, 0))
    async with app.run_test(size=(100, 40)) as pilot:
        await _open_ranks(pilot)
        await pilot.press("right_curly_bracket")
        await wait_for(pilot, lambda: app.run_name == _rank_name(ddp_recording, 1), "rank 1 opened")
        assert isinstance(app.screen, RanksPage)
        await wait_for(pilot, lambda: "rank1" in screen_text(app).splitlines()[-1], "status")
        await pilot.press("left_curly_bracket")
        await wait_for(pilot, lambda: app.run_name == _rank_name(ddp_recording, 0), "rank 0 again")


async def test_ranks_tab_is_absent_for_a_single_process_run(recorded_run):
    app = make_app(recorded_run)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.run_info, "the run")
        assert "ranks" not in [p.id for p in app.pages()]
