"""`tvis agent --stdio --root DIR`: serve the runs under DIR on stdin/stdout.

This is what the viewer starts on the far side of ssh. It needs numpy and msgpack only.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import socket
import sys
import threading
from pathlib import Path
from typing import cast

# The exit status for a root that is not a folder, so the client can name the problem.
NO_ROOT = 3


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stdio",
        action="store_true",
        help="speak the agent protocol on stdin/stdout (what `tvis tui HOST:PATH` starts over ssh)",
    )
    parser.add_argument("--root", default=".", help="the folder whose runs are served (default: .)")


def main(args: argparse.Namespace) -> int:
    if not args.stdio:
        print("tvis agent: pass --stdio; the agent only talks over stdin/stdout.", file=sys.stderr)
        return 2
    root = Path(args.root).expanduser()
    if not root.is_dir():
        print(f"tvis agent: {root} is not a folder on {socket.gethostname()}.", file=sys.stderr)
        return NO_ROOT
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="tvis agent: %(message)s")
    # Frames go to a private copy of stdout; fd 1 itself is pointed at stderr so that a
    # stray print (ours or a library's) can never corrupt the stream.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    # What the imports make lives as long as the agent: no young passes over it on the way
    # to the first answer (≈ 50 of them, 15–25 ms of its start), and frozen out of later ones.
    gc.disable()
    from tvis.agent.api import AgentAPI
    from tvis.agent.protocol import Readable
    from tvis.agent.server import StdioServer
    from tvis.store.chunks import codecs

    gc.freeze()
    gc.enable()

    # The decoders of stored values (numcodecs) load on a thread while the agent answers
    # what needs none (hello, runs, run, Replay's event list) and waits for the viewer.
    loading = threading.Thread(target=codecs, name="tvis-codecs", daemon=True)
    loading.start()
    stdin = cast(Readable, sys.stdin.buffer)  # a BufferedReader: it reads into buffers
    try:
        return StdioServer(AgentAPI(root), stdin, out_fd).serve()
    finally:
        # A viewer that leaves at once ends the agent while that import is under way, and
        # an interpreter finalized under an extension module's import can crash (SIGSEGV in
        # ≈ 1 exit in 13 with an empty input): the import ends first (≈ 60 ms).
        loading.join()
