"""One optimizer step: its micro-batches (time per phase, loss), the loss across the run, and
every parameter's ‖w‖, ‖grad‖, ‖Δw‖ and ‖Δw‖/‖w‖ judged good / warn / bad."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from tvis.agent.replies import StepReply
from tvis.store.schema import ParamRecord
from tvis.tui import colors, fmt
from tvis.tui.messages import Selected, Selection
from tvis.tui.pane import Asks
from tvis.tui.widgets.lists import LineColumn, LineTable, content_widths
from tvis.tui.widgets.sparkline import sparkline

PHASES = ("data", "forward", "loss", "backward", "optimizer")


def micro_batch_table(batches: list[dict[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False, header_style=colors.MUTED)
    table.add_column("batch", justify="right")
    table.add_column("micro", justify="right")
    table.add_column("loss", justify="right", style=colors.PHASE["loss"])
    for phase in PHASES:
        table.add_column(
            colors.phase_label(phase), justify="right", style=colors.phase_color(phase)
        )
    for b in batches:
        phase_ms = b.get("phase_ms") or {}
        table.add_row(
            str(b.get("index")),
            str(b.get("micro", 0)),
            fmt.num(b.get("loss")),
            *(fmt.ms(phase_ms.get(p)) for p in PHASES),
        )
    return table


def optimizer_text(optimizers: list[dict[str, Any]]) -> str:
    parts = []
    for opt in optimizers or []:
        groups = opt.get("groups") or [{}]
        hyper = ", ".join(
            f"{k}={fmt.num(v) if isinstance(v, (int, float)) else v}"
            for k, v in list(groups[0].items())[:4]
        )
        parts.append(f"{opt.get('cls', '?')}({hyper})")
    return "; ".join(parts) or "—"


class ParamTable(LineTable):
    """Parameters of the step; moving the cursor shows one in the inspector, enter opens
    it there. Drawn line by line: a ``DataTable`` rendered every cell through Rich on the
    pane's first frame."""

    columns = (
        LineColumn("parameter"),
        LineColumn("shape"),
        *(LineColumn(label, right=True) for label in ("‖w‖", "‖grad‖", "‖Δw‖", "‖Δw‖/‖w‖")),
    )

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.params: list[ParamRecord] = []
        self.step: int | None = None
        self._cells: list[tuple[Text | str, ...]] = []
        self._widths = [len(c.label) for c in self.columns]

    def fill(self, step: int | None, params: list[ParamRecord]) -> None:
        """List ``params`` of ``step`` (none: an empty table), the cursor on the first."""
        self.step, self.params = step, params
        self._cells = [param_cells(p) for p in params]
        self._widths = content_widths(self.columns, self._cells)
        self.set_rows(len(params), cursor=0)  # not announced: no one chose it

    def column_widths(self, width: int) -> list[int]:
        return self._widths

    def cells(self, row: int) -> tuple[Text | str, ...]:
        return self._cells[row]

    def _selection(self, row: int) -> Selection:
        return Selection("param", step=self.step, param=dict(self.params[row]))

    @on(LineTable.Highlighted)
    def _highlighted(self, event: LineTable.Highlighted) -> None:
        event.stop()
        if self.has_focus and 0 <= event.row < len(self.params):
            self.post_message(Selected(self._selection(event.row)))

    @on(LineTable.Selected)
    def _selected(self, event: LineTable.Selected) -> None:
        event.stop()
        if 0 <= event.row < len(self.params):
            self.post_message(Selected(self._selection(event.row), open_inspector=True))


def param_cells(param: ParamRecord) -> tuple[Text | str, ...]:
    """A parameter's row: its name and shape, its norms, and the update ratio judged."""
    n = param.get("norms") or {}
    ratio = n.get("ratio")
    return (
        param.get("name", "?"),
        Text(fmt.shape(param.get("shape")), style=colors.MUTED),
        fmt.num(n.get("w")),
        fmt.num(n.get("grad")),
        fmt.num(n.get("update")),
        Text(fmt.num(ratio), style=colors.ratio_color(ratio)),
    )


class StepView(Asks, Vertical):
    """The Step pane."""

    DEFAULT_CSS = """
    StepView > Static { height: auto; margin-bottom: 1; }
    StepView ParamTable { height: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.step: int | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="step-header")
        yield Static("", id="step-micro")
        yield ParamTable()

    def load(self, step: int | None) -> None:
        self.step = step
        if step is None:
            self.query_one("#step-header", Static).update(
                Text(
                    "this batch belongs to no optimizer step (no step was recorded after it)",
                    style=colors.MUTED,
                )
            )
            self.query_one("#step-micro", Static).update("")
            self.query_one(ParamTable).fill(None, [])
            return
        self.ask("step", run=self.app.run_name, step=step)

    def failed(self, tag: str, message: str) -> None:
        self.query_one("#step-header", Static).update(Text(message, style=colors.BAD))

    def answered(self, tag: str, record: StepReply) -> None:
        step = self.step
        if step is None:
            return
        info = record["step"]
        run_batches = (self.app.run_info or {}).get("batches") or []
        mine = [b for b in run_batches if b.get("index") in (info.get("batches") or [])]
        header = Text(f"step {step}", style="bold")
        header.append(f"   batches {', '.join(str(b) for b in info.get('batches') or [])}")
        header.append(f"   loss {fmt.num(info.get('loss'))}", style=colors.PHASE["loss"])
        header.append(
            f"\noptimizer  {optimizer_text(info.get('optimizers') or [])}", style=colors.MUTED
        )
        losses = [b.get("loss") for b in run_batches]
        if len(losses) > 1:
            header.append("\nloss per batch  ", style=colors.MUTED)
            header.append_text(sparkline(losses, 40, colors.PHASE["loss"]))
            header.append(f"  {fmt.num(losses[0])} → {fmt.num(losses[-1])}", style=colors.MUTED)
        self.query_one("#step-header", Static).update(header)
        self.query_one("#step-micro", Static).update(micro_batch_table(mine))
        self.query_one(ParamTable).fill(step, record["params"])
