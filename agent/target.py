"""Where runs live: a folder on this machine, or a folder on an ssh host (maybe via jumps)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """A runs folder to connect to. ``host`` is None for a local folder."""

    path: str
    host: str | None = None
    via: tuple[str, ...] = ()
    remote_tvis: str | None = None
    name: str | None = None

    @property
    def is_local(self) -> bool:
        return self.host is None

    def describe(self) -> str:
        """How the target reads in a status line: ``local ./runs`` or ``ssh gpu:~/runs``."""
        if self.is_local:
            return f"local {self.path}"
        hops = f" via {','.join(self.via)}" if self.via else ""
        return f"ssh {self.host}:{self.path}{hops}"
