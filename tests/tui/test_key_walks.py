"""Keys at random, at typing speed and with pauses, across every page: the viewer neither
crashes, nor meets an internal error, nor gets a fault from its agent, and still answers
afterwards. Issue 29's freeze and crash came from key sequences no test had typed; these
walks type the sequences nobody thought of. Seeded: a failure names the seed and the keys
that led to it, so it can be replayed."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from textual.binding import Binding
from viewer_support import classes_with_bindings, goto_page, make_app, wait_for

from tvis.agent import client
from tvis.agent.protocol import AGENT_FAULT, BAD_REQUEST, AgentError
from tvis.tui import export

KEYS_PER_WALK = 120
LEFT_OUT = {"q", "ctrl+q", "ctrl+c", "ctrl+p", "f1"}
"""Quitting, and Textual's own command palette and key panel (they take every key after
them until `escape`, and are not ours)."""
FAULTS = (AGENT_FAULT, BAD_REQUEST)
"""Replies that say the agent has a bug, or the viewer asked for nonsense; not a user's
mistake (a tensor with nothing to save, a view this model has not)."""


def walk_keys() -> list[str]:
    """Every key a viewer class binds, the page digits and the keys every widget answers;
    not those ``LEFT_OUT``."""
    keys = set("1234567") | {"escape", "enter", "tab", "shift+tab", "up", "down", "left"}
    for cls in classes_with_bindings():
        for binding in vars(cls).get("BINDINGS", ()):
            key = binding.key if isinstance(binding, Binding) else binding[0]
            keys.update(k.strip() for k in key.split(","))
    return sorted(keys - LEFT_OUT)


@pytest.mark.parametrize(("run", "seed"), [("run_dir", 1), ("lm_run", 2)])
async def test_random_keys_leave_the_viewer_answering_without_a_fault(
    run: str, seed: int, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch
):
    monkeypatch.setenv(export.EXPORT_DIR_ENV, str(tmp_path))  # `e` saves there
    root = request.getfixturevalue(run)
    rng = random.Random(seed)
    keys = walk_keys()
    app = make_app(root)
    faults: list[str] = []
    reply_of = client.result_of

    def noting_faults(reply):
        try:
            return reply_of(reply)
        except AgentError as e:
            if e.status in FAULTS:
                faults.append(f"{e.status} {e.message}")
            raise

    monkeypatch.setattr(client, "result_of", noting_faults)
    typed: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the first page")
        for _ in range(KEYS_PER_WALK):
            typed.append(rng.choice(keys))
            await pilot.press(typed[-1])
            pause = rng.random()
            if pause < 0.15:  # a rest: what was held or fetched ahead comes in
                await pilot.pause(rng.uniform(0.2, 1.0))
            elif pause < 0.6:  # typing speed; otherwise the next key at once
                await pilot.pause(rng.uniform(0.0, 0.08))
            assert (app.internal_errors, faults) == ([], []), (seed, typed)
        for key in ("escape", "escape", "escape"):  # out of a prompt, the help, a search
            await pilot.press(key)
        for page in app.pages():  # each page drawn as the walk left the app: no fault there
            await goto_page(pilot, page.id)
            await pilot.pause(0.3)
            await wait_for(pilot, lambda: not app.data.busy, f"{page.id} after {typed}")
        assert (app.internal_errors, faults) == ([], []), (seed, typed)
