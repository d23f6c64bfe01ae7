"""`tvis target add|list|remove`: named ssh targets, and turning what the user typed into
a ``Target``.

Targets live in ``targets.json`` in the config folder (``$TVIS_CONFIG_DIR``, else
``$XDG_CONFIG_HOME/tvis``, else ``~/.config/tvis``). A damaged file is reported in one
sentence and never overwritten.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tvis.agent.target import Target
from tvis.store import atomic

FILE = "targets.json"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class TargetError(Exception):
    """A target that cannot be saved, found or understood; the message says why."""


def config_dir() -> Path:
    if os.environ.get("TVIS_CONFIG_DIR"):
        return Path(os.environ["TVIS_CONFIG_DIR"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or "~/.config"
    return Path(base).expanduser() / "tvis"


def _file() -> Path:
    return config_dir() / FILE


def load() -> dict[str, Target]:
    """The saved targets by name (none when the file does not exist yet)."""
    path = _file()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise TargetError(f"cannot read the saved targets in {path} ({e}).") from None
    except json.JSONDecodeError as e:
        raise TargetError(
            f"the saved targets file {path} is not valid JSON (line {e.lineno}); fix or delete it."
        ) from None
    try:
        return {name: _from_json(name, entry) for name, entry in data["targets"].items()}
    except (KeyError, TypeError, AttributeError, ValueError):
        raise TargetError(
            f"the saved targets file {path} is not in the format tvis writes; fix or delete it."
        ) from None


def _from_json(name: str, entry: dict[str, Any]) -> Target:
    via = entry.get("via") or []
    remote = entry.get("remote_tvis")
    if not isinstance(entry["host"], str) or not isinstance(entry["path"], str):
        raise ValueError
    if not all(isinstance(v, str) for v in via) or not isinstance(remote, (str, type(None))):
        raise ValueError
    return Target(
        path=entry["path"], host=entry["host"], via=tuple(via), remote_tvis=remote, name=name
    )


def save(targets: dict[str, Target]) -> Path:
    path = _file()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "version": 1,
        "targets": {
            name: {
                "host": t.host,
                "path": t.path,
                "via": list(t.via),
                "remote_tvis": t.remote_tvis,
            }
            for name, t in sorted(targets.items())
        },
    }
    atomic.write_bytes(path, (json.dumps(data, indent=2) + "\n").encode())
    return path


def split_via(values: Sequence[str]) -> tuple[str, ...]:
    """Jump hosts from repeated and comma-separated ``--via`` values, in order."""
    return tuple(h.strip() for v in values for h in v.split(",") if h.strip())


def _split_host_path(spec: str) -> tuple[str, str] | None:
    if spec.startswith("["):  # [ipv6]:path
        host, sep, rest = spec[1:].partition("]:")
        return (host, rest or "~") if sep and host else None
    host, sep, path = spec.partition(":")
    if not sep or not host or "/" in host:
        return None
    return host, path or "~"


def resolve(spec: str, via: Sequence[str] = (), remote_tvis: str | None = None) -> Target:
    """The target ``spec`` names: an existing local folder, else a saved target, else
    ``HOST:PATH``. ``via`` and ``remote_tvis`` given here win over a saved target's."""
    hops = split_via(via)
    local = Path(spec).expanduser()
    if local.exists():
        if hops:
            raise TargetError(
                f"{spec} is a folder on this machine, so --via has nothing to jump to; "
                "use HOST:PATH for a remote folder."
            )
        return Target(path=str(local))
    # A saved name never holds ':' or '/', so HOST:PATH works even with a damaged file.
    saved = load().get(spec) if _NAME.fullmatch(spec) else None
    if saved is not None:
        return Target(
            path=saved.path,
            host=saved.host,
            via=hops or saved.via,
            remote_tvis=remote_tvis or saved.remote_tvis,
            name=saved.name,
        )
    split = _split_host_path(spec)
    if split is None:
        raise TargetError(
            f"{spec} is not a folder here, a saved target or HOST:PATH; "
            "see `tvis target list` for saved targets."
        )
    host, path = split
    return Target(path=path, host=host, via=hops, remote_tvis=remote_tvis)


# -- the `tvis target` command -------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    add = sub.add_parser("add", help="save a target under a name")
    add.add_argument("name", help="the name to use with `tvis tui NAME`")
    add.add_argument("--host", required=True, help="ssh host or ~/.ssh/config alias")
    add.add_argument("--path", required=True, help="the runs folder on that host (~ allowed)")
    add.add_argument(
        "--via",
        action="append",
        default=[],
        help="jump host(s), in order; comma-separated or repeated",
    )
    add.add_argument("--remote-tvis", help="the tvis command on the host, if not on its PATH")
    sub.add_parser("list", help="show the saved targets")
    remove = sub.add_parser("remove", help="forget a saved target")
    remove.add_argument("name")


def main(args: argparse.Namespace) -> int:
    try:
        if args.action == "add":
            return _add(args)
        if args.action == "list":
            return _list()
        if args.action == "remove":
            return _remove(args.name)
    except TargetError as e:
        print(f"tvis: {e}", file=sys.stderr)
        return 2
    print("tvis: say what to do with targets: add, list or remove.", file=sys.stderr)
    return 2


def _add(args: argparse.Namespace) -> int:
    if not _NAME.fullmatch(args.name):
        raise TargetError(
            f"{args.name!r} cannot be a target name; use letters, digits, '.', '_' and '-'."
        )
    if args.host.startswith("-"):
        raise TargetError(f"{args.host!r} is not a host name.")
    targets = load()
    replaced = args.name in targets
    targets[args.name] = Target(
        path=_remote_home(args.path),
        host=args.host,
        via=split_via(args.via),
        remote_tvis=_remote_home(args.remote_tvis) if args.remote_tvis else None,
        name=args.name,
    )
    path = save(targets)
    verb = "replaced" if replaced else "saved"
    print(f"{verb} target {args.name} ({targets[args.name].describe()}) in {path}")
    return 0


def _remote_home(value: str) -> str:
    """``value`` with this machine's home folder turned back into ``~``: an unquoted
    ``--path ~/runs`` reaches tvis already expanded by the local shell, but on the remote
    host ``~`` is a different folder."""
    home = str(Path.home()).rstrip("/")
    if home and (value == home or value.startswith(home + "/")):
        return "~" + value[len(home) :]
    return value


def _list() -> int:
    targets = load()
    if not targets:
        print("no saved targets; add one with `tvis target add NAME --host H --path P`")
        return 0
    print(f"{'name':16} {'host':24} {'via':24} {'path':32} remote tvis")
    for name, t in sorted(targets.items()):
        via = ",".join(t.via) or "-"
        print(f"{name:16} {t.host or '':24} {via:24} {t.path:32} {t.remote_tvis or 'tvis'}")
    return 0


def _remove(name: str) -> int:
    targets = load()
    if name not in targets:
        raise TargetError(f"there is no saved target {name!r}; see `tvis target list`.")
    del targets[name]
    save(targets)
    print(f"removed target {name}")
    return 0


def add_ssh_options(parser) -> None:
    """The options that reach a remote target (``tvis tui``, ``tvis ls``): jump hosts and
    the remote tvis command."""
    parser.add_argument(
        "--via",
        action="append",
        default=[],
        metavar="HOST",
        help="jump host(s) in order; repeat or comma-separate",
    )
    parser.add_argument(
        "--remote-tvis",
        metavar="CMD",
        help="the tvis command on the remote host when it is not on its PATH",
    )
