"""Ranks: the ranks of a multi-process recording side by side, and a selector between them.

Shown only for a run that is one rank of a group (see ``PageSpec.needs_ranks``). The top row
shows which rank the whole viewer shows (``{``/``}`` switch, on every page; ``x`` jumps to the
rank that failed first); below it,
what the agent's ``ranks`` method compares: each rank's status and time per phase (the
straggler marked), loss per step per rank, batches several ranks trained on, the first
gradient that differs after the all-reduce and parameters that got no gradient; then every
parameter's gradient norm per rank at the step of the open batch (``rank_params``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import Static

from tvis.agent.replies import RankParamsReply, RankRow, RanksReply
from tvis.tui import colors, keys
from tvis.tui.focus_style import FocusVerticalScroll
from tvis.tui.pages.page import Page
from tvis.tui.pane import Asks

PHASES = ("data", "forward", "loss", "backward", "optimizer")

STRAGGLER_RATIO = 1.2
"""A rank this much slower per batch than the fastest is named: below it, timing noise on a
shared machine is as large as the difference."""

PARAM_ROWS = 200
"""Parameters listed per step: a screenful is tens; the agent pages beyond this."""


def _ms(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) else "—"


def _num(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, (int, float)) else "—"


class RankBar(Static):
    """The rank selector: every rank, the one shown highlighted, full or light."""

    DEFAULT_CSS = "RankBar { height: auto; padding: 0 1; }"

    def show(self, ranks: list[dict[str, Any]], current: str | None, rows: dict[int, dict]):
        text = Text("rank ", style=colors.MUTED)
        for entry in ranks:
            row = rows.get(entry["rank"], {})
            status = row.get("status", "")
            style = "bold reverse" if entry["run"] == current else ""
            if status and status not in ("complete", "running"):
                style += f" {colors.BAD}"
            label = f" {entry['rank']}{'' if row.get('full', True) else '·light'} "
            text.append(label, style=style.strip() or None)
        text.append("   { } switch rank", style=colors.MUTED)
        self.update(text)


class RanksPage(Asks, Page):
    """Every rank of the open run's group compared."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.RANKS]

    def __init__(self) -> None:
        super().__init__()
        self.reply: RanksReply | None = None

    def compose(self) -> ComposeResult:
        yield RankBar(id="rank-bar")
        with FocusVerticalScroll(id="ranks-body"):
            yield Static(id="ranks-summary")
            yield Static(id="ranks-table")
            yield Static(id="ranks-loss")
            yield Static(id="ranks-params")

    def on_mount(self) -> None:
        self.watch(self.app, "run_info", self._run_changed, init=True)
        self.watch(self.app, "batch", self._batch_changed, init=False)

    # -- data ------------------------------------------------------------------------------

    def _run_changed(self, _: object = None) -> None:
        self._draw_bar()
        if self.app.run_name and (self.app.run_info or {}).get("ranks"):
            self._load(self.app.run_name)
            self._load_params(self.app.run_name, self.app.current_step)

    def _batch_changed(self, _: object = None) -> None:
        if self.app.run_name:
            self._load_params(self.app.run_name, self.app.current_step)

    def _load(self, run: str) -> None:
        self.ask("ranks", tag="ranks", run=run)

    def _load_params(self, run: str, step: int | None) -> None:
        self.ask("rank_params", tag="params", run=run, step=step or 0, limit=PARAM_ROWS)

    def answered(self, tag: str, result: Any) -> None:  # RanksReply or RankParamsReply
        if tag == "ranks":
            self._show(result)
        else:
            self._show_params(result)

    def failed(self, tag: str, message: str) -> None:
        if tag == "ranks":
            self.query_one("#ranks-summary", Static).update(Text(message, style=colors.BAD))
        else:
            self.query_one("#ranks-params", Static).update(Text(message))

    # -- drawing ---------------------------------------------------------------------------

    def _draw_bar(self) -> None:
        info = self.app.run_info or {}
        rows = {r["rank"]: dict(r) for r in self.reply["ranks"]} if self.reply else {}
        self.query_one(RankBar).show(info.get("ranks") or [], self.app.run_name, rows)

    def _show(self, reply: RanksReply) -> None:
        self.reply = reply
        self._draw_bar()
        self.query_one("#ranks-summary", Static).update(summary(reply))
        self.query_one("#ranks-table", Static).update(rank_table(reply))
        self.query_one("#ranks-loss", Static).update(loss_table(reply))

    def _show_params(self, reply: RankParamsReply) -> None:
        self.query_one("#ranks-params", Static).update(param_table(reply))

    # -- actions ---------------------------------------------------------------------------

    def action_first_failure(self) -> None:
        """Show the rank that failed first on its own."""
        failed = self.reply["first_failure"] if self.reply else None
        for entry in (self.app.run_info or {}).get("ranks") or []:
            if entry["rank"] == failed and entry["run"] != self.app.run_name:
                self.app.open_run(entry["run"])


