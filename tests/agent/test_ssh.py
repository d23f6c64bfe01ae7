"""The ssh client: command building, and real sessions against the loopback sshd lab."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tvis.agent import ssh
from tvis.agent.client import ConnectionLost, LocalClient, SshClient, connect
from tvis.agent.protocol import AgentError
from tvis.agent.target import Target
from tvis.cli import main as tvis_main
from tvis.targets import resolve

# -- the command line (no server needed) -----------------------------------------------------


@pytest.mark.parametrize(
    ("path", "quoted"),
    [
        ("~/proj/tvis_runs", "~/proj/tvis_runs"),
        ("~/my runs/it's", "~/'my runs/it'\"'\"'s'"),
        ("~", "~"),
        ("~alice/runs", "~alice/runs"),
        ("/scratch/me/run s", "'/scratch/me/run s'"),
        ("~/$(touch pwned)", "~/'$(touch pwned)'"),
        ("~$(x)/y", "'~$(x)/y'"),
    ],
)
def test_remote_path_is_quoted_and_a_leading_tilde_still_expands(path, quoted):
    assert ssh.remote_path(path) == quoted


def test_argv_has_jump_hosts_sharing_keepalive_and_ends_options_before_the_host():
    target = Target(
        path="~/runs", host="c42", via=("bastion", "login"), remote_tvis="~/venv/bin/tvis"
    )
    argv = ssh.ssh_argv(target, ["ssh"], {}, Path("/run/tvis"))
    assert argv[:4] == ["ssh", "-T", "-e", "none"]
    assert argv[argv.index("-J") + 1] == "bastion,login"
    assert "ControlPath=/run/tvis/%C" in argv and "ControlMaster=auto" in argv
    assert "ControlPersist=10m" in argv and "ServerAliveInterval=15" in argv
    assert argv[-3:] == ["--", "c42", "~/venv/bin/tvis agent --stdio --root ~/runs"]


def test_argv_leaves_sharing_and_keepalive_to_a_config_that_sets_them():
    target = Target(path="/r", host="c42")
    config = {"controlpath": "/home/me/.ssh/cm-%C", "serveraliveinterval": "30"}
    argv = ssh.ssh_argv(target, ["ssh"], config, Path("/run/tvis"))
    assert not [a for a in argv if a.startswith(("ControlPath", "ControlMaster", "ServerAlive"))]


def test_control_dir_is_private(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    path = ssh.control_dir()
    assert path.parent == tmp_path and stat.S_IMODE(path.stat().st_mode) == 0o700


def test_control_dir_avoids_a_folder_others_can_read(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    shared = tmp_path / f"tvis-ssh-{os.getuid()}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    private = ssh.control_dir()
    assert private != shared and stat.S_IMODE(private.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    ("code", "stderr", "words"),
    [
        (127, "bash: line 1: tvis: command not found", "try --remote-tvis"),
        (
            255,
            "ssh: Could not resolve hostname nope: Name or service not known",
            "cannot reach nope",
        ),
        (255, "root@1.2.3.4: Permission denied (publickey).", "authentication to nope failed"),
        (255, "Host key verification failed.", "host key of nope"),
        (3, "tvis agent: /x is not a folder on c42.", "nope has no folder /x"),
        (2, "tvis: argument COMMAND: invalid choice: 'agent'", "exit status 2"),
    ],
)
def test_failures_are_one_sentence(code, stderr, words):
    message = ssh.explain_exit(Target(path="/x", host="nope"), code, stderr)
    assert words in message and message.endswith(".") and "\n" not in message


# -- real sessions ---------------------------------------------------------------------------


def remote(lab, runs_root: Path, host: str = "tvis-test", **kw) -> Target:
    return Target(path=str(runs_root), host=host, remote_tvis=lab.remote_tvis, **kw)


def open_client(lab, target: Target, control: Path | None = None):
    return connect(target, ssh_command=lab.ssh_command, control_dir=control or lab.control_dir())


def test_runs_are_reached_directly(ssh_lab, runs_root, run):
    with open_client(ssh_lab, remote(ssh_lab, runs_root)) as client:
        assert [r["run"] for r in client.call("runs")] == [run.name]
        assert client.describe() == f"ssh tvis-test:{runs_root}"


def test_views_over_ssh_equal_local_views(ssh_lab, runs_root, run):
    params = dict(run=run.name, batch=0, tensor=run.conv, sample=1, index=[3], width=8, height=8)
    with open_client(ssh_lab, remote(ssh_lab, runs_root)) as client:
        far = client.call("view", **params)
    near = LocalClient(runs_root).call("view", **params)
    np.testing.assert_array_equal(far["array"], near["array"])
    assert {k: v for k, v in far.items() if k != "array"} == {
        k: v for k, v in near.items() if k != "array"
    }


def test_runs_are_reached_through_via(ssh_lab, runs_root):
    before = ssh_lab.jump.accepted()
    with open_client(ssh_lab, remote(ssh_lab, runs_root, via=("tvis-jump",))) as client:
        assert client.call("runs")
    assert ssh_lab.jump.accepted() == before + 1


def test_runs_are_reached_through_proxyjump_in_the_ssh_config(ssh_lab, runs_root):
    before = ssh_lab.jump.accepted()
    with open_client(ssh_lab, remote(ssh_lab, runs_root, host="tvis-behind")) as client:
        assert client.call("runs")
    assert ssh_lab.jump.accepted() == before + 1


def test_runs_are_reached_through_a_saved_target(ssh_lab, runs_root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TVIS_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TVIS_SSH_COMMAND", f"ssh -F {ssh_lab.config}")
    argv = ["target", "add", "gpu", "--host", "tvis-test", "--via", "tvis-jump"]
    assert tvis_main([*argv, "--path", str(runs_root), "--remote-tvis", ssh_lab.remote_tvis]) == 0
    target = resolve("gpu")
    assert (target.host, target.via, target.name) == ("tvis-test", ("tvis-jump",), "gpu")
    with connect(target, control_dir=ssh_lab.control_dir()) as client:
        assert client.call("runs")


def test_a_home_relative_path_with_spaces_reaches_the_runs(ssh_lab, runs_root):
    relative = os.path.relpath(runs_root, Path.home())
    target = Target(path=f"~/{relative}", host="tvis-test", remote_tvis=ssh_lab.remote_tvis)
    assert " " in relative
    with open_client(ssh_lab, target) as client:
        assert client.info["root"] == str(runs_root.resolve())


def test_the_ssh_connection_is_shared(ssh_lab, runs_root):
    control = ssh_lab.control_dir()
    first = open_client(ssh_lab, remote(ssh_lab, runs_root), control)
    (socket_path,) = control.iterdir()
    assert stat.S_ISSOCK(socket_path.stat().st_mode)
    logins = ssh_lab.target.accepted()
    with open_client(ssh_lab, remote(ssh_lab, runs_root), control) as second:
        assert second.call("runs")
    first.close()
    assert ssh_lab.target.accepted() == logins
    check = subprocess.run(
        [*ssh_lab.ssh_command, "-S", str(socket_path), "-O", "check", "tvis-test"],
        capture_output=True,
    )
    assert check.returncode == 0


def test_a_control_path_from_the_users_config_is_left_alone(ssh_lab, runs_root, tmp_path_factory):
    own = Path(os.path.realpath(ssh_lab.control_dir()))
    command = [*ssh_lab.ssh_command, "-o", f"ControlPath={own}/mine-%C", "-o", "ControlMaster=auto"]
    ours = ssh_lab.control_dir()
    client = SshClient(remote(ssh_lab, runs_root), ssh_command=command, control_dir=ours)
    try:
        client.handshake()
        assert client.control_dir is None and not list(ours.iterdir())
    finally:
        client.close()
    subprocess.run([*command, "-O", "exit", "tvis-test"], capture_output=True)


@pytest.mark.parametrize("remote_tvis", ["/nonexistent/bin/tvis", "tvis-not-installed-here"])
def test_a_missing_remote_tvis_is_one_sentence(ssh_lab, runs_root, remote_tvis):
    target = Target(path=str(runs_root), host="tvis-test", remote_tvis=remote_tvis)
    with pytest.raises(ConnectionLost) as e:
        open_client(ssh_lab, target)
    assert "tvis is not installed on tvis-test" in e.value.message
    assert "try --remote-tvis ~/venv/bin/tvis." in e.value.message


def test_an_unreachable_host_is_one_sentence(ssh_lab, runs_root):
    with pytest.raises(ConnectionLost) as e:
        open_client(ssh_lab, remote(ssh_lab, runs_root, host="tvis-closed"))
    assert e.value.message.startswith("cannot reach tvis-closed")


def test_a_refused_key_is_one_sentence(ssh_lab, runs_root):
    with pytest.raises(ConnectionLost) as e:
        open_client(ssh_lab, remote(ssh_lab, runs_root, host="tvis-nokey"))
    assert e.value.message.startswith("authentication to tvis-nokey failed")


def test_a_missing_remote_folder_is_one_sentence(ssh_lab, tmp_path):
    with pytest.raises(ConnectionLost) as e:
        open_client(ssh_lab, remote(ssh_lab, tmp_path / "no such folder"))
    assert (
        e.value.message == f"tvis-test has no folder {tmp_path / 'no such folder'}; check the path."
    )


def test_a_remote_folder_without_runs_is_one_sentence(ssh_lab, tmp_path):
    with pytest.raises(AgentError) as e:
        open_client(ssh_lab, remote(ssh_lab, tmp_path))
    assert e.value.message.startswith(f"no tvis runs under tvis-test:{tmp_path}")


def test_a_dropped_connection_is_connection_lost_with_a_sentence(ssh_lab, runs_root):
    with open_client(ssh_lab, remote(ssh_lab, runs_root)) as client:
        os.kill(client.info["pid"], signal.SIGKILL)
        with pytest.raises(ConnectionLost) as e:
            client.call("runs")
        assert e.value.message.startswith("the connection to tvis-test dropped")
        with pytest.raises(ConnectionLost):
            client.call("runs")


def test_a_master_connection_killed_mid_session_is_connection_lost(ssh_lab, runs_root):
    control = ssh_lab.control_dir()
    with open_client(ssh_lab, remote(ssh_lab, runs_root), control) as client:
        (socket_path,) = control.iterdir()
        subprocess.run(
            [*ssh_lab.ssh_command, "-S", str(socket_path), "-O", "exit", "tvis-test"],
            capture_output=True,
            timeout=10,
        )
        with pytest.raises(ConnectionLost) as e:
            client.call("runs")
        assert "dropped" in e.value.message


def test_twenty_threads_over_ssh_get_their_own_replies(ssh_lab, runs_root, run):
    local = LocalClient(runs_root)
    with open_client(ssh_lab, remote(ssh_lab, runs_root)) as client:

        def ask(i: int):
            params = dict(run=run.name, batch=i % 2, tensor=run.conv, sample=i % 4, index=[i % 8])
            return params, client.call("view", **params)

        with ThreadPoolExecutor(20) as pool:
            results = list(pool.map(ask, range(20)))
    for params, view in results:
        np.testing.assert_array_equal(view["array"], local.call("view", **params)["array"])
