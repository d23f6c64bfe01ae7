"""The `tvis` command line: a thin dispatcher over one module per sub-command.

Each sub-command module exposes ``configure(parser)`` and ``main(args) -> int`` and is
imported only when its command runs, so `tvis --help`, `tvis tui` and `tvis agent` never
import torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from tvis import __version__

COMMANDS = {
    "run": ("tvis.record.command", "record the first optimizer steps of a training script"),
    "ls": ("tvis.listing", "list the runs under a directory"),
    "tui": ("tvis.tui.command", "view runs in the terminal (local, ssh target, or --live)"),
    "open": ("tvis.tui.command", "open the viewer (same as tvis tui)"),
    "agent": ("tvis.agent.command", "serve runs over stdin/stdout (what ssh starts remotely)"),
    "target": ("tvis.targets", "save, list and remove named ssh targets"),
}


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one sentence and exit 2 without the usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"tvis: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(2)


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = _Parser(prog="tvis", description="A step-through debugger for PyTorch training.")
    parser.add_argument("--version", action="version", version=f"tvis {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        # Only the chosen command's module is imported (and only it adds its flags).
        if name == wanted:
            importlib.import_module(module).configure(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    wanted = next((a for a in argv if not a.startswith("-")), None)
    prepare = (
        getattr(importlib.import_module(COMMANDS[wanted][0]), "prepare_argv", None)
        if wanted in COMMANDS
        else None
    )
    if prepare is not None:
        argv = prepare(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        return int(module.main(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
