"""Ranks of one launch agree where to stop, so none is left waiting in a collective.

A rank that has its N steps does not stop on its own: a rank that steps at another
cadence (accumulating gradients over more batches) would go on to its next backward and
wait there for a peer that is gone. Instead, at each optimizer step past N, a rank says
"ready after training batch b" and waits until every peer has either said the same (all
stop now, after the same number of batches, so after the same collectives) or begun
training batch b + 1 (this rank carries on, and asks again at its next step). Ranks
train in lockstep (each backward's all-reduce waits for all), so the answer comes within
a batch; a peer that ended, or that says nothing for ``PATIENCE`` seconds, does not hold
the others.

Ranks talk through one small file each in their own run folder (``stop.json``), never
through torch.distributed: tvis adds no collective to the script's own.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tvis.store import atomic
from tvis.store.format import STOP_SYNC, rank_folder

PATIENCE = 120.0
"""Seconds a ready rank waits for a peer that says nothing (killed, or busy outside
training): longer than any batch of a lockstep peer, short beside a job's time limit."""

POLL = 0.002
"""Seconds between reads of the peers' files: a peer in lockstep answers within
milliseconds, and a read of a small file costs microseconds."""


class StopAgreement:
    """This rank's side of the agreement on where all ranks stop."""

    def __init__(self, run_dir: Path, rank: int, world_size: int) -> None:
        self.own = run_dir / STOP_SYNC
        self.peers = [
            run_dir.parent / rank_folder(r) / STOP_SYNC for r in range(world_size) if r != rank
        ]

    def began(self, batch: int) -> None:
        """This rank begins its training batch ``batch`` (1-based): not ready before it."""
        self._say({"batch": batch, "ready": None})

    def ended(self) -> None:
        """This rank's script is over (stopped, finished or failed): nobody waits for it."""
        self._say({"ended": True})

    def agree(self, batch: int) -> bool:
        """Whether every rank stops after training batch ``batch`` (this rank has its
        steps): True when all are ready there, False when a peer went on."""
        self._say({"batch": batch, "ready": batch})
        deadline = time.monotonic() + PATIENCE
        while True:
            answers = [_read(peer) for peer in self.peers]
            if any(a.get("batch", 0) > batch and not a.get("ended") for a in answers):
                return False
            if all(a.get("ended") or a.get("ready") == batch for a in answers):
                return True
            if time.monotonic() > deadline:
                return True
            time.sleep(POLL)

    def _say(self, state: dict) -> None:
        try:
            atomic.write_json(self.own, state)
        except OSError:
            pass  # a peer that cannot read us waits PATIENCE, then stops on its own


def _read(path: Path) -> dict:
    try:
        found = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}  # not written yet (or being replaced): no answer so far
    return found if isinstance(found, dict) else {}
