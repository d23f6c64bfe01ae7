"""Real OpenSSH servers on 127.0.0.1 for tests and benchmarks: a target and a jump host.

``start_lab(folder)`` makes temporary host and user keys, starts two ``sshd`` processes on
free ports (the current user may log in with the user key), and writes an ssh client
config with these aliases:

- ``tvis-test``    the target server
- ``tvis-jump``    the jump host (a second server)
- ``tvis-behind``  the target again, reached through ``ProxyJump tvis-jump``
- ``tvis-nokey``   the target with a key it does not accept (authentication fails)
- ``tvis-closed``  a port nothing listens on (unreachable)

Use it as ``ssh -F lab.config`` (``lab.ssh_command``), or set ``TVIS_SSH_COMMAND`` from
``lab.env``. Pytest code gets it from the session fixture ``ssh_lab``; other test folders
import this module (see tests/agent/conftest.py) to share it.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
# sshd refuses to start without its privilege-separation folder (normally made at boot).
PRIVSEP_DIR = Path("/run/sshd")
START_TIMEOUT_S = 10.0


@dataclass
class SshServer:
    """One running sshd."""

    name: str
    port: int
    process: subprocess.Popen
    log: Path

    def accepted(self) -> int:
        """How many logins this server has accepted so far."""
        try:
            return self.log.read_text(errors="replace").count("Accepted publickey")
        except FileNotFoundError:
            return 0

    def sessions(self) -> list[int]:
        """Processes this server forked (its per-connection sshd and what they run)."""
        found, todo = [], [self.process.pid]
        while todo:
            pid = todo.pop()
            try:
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            except OSError:
                continue
            found += map(int, children)
            todo += map(int, children)
        return found

    def stop(self) -> None:
        # A listener's sessions outlive it: end them first, so no "sshd: user@notty" stays.
        for pid in self.sessions():
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class SshLab:
    """The servers, keys and client config of one test session."""

    folder: Path
    config: Path
    target: SshServer
    jump: SshServer
    remote_tvis: str
    control_dirs: list[Path] = field(default_factory=list)
    _runtime_dir: Path | None = None

    @property
    def ssh_command(self) -> list[str]:
        return ["ssh", "-F", str(self.config)]

    @property
    def env(self) -> dict[str, str]:
        """Environment for a subprocess (e.g. `tvis tui tvis-test:PATH`) to use this lab, with
        its shared-connection sockets in a folder of the lab's (closed with the lab)."""
        return {
            **os.environ,
            "TVIS_SSH_COMMAND": f"ssh -F {self.config}",
            "XDG_RUNTIME_DIR": str(self.runtime_dir),
        }

    @property
    def runtime_dir(self) -> Path:
        """``XDG_RUNTIME_DIR`` for subprocesses: tvis makes its ControlMaster folder inside."""
        if self._runtime_dir is None:
            self._runtime_dir = self.control_dir()
        return self._runtime_dir

    def control_dir(self) -> Path:
        """A fresh folder for connection-sharing sockets, short enough for a socket path."""
        path = Path(tempfile.mkdtemp(prefix="tvis-cm-"))
        self.control_dirs.append(path)
        return path

    def close(self) -> None:
        for path in self.control_dirs:
            for sock in (p for p in path.rglob("*") if p.is_socket()):
                # Ask each shared master to exit (ControlPersist would keep it for minutes).
                subprocess.run(
                    [*self.ssh_command, "-S", str(sock), "-O", "exit", "tvis-test"],
                    capture_output=True,
                    timeout=10,
                )
            shutil.rmtree(path, ignore_errors=True)
        self.target.stop()
        self.jump.stop()


def sshd_available() -> bool:
    return Path(SSHD).exists() and shutil.which("ssh") is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )


