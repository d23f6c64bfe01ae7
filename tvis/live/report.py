"""What the session prints: `summary()`, the live `status()` view and `help()`."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from tvis.live.server import LiveServer
from tvis.live.session import server
from tvis.live.store import Entry, NameInfo
from tvis.store.printable import printable_line

STATUS_HZ = 4
"""Refreshes per second of `status()`: smooth to the eye, negligible next to receiving."""


def summary() -> None:
    """Print one line per name: counts, newest shape/dtype and statistics, rate, drops."""
    Console().print(_table(server()))


@dataclass(frozen=True)
class Status:
    """What `status()` returns: where the session receives and how much has arrived."""

    address: str
    names: list[str]
    connected: int
    connections: int
    refused: int
    received: int
    dropped: int


def status(watch: bool = False) -> Status:
    """Print what is arriving once and return it as a ``Status``.

    ``watch=True`` keeps the view refreshing until Ctrl-C (receiving goes on) instead.
    """
    live_server = server()
    console = Console()
    if not watch:
        console.print(Text(_status_line(live_server)))
        console.print(_table(live_server))
        return _status(live_server)
    spinner = Spinner("dots")
    try:
        with Live(console=console, refresh_per_second=STATUS_HZ) as live:
            while True:
                spinner.text = _status_line(live_server) + " · Ctrl-C stops watching"
                live.update(Group(spinner, _table(live_server)))
                time.sleep(1 / STATUS_HZ)
    except KeyboardInterrupt:
        pass
    return _status(live_server)


def _status_line(live_server: LiveServer) -> str:
    stats = live_server.stats
    return (
        f"receiving on {live_server.address} · {len(live_server.store.names())} names · "
        f"{live_server.connected} connected · {stats.connections} connections · "
        f"{stats.refused} refused"
    )


def _status(live_server: LiveServer) -> Status:
    store = live_server.store
    names = store.names()
    infos = [info for info in map(store.info, names) if info is not None]
    return Status(
        address=live_server.address,
        names=list(names),
        connected=live_server.connected,
        connections=live_server.stats.connections,
        refused=live_server.stats.refused,
        received=sum(i.received for i in infos),
        dropped=sum(i.dropped for i in infos),
    )


def help() -> None:
    """Print the live-catching API."""
    Console().print(HELP)


HELP = """[bold]tvis live catching[/bold]

[bold]In the training script[/bold]
  tvis.catch(x, name=None, every=1, server=None)
      send a tensor / array / number / string / list / tuple / dict; returns at once, never raises.
      name defaults to the argument's source text (model.fc.weight -> model_fc_weight);
      every=N sends the 1st, N+1th, ... call; server="[TOKEN@]HOST:PORT", else $TVIS_SERVER,
      else 127.0.0.1:2875.

[bold]In a Python session[/bold]
  tvis.serve(port=2875, host="127.0.0.1", token=None, history=256, max_bytes=2**30,
             max_total=2**30)
      start receiving in the background; a host other than loopback needs a token.
  tvis.get(name, index=-1)   newest value of name (older ones: -2, -3, ...)
  tvis.get_all(name)         every kept value of name, oldest first
                             (rank=N: only what rank N of a distributed job sent)
  tvis.ingest_all()          bind the newest value of every name in your namespace
  tvis.summary()             per name: count, shape, dtype, statistics, rate, drops
  tvis.status(watch=False)   print where it receives and what arrived once, and return it;
                             watch=True refreshes it live until Ctrl-C
  tvis.help()                this text

[bold]In the terminal[/bold]
  tvis tui --live [HOST:PORT]   the Live page: sparklines, heatmaps, histograms, history
"""


def _table(live_server: LiveServer) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("name", "recv", "shape dtype", "value/‖·‖"):
        table.add_column(column, no_wrap=True, justify="right" if column == "recv" else "left")
    for column in ("min … max", "mean ± std", "rate/s", "drops", "age"):
        table.add_column(column, no_wrap=True, justify="right")
    now = time.time()
    for name in live_server.store.names():
        info = live_server.store.info(name)
        if info is not None:
            # Text, never markup: names and strings come from the wire and may hold "[...]",
            # or escapes (shown, never obeyed).
            table.add_row(*(Text(printable_line(cell)) for cell in _row(info, now)))
    return table


def _row(info: NameInfo, now: float) -> list[str]:
    entry = info.latest
    d = entry.digest()
    spread = d.min is not None and d.min != d.max
    return [
        info.name,
        str(info.received) if info.kept == info.received else f"{info.received} ({info.kept} kept)",
        f"{_shape(entry)} {entry.dtype}",
        _value(entry),
        f"{d.min:.3g} … {d.max:.3g}" if spread else "",
        f"{d.mean:.3g} ± {d.std:.3g}" if spread else "",
        f"{info.rate:.2f}",
        str(info.dropped),
        f"{now - entry.received:.0f}s",
    ]


def _shape(entry: Entry) -> str:
    if entry.shape is not None:
        return "×".join(map(str, entry.shape)) or "0-d"
    return entry.kind


def _value(entry: Entry) -> str:
    """A scalar's value, an array's L2 norm, the start of a string."""
    if entry.kind == "str":
        return repr(entry.value if len(entry.value) <= 24 else entry.value[:23] + "…")
    scalar = entry.digest().scalar
    return "" if scalar is None else f"{scalar:.4g}"
