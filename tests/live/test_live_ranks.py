"""Catches from the ranks of a distributed job: one server, each catch tagged with its rank,
and `tvis.get_all`/`tvis.get` and the Live page filtering by rank."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from live_support import python, wait_until
from test_live_page import PageApp, settle, title

import tvis

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))

RANKED_SENDER = """
    import os, torch, tvis
    rank = int(os.environ["RANK"])
    for step in range(4):
        tvis.catch(torch.tensor(float(step + 10 * rank)), name="loss")
"""


def test_get_all_filters_catches_by_rank_under_torchrun(session_server, tmp_path):
    script = tmp_path / "catching.py"
    script.write_text(textwrap.dedent(RANKED_SENDER))
    env = {**os.environ, "TVIS_SERVER": session_server.address, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [TORCHRUN, "--nproc-per-node", "2", "--master-port", "0", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert wait_until(lambda: len(session_server.store.entries("loss")) == 8)
    assert [float(v) for v in tvis.get_all("loss", rank=1)] == [10.0, 11.0, 12.0, 13.0]
    assert float(tvis.get("loss", rank=0)) == 3.0
    assert float(tvis.get("loss", index=0, rank=1)) == 10.0
    assert len(tvis.get_all("loss")) == 8
    with pytest.raises(KeyError, match="from rank 5; it came from ranks 0, 1"):
        tvis.get_all("loss", rank=5)


async def test_live_page_filters_catches_by_rank():
    app = PageApp("127.0.0.1:0")
    async with app.run_test(size=(110, 40)) as pilot:
        page = app.screen
        senders = [
            python(RANKED_SENDER, env={"TVIS_SERVER": page.server.address, "RANK": str(rank)})
            for rank in (0, 1)
        ]
        for sender in senders:
            await asyncio.to_thread(sender.wait, 120)
            assert sender.returncode == 0, sender.stderr.read()
        assert await settle(pilot, lambda: page.view and page.view.rows[0].cells[5] == "8")
        assert "every rank (f)" in page.view.status
        await pilot.press("f")
        assert await settle(pilot, lambda: "rank 0 only" in page.view.status)
        assert await settle(pilot, lambda: page.view.rows[0].cells[2] == "3")
        assert "rank 0 ·" in title(page) and "4 kept" in title(page)
        await pilot.press("f")
        assert await settle(pilot, lambda: page.view.rows[0].cells[2] == "13")
        assert "rank 1 ·" in title(page)
        await pilot.press("f")
        assert await settle(pilot, lambda: "every rank (f)" in page.view.status)
        assert await settle(pilot, lambda: "8 kept" in title(page))
