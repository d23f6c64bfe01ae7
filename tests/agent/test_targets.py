"""`tvis target add|list|remove` and turning what the user typed into a target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tvis.agent.target import Target
from tvis.cli import main as tvis_main
from tvis.targets import TargetError, config_dir, resolve


@pytest.fixture(autouse=True)
def config(tmp_path, monkeypatch):
    folder = tmp_path / "config"
    monkeypatch.setenv("TVIS_CONFIG_DIR", str(folder))
    return folder


def add(*argv: str) -> int:
    return tvis_main(["target", "add", *argv])


def test_add_then_list_shows_the_target(capsys):
    assert add("gpu", "--host", "c42", "--via", "bastion,login", "--path", "~/proj/tvis_runs") == 0
    capsys.readouterr()
    assert tvis_main(["target", "list"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.split() == ["gpu", "c42", "bastion,login", "~/proj/tvis_runs", "tvis"]


def test_via_may_repeat_and_remote_tvis_is_kept(config):
    add(
        "gpu",
        "--host",
        "c42",
        "--via",
        "a",
        "--via",
        "b,c",
        "--path",
        "/r",
        "--remote-tvis",
        "~/v/bin/tvis",
    )
    saved = json.loads((config / "targets.json").read_text())["targets"]["gpu"]
    assert saved == {
        "host": "c42",
        "path": "/r",
        "via": ["a", "b", "c"],
        "remote_tvis": "~/v/bin/tvis",
    }


def test_a_path_the_local_shell_expanded_is_stored_with_a_tilde(config):
    home = str(Path.home())
    add("gpu", "--host", "c42", "--path", f"{home}/runs", "--remote-tvis", f"{home}/v/bin/tvis")
    saved = json.loads((config / "targets.json").read_text())["targets"]["gpu"]
    assert (saved["path"], saved["remote_tvis"]) == ("~/runs", "~/v/bin/tvis")


def test_remove_forgets_the_target(capsys):
    add("gpu", "--host", "c42", "--path", "/r")
    assert tvis_main(["target", "remove", "gpu"]) == 0
    capsys.readouterr()
    tvis_main(["target", "list"])
    assert "no saved targets" in capsys.readouterr().out


def test_removing_an_unknown_target_is_one_sentence(capsys):
    assert tvis_main(["target", "remove", "nope"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "tvis: there is no saved target 'nope'; see `tvis target list`."
    )


@pytest.mark.parametrize(
    "content", ["{not json", '{"targets": [1, 2]}', '{"targets": {"x": {"host": 1}}}', "\xff\xfe"]
)
@pytest.mark.parametrize(
    "action", [["list"], ["remove", "x"], ["add", "y", "--host", "h", "--path", "p"]]
)
def test_a_corrupt_targets_file_is_one_sentence_and_left_untouched(config, capsys, content, action):
    config.mkdir()
    path = config / "targets.json"
    path.write_bytes(content.encode("latin-1"))
    assert tvis_main(["target", *action]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and str(path) in err
    assert path.read_bytes() == content.encode("latin-1")


def test_a_bad_target_name_is_refused(capsys):
    assert add("gpu:1", "--host", "h", "--path", "p") == 2
    assert "cannot be a target name" in capsys.readouterr().err


def test_the_config_dir_defaults_under_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("TVIS_CONFIG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert config_dir() == tmp_path / "tvis"


def test_an_existing_local_folder_resolves_to_local(tmp_path):
    assert resolve(str(tmp_path)) == Target(path=str(tmp_path))


def test_a_saved_name_resolves_to_its_target_and_flags_override_it():
    add("gpu", "--host", "c42", "--via", "bastion", "--path", "~/runs", "--remote-tvis", "~/v/tvis")
    assert resolve("gpu") == Target(
        path="~/runs", host="c42", via=("bastion",), remote_tvis="~/v/tvis", name="gpu"
    )
    assert resolve("gpu", via=["other"], remote_tvis="t").via == ("other",)
    assert resolve("gpu", via=["other"], remote_tvis="t").remote_tvis == "t"


@pytest.mark.parametrize(
    ("spec", "host", "path"),
    [
        ("gpu-login:~/proj/tvis_runs", "gpu-login", "~/proj/tvis_runs"),
        ("me@c42:/scratch/me/tvis_runs", "me@c42", "/scratch/me/tvis_runs"),
        ("[::1]:/runs", "::1", "/runs"),
        ("c42:", "c42", "~"),
    ],
)
def test_host_path_resolves_to_ssh(spec, host, path):
    target = resolve(spec, via=["bastion,login"])
    assert (target.host, target.path, target.via) == (host, path, ("bastion", "login"))


def test_something_that_is_none_of_them_is_one_sentence():
    with pytest.raises(TargetError, match="not a folder here, a saved target or HOST:PATH"):
        resolve("no-such-thing")


def test_via_with_a_local_folder_is_refused(tmp_path):
    with pytest.raises(TargetError, match="--via"):
        resolve(str(tmp_path), via=["bastion"])


def test_host_path_works_even_when_the_targets_file_is_corrupt(config):
    config.mkdir()
    (config / "targets.json").write_text("{broken")
    assert resolve("c42:/runs").host == "c42"
    with pytest.raises(TargetError, match="not valid JSON"):
        resolve("gpu")
