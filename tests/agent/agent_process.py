"""A real `tvis agent --stdio` subprocess, driven frame by frame."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tvis.agent.protocol import MAX_REPLY_FRAME, decode, encode, frame, read_frame


class AgentProcess:
    """`python -m tvis.cli agent --stdio --root ROOT` with helpers to send and read frames."""

    def __init__(self, root: Path, prelude: str | None = None) -> None:
        # ``prelude``: Python run before the CLI in the same process (e.g. an import blocker).
        code = f"{prelude or ''}\nimport sys\nfrom tvis.cli import main\nsys.exit(main())"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, "agent", "--stdio", "--root", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._next = 0

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, method: str, **params: Any) -> int:
        self._next += 1
        self.send_raw(frame(encode({"id": self._next, "method": method, "params": params})))
        return self._next

    def reply(self) -> dict:
        body = read_frame(self.proc.stdout, MAX_REPLY_FRAME)
        assert body is not None, "the agent closed its output"
        return decode(body)

    def ask(self, method: str, **params: Any) -> dict:
        rid = self.send(method, **params)
        reply = self.reply()
        assert reply["id"] == rid
        return reply

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS line")

    def finish(self, timeout: float = 30) -> tuple[int, bytes, str]:
        """Close stdin and wait: the exit status, what was left on stdout, and stderr."""
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err.decode(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()
