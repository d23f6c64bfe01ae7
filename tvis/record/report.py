"""What `tvis run` says at the end, shared by the command and by the runner's hard stop."""

from __future__ import annotations

import socket
import sys
from typing import TYPE_CHECKING

from tvis.store.listing import human_bytes

if TYPE_CHECKING:
    from tvis.record.runner import Outcome


def report(outcome: Outcome) -> None:
    """What `tvis run` says at the end: what was recorded, where, how to view it."""
    err = sys.stderr
    print(
        f"\ntvis: recorded {outcome.steps} step(s), {outcome.batches} batch(es), "
        f"{human_bytes(outcome.bytes)} — {outcome.status}",
        file=err,
    )
    if outcome.contributors:
        largest = ", ".join(f"{name} {human_bytes(n)}" for name, n in outcome.contributors)
        print(f"tvis: largest parts: {largest}", file=err)
    for text in outcome.notices:
        print(f"tvis: note: {text}", file=err)
    path = outcome.run_dir
    print(f"tvis: run saved in {path}", file=err)
    print(f"tvis: view it here:        tvis tui {path}", file=err)
    print(f"tvis: or from your laptop: tvis tui {socket.gethostname()}:{path}", file=err)
