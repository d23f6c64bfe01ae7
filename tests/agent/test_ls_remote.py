"""`tvis ls HOST:PATH` and `tvis ls TARGET`: remote runs listed through the agent over the
real sshd lab."""

from __future__ import annotations

import json

import pytest

from tvis.cli import main as tvis_main


@pytest.fixture
def lab_env(ssh_lab, tmp_path, monkeypatch):
    """ssh through the lab's config; shared connections and saved targets kept in tmp_path."""
    monkeypatch.setenv("TVIS_SSH_COMMAND", f"ssh -F {ssh_lab.config}")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(ssh_lab.control_dir()))
    monkeypatch.setenv("TVIS_CONFIG_DIR", str(tmp_path / "config"))
    return ssh_lab


def test_ls_host_path_lists_the_remote_runs(lab_env, run, capsys):
    code = tvis_main(["ls", f"tvis-test:{run.root}", "--remote-tvis", lab_env.remote_tvis])
    out = capsys.readouterr().out
    assert code == 0
    header, row = out.splitlines()
    assert header.split()[:3] == ["run", "status", "steps"]
    assert row.split()[:4] == ["20260101-120000_train_ab12cd", "complete", "1", "2"]


def test_ls_json_names_where_each_remote_run_is(lab_env, run, capsys):
    argv = ["ls", f"tvis-test:{run.root}", "--json", "--remote-tvis", lab_env.remote_tvis]
    assert tvis_main(argv) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["run"] == run.name and row["script"] == "train.py"
    assert row["path"] == f"tvis-test:{run.root.resolve()}/{run.name}"


def test_ls_a_saved_target_goes_through_its_jump_host(lab_env, run, capsys):
    add = ["target", "add", "gpu", "--host", "tvis-test", "--via", "tvis-jump"]
    assert tvis_main([*add, "--path", str(run.root), "--remote-tvis", lab_env.remote_tvis]) == 0
    before = lab_env.jump.accepted()
    capsys.readouterr()
    assert tvis_main(["ls", "gpu"]) == 0
    assert "20260101-120000_train_ab12cd" in capsys.readouterr().out
    assert lab_env.jump.accepted() == before + 1


def test_ls_an_unreachable_host_is_one_sentence(lab_env, capsys):
    assert tvis_main(["ls", "tvis-closed:/runs"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("tvis: ") and "tvis-closed" in err


def test_ls_an_unknown_name_is_one_sentence(lab_env, capsys):
    assert tvis_main(["ls", "nowhere"]) == 2
    assert capsys.readouterr().err == (
        "tvis: nowhere is not a folder here, a saved target or HOST:PATH; "
        "see `tvis target list` for saved targets.\n"
    )