def summary(reply: RanksReply) -> Group:
    """The findings, one line each, worst first."""
    lines: list[Text] = []
    rows = reply.get("ranks") or []
    shown = f"{len(rows)} of {reply.get('total')}" if reply.get("total", 0) > len(rows) else ""
    head = Text(f"{reply.get('world_size') or len(rows)} ranks", style="bold")
    head.append(f" ({reply.get('launcher') or '?'}) {shown}", style=colors.MUTED)
    lines.append(head)
    failed = reply.get("first_failure")
    if failed is not None:
        row: RankRow = next((r for r in rows if r["rank"] == failed), RankRow())
        if row.get("status") == "complete":  # it left while its peers still waited on it
            lines.append(
                Text(
                    f"✗ rank {failed} left first ({row.get('steps')} steps); the others lost their peer"
                )
            )
        else:
            lines.append(
                Text(f"✗ rank {failed} failed first: {row.get('error') or row.get('status')}")
            )
        lines[-1].stylize(colors.BAD)
    grads = reply.get("grads") or {}
    first = grads.get("first")
    if first:
        numbers = [r["rank"] for r in rows]
        pairs = zip(numbers, first.get("norms") or [], strict=False)
        norms = ", ".join(f"r{r}={_num(n)}" for r, n in pairs)
        text = Text(
            f"✗ gradients differ across ranks: first {first['name']} at step {first['step']}"
            f" (‖grad‖ {norms}); {grads.get('differ')} of {grads.get('compared')} differ",
            style=colors.BAD,
        )
        lines.append(text)
    elif grads.get("compared"):
        lines.append(
            Text(
                f"✓ gradients bit-identical across ranks after the all-reduce "
                f"({grads['compared']} compared over {grads.get('steps')} steps)",
                style=colors.GOOD,
            )
        )
    same = (reply.get("same_batches") or {}).get("batches") or []
    if same:
        groups = "; ".join(
            f"batch {b['batch']}: ranks {', '.join(map(str, g))}"
            for b in same[:4]
            for g in b["ranks"]
        )
        lines.append(
            Text(
                f"✗ identical batches on several ranks ({len(same)} batches; {groups}) — "
                "no DistributedSampler, or a sampler seeded alike on every rank?",
                style=colors.WARN,
            )
        )
    elif (reply.get("same_batches") or {}).get("compared"):
        lines.append(Text("✓ every rank trained on its own batches", style=colors.GOOD))
    for unused in reply.get("unused") or []:
        names = ", ".join(unused["params"][:6]) + (" …" if unused["count"] > 6 else "")
        lines.append(
            Text(
                f"• rank {unused['rank']}: {unused['count']} parameters got no gradient ({names})",
                style=colors.WARN,
            )
        )
    straggler = reply.get("straggler")
    if straggler and straggler["ratio"] >= STRAGGLER_RATIO:
        full = {r["rank"]: r.get("full", True) for r in rows}
        caveat = ""
        if full.get(straggler["rank"]) and not full.get(straggler["fastest"]):
            caveat = " (it is recorded in full, the other light: --ranks all compares alike)"
        lines.append(
            Text(
                f"• rank {straggler['rank']} is slowest: {_ms(straggler['ms'])} ms per batch, "
                f"{straggler['ratio']:.1f}× rank {straggler['fastest']}{caveat}",
                style=colors.WARN,
            )
        )
    return Group(*lines)


def rank_table(reply: RanksReply) -> Table:
    """Per rank: status, what it recorded, and mean ms per batch in each phase."""
    table = Table(title="time per phase (ms per batch)", title_justify="left", expand=False)
    table.add_column("rank", justify="right")
    table.add_column("status")
    table.add_column("rec")
    table.add_column("steps", justify="right")
    for phase in PHASES:
        table.add_column(
            colors.phase_label(phase), justify="right", style=colors.phase_color(phase)
        )
    table.add_column("total", justify="right")
    slow = (reply["straggler"] or {}).get("rank")
    for row, phases in zip(reply["ranks"], reply["phases"], strict=False):
        status = row.get("status", "")
        table.add_row(
            str(row["rank"]),
            Text(status, style=colors.GOOD if status == "complete" else colors.BAD),
            "full" if row.get("full") else "light",
            str(row.get("steps", 0)),
            *(_ms(phases.get(p)) for p in PHASES),
            Text(_ms(phases.get("total")), style=colors.WARN if row["rank"] == slow else ""),
        )
    return table


def loss_table(reply: RanksReply) -> Table:
    """Loss per step, one column per rank."""
    ranks = [r["rank"] for r in reply["ranks"]]
    table = Table(title="loss per step", title_justify="left", expand=False)
    table.add_column("step", justify="right")
    for rank in ranks:
        table.add_column(f"rank {rank}", justify="right", style=colors.PHASE["loss"])
    table.add_column("spread", justify="right")
    for row in reply["loss"]:
        values = [v for v in row["losses"] if isinstance(v, (int, float))]
        spread = max(values) - min(values) if len(values) > 1 else None
        table.add_row(str(row["step"]), *(_num(v) for v in row["losses"]), _num(spread))
    return table


def param_table(reply: RankParamsReply) -> Table:
    """Every parameter's gradient norm per rank at one step; differing rows marked."""
    ranks, total, rows = reply["ranks"], reply["total"], reply["rows"]
    more = f" (first {len(rows)} of {total})" if total > len(rows) else ""
    table = Table(
        title=f"gradients after the all-reduce, step {reply['step']}{more}",
        title_justify="left",
        expand=False,
    )
    table.add_column("parameter")
    for rank in ranks:
        table.add_column(f"‖grad‖ r{rank}", justify="right")
    table.add_column("same")
    for row in rows:
        same = row["same"]
        mark = Text("=", style=colors.GOOD) if same else Text("≠", style=colors.BAD)
        if same is None:
            mark = Text("no grad" if not any(row["has_grad"]) else "—", style=colors.MUTED)
        table.add_row(Text(row["name"]), *(_num(n) for n in row["norms"]), mark)
    return table
