"""The ssh command line that starts a remote agent, and what its failures mean in words.

The user's own ssh does the work: its config (aliases, ProxyJump, keys, agents) applies,
and prompts for passwords or 2FA go to the terminal as usual. tvis only adds ``-J`` for
``--via`` hops, connection sharing (ControlMaster) and keep-alives where the user's config
has not chosen its own, and the quoted remote command.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tvis.agent.target import Target

# Like GIT_SSH_COMMAND: the ssh program and options to use instead of plain `ssh`.
SSH_COMMAND_ENV = "TVIS_SSH_COMMAND"

# A shared connection outlives the viewer by this long, so reopening it asks for no 2FA.
CONTROL_PERSIST = "10m"
# Without keep-alives a silently dropped network leaves calls waiting forever; 3 × 15 s
# notices it within a minute.
KEEPALIVE = {"ServerAliveInterval": "15", "ServerAliveCountMax": "3"}
# Exit status of `tvis agent` when its root is not a folder (agent.command.NO_ROOT).
NO_ROOT = 3

_TILDE = re.compile(r"~[A-Za-z0-9._-]*")


def ssh_program() -> list[str]:
    """The ssh command to run: ``$TVIS_SSH_COMMAND`` split like a shell would, or ``ssh``."""
    return shlex.split(os.environ.get(SSH_COMMAND_ENV) or "ssh")


def remote_path(path: str) -> str:
    """``path`` quoted for the remote shell, a leading ``~`` or ``~user`` left to expand."""
    head, sep, rest = path.partition("/")
    if _TILDE.fullmatch(head):
        return head + sep + (shlex.quote(rest) if rest else "")
    return shlex.quote(path)


def remote_command(target: Target) -> str:
    """The command line the remote shell runs. ``--remote-tvis`` is used as written (it
    may be a command with arguments, like ``conda run -n train tvis``)."""
    tvis = target.remote_tvis or "tvis"
    return f"{tvis} agent --stdio --root {remote_path(target.path)}"


def effective_config(program: Sequence[str], host: str) -> dict[str, str]:
    """The user's ssh settings for ``host`` (``ssh -G``), lower-case keys; empty if unknown."""
    try:
        done = subprocess.run(
            [*program, "-G", "--", host],
            capture_output=True,
            text=True,
            timeout=15,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    config: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        config.setdefault(key.lower(), value.strip())
    return config


def control_dir() -> Path:
    """A folder only this user can enter, for ssh's connection-sharing sockets."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    path = Path(base) / f"tvis-ssh-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = path.lstat()
        if path.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise PermissionError
    except OSError:
        # Someone else owns or can read the shared name: use a fresh private folder instead.
        return Path(tempfile.mkdtemp(prefix="tvis-ssh-"))
    return path


def ssh_argv(
    target: Target, program: Sequence[str], config: dict[str, str], control: Path | None
) -> list[str]:
    """The full ssh command line for ``target``; ``config`` is the user's ``ssh -G`` view."""
    assert target.host is not None
    argv = [*program, "-T", "-e", "none"]
    if target.via:
        argv += ["-J", ",".join(target.via)]
    options: dict[str, str] = {}
    if control is not None and config.get("controlpath", "none") == "none":
        options.update(
            ControlMaster="auto", ControlPath=f"{control}/%C", ControlPersist=CONTROL_PERSIST
        )
    if config.get("serveraliveinterval", "0") == "0":
        options.update(KEEPALIVE)
    for key, value in options.items():
        argv += ["-o", f"{key}={value}"]
    # "--" ends ssh's options, so a host name can never be read as one.
    return [*argv, "--", target.host, remote_command(target)]


def _last_line(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return lines[-1].rstrip(".") if lines else ""


_UNREACHABLE = (
    "could not resolve",
    "connection refused",
    "timed out",
    "no route to host",
    "network is unreachable",
    "connection closed",
    "connection reset",
    "kex_exchange_identification",
)
_AUTH = ("permission denied", "too many authentication failures", "authentication failed")
_MISSING = ("command not found", "no such file or directory", "not found")


def explain_exit(target: Target, code: int | None, stderr: str) -> str:
    """One sentence for an ssh session that ended before the agent answered."""
    host, low, last = target.host, stderr.lower(), _last_line(stderr)
    detail = f" ({last})" if last else ""
    if code in (126, 127) or (code not in (255, None) and any(s in low for s in _MISSING)):
        return (
            f"tvis is not installed on {host} (or not on its PATH){detail}; "
            "try --remote-tvis ~/venv/bin/tvis."
        )
    if code == NO_ROOT:
        return f"{host} has no folder {target.path}; check the path."
    if "host key verification failed" in low:
        return f"the host key of {host} could not be verified; run `ssh {host}` once to accept it."
    if any(s in low for s in _AUTH):
        return f"authentication to {host} failed{detail}; check that `ssh {host}` works on its own."
    if any(s in low for s in _UNREACHABLE):
        return f"cannot reach {host}{detail}."
    if code == 255:
        return f"ssh to {host} failed{detail}."
    return f"the agent on {host} stopped (exit status {code}){detail}."
