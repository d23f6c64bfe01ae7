"""`tvis tui` (and `tvis open`): view runs in the terminal, locally or over ssh.

    tvis tui ./tvis_runs                      runs on this machine
    tvis tui gpu-login:~/proj/tvis_runs       over ssh, through `tvis agent --stdio`
    tvis tui --via bastion c42:/scratch/runs  explicit jump hosts
    tvis tui gpu                              a saved target (`tvis target add`)
    tvis tui --live [HOST:PORT]               the Live page, with or without recordings

A local folder is opened inside the app (it shows "connecting to …"). An ssh target is
connected before the app takes the terminal, so password and 2FA prompts reach the user.
Every failure is one sentence on stderr and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from tvis.targets import add_ssh_options
from tvis.tui import images

if TYPE_CHECKING:
    from pathlib import Path

    from tvis.agent.client import Client
    from tvis.agent.protocol import AgentError
    from tvis.agent.target import Target
    from tvis.tui.opening import FirstAnswers, Opening

DEFAULT_TARGET = "tvis_runs"

FRAME_RATE = 240
"""Textual's most frames per second (its default is 60). A frame is drawn only when
something changed, at the next tick: at 60 a key waits up to 17 ms per frame it needs (a
tree move needs two), at 240 up to 4 ms. Continuous updates (Replay, Live) keep their own
cadence. TEXTUAL_FPS in the environment still wins."""

ESCAPE_DELAY_MS = 10
"""How long a lone ESC waits for the rest of a sequence before it is the Escape key
(Textual's default is 100; see ``prompt_escape``). ESCDELAY in the environment still wins."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        nargs="?",
        help="a runs folder or a run on this machine, HOST:PATH, or a saved target name "
        f"(default: ./{DEFAULT_TARGET} if it exists, else .)",
    )
    add_ssh_options(parser)
    parser.add_argument(
        "--images",
        choices=images.MODES,
        default=None,
        help="how to draw pictures (default: $TVIS_IMAGES, else auto: "
        "half blocks in tmux, kitty or sixel where the terminal has them)",
    )
    parser.add_argument("--run", metavar="RUN_ID", help="open this run instead of picking one")
    parser.add_argument(
        "--live",
        nargs="?",
        const="",
        default=None,
        metavar="HOST:PORT",
        help="add the Live page, receiving tvis.catch on HOST:PORT "
        "(default: $TVIS_SERVER, else 127.0.0.1:2875)",
    )


class _Refused(Exception):
    """A reason not to start the viewer: one sentence and the exit status."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _live_address(flag: str | None) -> str | None:
    """The Live page's address from ``--live`` (None when the flag is absent)."""
    if flag is None:
        return None
    from tvis.live.address import parse_address
    from tvis.live.address import resolve as resolve_address

    address = resolve_address(flag or None)
    try:
        parse_address(address)
    except ValueError as e:
        raise _Refused(str(e), 2) from None
    return address


def _connector(
    spec: str,
    args: argparse.Namespace,
    allow_empty: bool,
    agent_env: dict[str, str] | None = None,
) -> tuple[Callable, str]:
    """How the app gets its agent client, and how the target reads in the status line.

    The agent is started here, before the viewer's own imports, which it overlaps: a local
    one as a process, a remote one through ssh. A remote target's handshake is awaited
    before the app owns the terminal (``Dialer.connect_now``), so that ssh can ask for a
    password or a second factor."""
    from tvis.targets import TargetError
    from tvis.targets import resolve as resolve_target

    try:
        target = resolve_target(spec, via=args.via, remote_tvis=args.remote_tvis)
    except TargetError as e:
        raise _Refused(str(e), 2) from None
    label = target.describe()
    dialer = Dialer(target, allow_empty=allow_empty, wanted_run=args.run, agent_env=agent_env)
    if not target.is_local:
        sys.stderr.write(f"tvis: connecting to {label} …\n")
    dialer.start()
    return dialer, label