def _start_server(folder: Path, name: str, host_key: Path, authorized: Path) -> SshServer:
    root_login = "prohibit-password" if os.getuid() == 0 else "no"
    last_error = ""
    for _ in range(5):  # a free port can be taken between probing and binding
        port = _free_port()
        config = folder / f"sshd_{name}.conf"
        log = folder / f"sshd_{name}.log"
        config.write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
            f"AuthorizedKeysFile {authorized}\nPidFile {folder / f'sshd_{name}.pid'}\n"
            "UsePAM no\nStrictModes no\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
            f"KbdInteractiveAuthentication no\nPermitRootLogin {root_login}\n"
            "AllowTcpForwarding yes\nMaxSessions 100\nMaxStartups 100\n"
            "PrintMotd no\nPrintLastLog no\nLogLevel VERBOSE\n"
        )
        process = subprocess.Popen(
            [SSHD, "-D", "-f", str(config), "-E", str(log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        server = SshServer(name, port, process, log)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and process.poll() is None:
            if log.exists() and "Server listening" in log.read_text(errors="replace"):
                return server
            time.sleep(0.05)
        server.stop()
        last_error = (log.read_text(errors="replace") if log.exists() else "") + (
            process.stderr.read().decode(errors="replace") if process.stderr else ""
        )
    raise RuntimeError(f"sshd {name} did not start: {last_error.strip()}")


def start_lab(folder: Path) -> SshLab:
    """Start the target and jump servers under ``folder`` (which must exist)."""
    if not PRIVSEP_DIR.is_dir():
        try:
            PRIVSEP_DIR.mkdir(mode=0o755, parents=True)
        except OSError as e:
            raise RuntimeError(
                f"sshd needs {PRIVSEP_DIR} ({e.strerror}); create it: sudo mkdir -p {PRIVSEP_DIR}"
            ) from None
    host_key, user_key, other_key = folder / "host_key", folder / "user_key", folder / "other_key"
    for key in (host_key, user_key, other_key):
        _keygen(key)
    authorized = folder / "authorized_keys"
    shutil.copy(user_key.with_suffix(".pub"), authorized)
    target = _start_server(folder, "target", host_key, authorized)
    try:
        jump = _start_server(folder, "jump", host_key, authorized)
    except Exception:
        target.stop()
        raise
    config = folder / "ssh_config"
    hosts = {
        "tvis-test": (target.port, user_key, ""),
        "tvis-jump": (jump.port, user_key, ""),
        "tvis-behind": (target.port, user_key, "  ProxyJump tvis-jump\n"),
        "tvis-nokey": (target.port, other_key, ""),
        "tvis-closed": (_free_port(), user_key, ""),
    }
    blocks = [
        f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  IdentityFile {key}\n{extra}"
        for alias, (port, key, extra) in hosts.items()
    ]
    config.write_text(
        "\n".join(blocks) + f"\nHost *\n  User {getpass.getuser()}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {folder / 'known_hosts'}\n  StrictHostKeyChecking accept-new\n"
        "  BatchMode yes\n  LogLevel ERROR\n  GSSAPIAuthentication no\n  ConnectTimeout 10\n"
    )
    remote_tvis = str(Path(sys.executable).parent / "tvis")
    return SshLab(folder, config, target, jump, remote_tvis)


@pytest.fixture(scope="session")
def ssh_lab(tmp_path_factory: pytest.TempPathFactory):
    """A running target sshd and jump sshd on loopback, with their client config."""
    if not sshd_available():
        pytest.skip(
            f"OpenSSH server not installed ({SSHD} missing); apt-get install openssh-server"
        )
    lab = start_lab(tmp_path_factory.mktemp("ssh"))
    # A test that connects without naming a control folder (a saved target, `tvis.connect`)
    # gets tvis's default one, under XDG_RUNTIME_DIR: put it in the lab, which ends its
    # ControlMasters when it closes, instead of leaving them for ControlPersist's 10 minutes.
    saved = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(lab.runtime_dir)
    try:
        yield lab
    finally:
        if saved is None:
            os.environ.pop("XDG_RUNTIME_DIR", None)
        else:
            os.environ["XDG_RUNTIME_DIR"] = saved
        lab.close()
