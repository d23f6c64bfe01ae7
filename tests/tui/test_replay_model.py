"""Where Replay's steps land (layer, call, phase, batch) and how a recording is paged,
on a hand-made outline of two batches."""

from __future__ import annotations

from tvis.agent.replies import ReplayAnswer, ReplayEvent
from tvis.tui.replay_model import PAGE, Place, Recording
from tvis.tui.widgets.layer_stack import log_fraction

PHASES = [("data", 2), ("forward", 3), ("loss", 1), ("backward", 3), ("optimizer", 1)]


def recording() -> Recording:
    """Two batches of 10 events each, every event named after its call."""
    events, outline, batches = [], [], []
    for batch in (0, 1):
        batches.append({"batch": batch, "start": len(events), "count": 10})
        for phase, count in PHASES:
            outline.append({"phase": phase, "batch": batch, "start": len(events), "count": count})
            for i in range(count):
                call = 100 + i if phase in ("forward", "backward") else None
                events.append({"seq": len(events), "phase": phase, "batch": batch, "call": call})
    reply = {"total": len(events), "outline": outline, "batches": batches, "events": events}
    return Recording.from_reply(ReplayAnswer.decode(reply))


def test_layer_steps_move_one_event_and_stop_at_the_ends():
    rec = recording()
    assert rec.step(4, "layer", 1) == 5 and rec.step(4, "layer", -1) == 3
    assert rec.step(0, "layer", -1) == 0 and rec.step(19, "call", 1) == 19


def test_phase_steps_land_on_run_starts():
    rec = recording()
    assert rec.step(0, "phase", 1) == 2  # data → forward
    assert rec.step(3, "phase", 1) == 5  # inside forward → the loss
    assert rec.step(3, "phase", -1) == 2  # inside a run: back to its start
    assert rec.step(2, "phase", -1) == 0  # at a start: the previous run
    assert rec.step(19, "phase", 1) == 19


def test_batch_steps_land_on_batch_starts():
    rec = recording()
    assert rec.step(3, "batch", 1) == 10
    assert rec.step(12, "batch", -1) == 10 and rec.step(10, "batch", -1) == 0


def test_find_keeps_the_same_call_in_another_event_list():
    rec = recording()
    assert rec.find(Place(1, "backward", 101)) == 17
    assert rec.find(Place(1, "loss", 7)) == 15  # no such call: its run
    assert rec.find(Place(5, "data")) == 0


def test_pages_not_fetched_are_asked_for_around_the_cursor():
    rec = Recording.from_reply(ReplayAnswer.decode({"total": PAGE * 3, "events": [{"seq": 0}]}))
    assert rec.event(0).seq == 0 and rec.event(PAGE) is None
    assert rec.missing_pages(0) == [1]
    assert rec.missing_pages(PAGE * 2 + 5) == [2]


def test_gradient_bars_are_placed_on_a_log_scale():
    assert log_fraction(1e-3, 1e-4, 1e-2) == 0.5
    assert log_fraction(None, 1e-4, 1e-2) == 0.0 and log_fraction(1.0, 1.0, 1.0) == 1.0


def test_the_speed_label_says_how_many_frames_a_second_were_drawn_when_fewer_than_asked():
    from tvis.tui.replay_model import Pace
    from tvis.tui.widgets.replay_bar import transport_text

    pace = Pace()
    for i in range(25):  # ten frames a second drawn, whatever the timer was asked for
        pace.drawn(i * 0.1)
    assert abs(pace.rate() - 10.0) < 1e-6
    rec = Recording(total=10)
    line = transport_text(rec, None, 0, True, "layer", 30, 200, drawn=pace.rate()).plain
    assert "10/s drawn of 30/s" in line
    kept_up = transport_text(rec, None, 0, True, "layer", 4, 200, drawn=4.0).plain
    assert "4/s (+/-)" in kept_up and "drawn" not in kept_up
    paused = transport_text(rec, None, 0, False, "layer", 30, 200, drawn=10.0).plain
    assert "30/s (+/-)" in paused
    pace.reset()
    assert pace.rate() is None


def test_a_data_event_says_its_batch_once():
    from tvis.tui.widgets.replay_bar import transport_text

    data = ReplayEvent.decode(
        {"seq": 0, "kind": "batch", "phase": "data", "batch": 1, "step": 1, "name": "batch 1"}
    )
    line = transport_text(Recording(total=10), data, 0, False, "layer", 4, 200).plain
    assert line.count("batch 1") == 1 and "batch 1 (step 1)" in line
    layer = ReplayEvent.decode(
        {"seq": 1, "kind": "layer", "phase": "forward", "batch": 1, "name": "features.0"}
    )
    assert (
        "· features.0"
        in transport_text(Recording(total=10), layer, 1, False, "layer", 4, 200).plain
    )
