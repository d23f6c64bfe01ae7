"""What `tvis run` says at the end, shared by the command and by the runner's hard stop."""

from __future__ import annotations

import socket
import sys
from typing import TYPE_CHECKING

from tvis.store.printable import human_bytes

if TYPE_CHECKING:
    from tvis.record.ranks import RankInfo
    from tvis.record.runner import Outcome


def report(outcome: Outcome, rank: RankInfo | None = None) -> None:
    """What `tvis run` says at the end: what was recorded, where, how to view it. Under a
    launcher every rank but 0 says one line, so N ranks do not print N reports."""
    err = sys.stderr
    if rank is not None and rank.rank != 0:
        print(
            f"tvis: rank {rank.rank} recorded {outcome.steps} step(s), "
            f"{human_bytes(outcome.bytes)} — {outcome.status} ({outcome.run_dir})",
            file=err,
        )
        return
    print(
        f"\ntvis: recorded {outcome.steps} step(s), {outcome.batches} batch(es), "
        f"{human_bytes(outcome.bytes)} — {outcome.status}",
        file=err,
    )
    if outcome.contributors:
        largest = ", ".join(f"{name} {human_bytes(n)}" for name, n in outcome.contributors)
        print(f"tvis: largest parts: {largest}", file=err)
    for text in outcome.notices:
        print(f"tvis: {'' if text.startswith('disk full') else 'note: '}{text}", file=err)
    for text in outcome.anomalies:
        print(f"tvis: anomaly: {text}", file=err)
    path = outcome.run_dir.parent if rank is not None else outcome.run_dir
    if rank is not None:
        print(f"tvis: {rank.world_size} ranks, each in its own rank<N>/ folder", file=err)
    print(f"tvis: run saved in {path}", file=err)
    print(f"tvis: view it here:        tvis tui {path}", file=err)
    print(f"tvis: or from your laptop: tvis tui {socket.gethostname()}:{path}", file=err)