class Dialer:
    """The app's connector: each call returns a client that has shaken hands with the
    target's agent; a later call (a reconnect) dials the same target again — same jump
    hosts, same ControlMaster socket folder — or starts a new local agent.

    The first call hands over what was begun before the app took the terminal (``start``):
    an agent started, greeted and asked for the runs and the run to open (``wanted_run``, or
    the only one) as soon as its pipe was open; ``first_answers`` gives those answers."""

    def __init__(
        self,
        target: Target,
        allow_empty: bool = False,
        ssh_command: list[str] | None = None,
        control_dir: Path | None = None,
        wanted_run: str | None = None,
        agent_env: dict[str, str] | None = None,
    ) -> None:
        self.target, self.allow_empty = target, allow_empty
        self.agent_env = agent_env  # a local agent's: the user's, not the viewer's tuning
        self.ssh_command, self.control_dir = ssh_command, control_dir
        self.wanted_run = wanted_run
        self.first: Client | None = None  # connected and greeted
        self._failed: AgentError | None = None  # the start's failure, for the first call
        self._opening: Opening | None = None  # started, for the first call to hand over
        self._answers: Opening | None = None  # and its first answers, for first_answers
        self.may_prompt = not target.is_local
        """ssh may ask for a password or a second factor: the app lends it the terminal."""

    def start(self) -> None:
        """Start the agent (or ssh) now and ask it for the first answers, so that it gets
        ready while the viewer does; a failure is the first call's to report
        (``connect_now``'s, or the app's)."""
        from tvis.agent.protocol import AgentError
        from tvis.tui.opening import Opening

        try:
            client = self._open()
        except AgentError as e:
            self._failed = e
            return
        self._opening = self._answers = Opening(
            client, self.target, self.allow_empty, self.wanted_run
        )

    def answered(self) -> bool:
        """Whether what ``start`` asked is all in and the handshake went well: the first
        call and ``first_answers`` then return at once."""
        opening = self._answers
        return opening is not None and opening.answered()

    def first_answers(self) -> FirstAnswers | None:
        """What ``start`` asked for — the runs and the run to open with its index — once
        (None: nothing was asked, or it was handed over already: ask the agent)."""
        opening, self._answers = self._answers, None
        return None if opening is None else opening.answers()

    def _open(self) -> Client:
        from tvis.agent.client import open_client

        return open_client(
            self.target,
            ssh_command=self.ssh_command,
            control_dir=self.control_dir,
            echo_stderr=False,
            own_process=True,
            env=self.agent_env,
        )

    def connect_now(self) -> None:
        """Shake hands with what ``start`` began, before the app takes the terminal: ssh
        asks for its password or second factor, and a failure is one sentence on stderr."""
        self.first = self()

    def __call__(self) -> Client:
        from tvis.agent.client import greet

        client, self.first = self.first, None
        if client is not None:
            return client
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed
        opening, self._opening = self._opening, None
        if opening is not None:
            return opening.client()
        return greet(self._open(), self.target, self.allow_empty)


def tune_textual() -> None:
    """The viewer's frame rate and Escape delay, unless the user set them: Textual reads
    both when it is imported, so this comes first."""
    os.environ.setdefault("TEXTUAL_FPS", str(FRAME_RATE))
    os.environ.setdefault("ESCDELAY", str(ESCAPE_DELAY_MS))


def one_blas_thread() -> None:
    """One OpenBLAS thread for the viewer, unless the user chose: its numpy multiplies
    nothing worth a pool, and OpenBLAS starts one thread per core as numpy loads, each
    spinning for a while: ~70 ms of CPU per core during the start (measured on 2 cores),
    taken from the agent and the training job beside it. Read as numpy loads."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(args: argparse.Namespace) -> int:
    agent_env = dict(os.environ)  # a local agent keeps its BLAS threads (its PCA uses them)
    tune_textual()
    one_blas_thread()
    try:
        mode = images.resolve(args.images)
        live = _live_address(args.live)
        spec = args.target
        if spec is None and live is None:
            spec = DEFAULT_TARGET if os.path.isdir(DEFAULT_TARGET) else "."
        connector, label = None, "live"
        if spec is not None:
            connector, label = _connector(
                spec, args, allow_empty=live is not None, agent_env=agent_env
            )
    except images.ImageModeError as e:
        sys.stderr.write(f"tvis: {e}\n")
        return 2
    except _Refused as e:
        sys.stderr.write(f"tvis: {e}\n")
        return e.code

    # No cyclic collection during the start: what Textual's import, the shell and the first
    # pages make lives as long as the viewer, and the ≈ 190 young passes over it on the way
    # to the first screen freed nothing. The app's collector turns it back on (``start_held``).
    gc.disable()
    try:
        return _view(args, connector, label, mode, live)
    finally:
        gc.enable()


def _view(
    args: argparse.Namespace,
    connector: Callable | None,
    label: str,
    mode: str,
    live: str | None,
) -> int:
    """Import the app, connect where ssh may prompt, and run the viewer to its end."""
    from tvis.tui import keys
    from tvis.tui.app import TvisApp

    if isinstance(connector, Dialer) and connector.may_prompt:
        from tvis.agent.protocol import AgentError

        try:
            connector.connect_now()  # ssh has connected while the viewer imported
        except AgentError as e:
            sys.stderr.write(f"tvis: {e.message}\n")
            return 1
    images.prepare(mode)  # after ssh's prompts: it may ask the terminal a question

    keymap, keymap_error = keys.load_keymap()
    # What the imports made lives as long as the viewer: out of the cyclic collector's
    # reach, a full collection once it is back on costs ~20 ms instead of ~100.
    gc.freeze()
    app = TvisApp(
        connector,
        label,
        mode,
        run=args.run,
        live_address=live,
        keymap=keymap,
        keymap_error=keymap_error,
    )
    app.ahead.freezes = True
    app.collects_quietly = True
    app.collector.start_held = True
    if sys.platform != "win32":
        from tvis.tui.prompt_escape import PromptEscapeDriver

        app.driver_class = PromptEscapeDriver
    app.run()
    if app.error:
        sys.stderr.write(f"tvis: {app.error}\n")
        return 1
    return app.return_code or 0
