"""Replay's cards around the layer stack: the followed sample as the model received it
(and its transform stages, its target), the result (prediction, p(target), the sample's
and the batch's loss), and the optimizer's moment (which parameters moved most)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import Static

from tvis.agent.replies import (
    PipelineReply,
    PipelineValue,
    ReplayEvent,
    SampleTableReply,
)
from tvis.tui import colors, fmt
from tvis.tui.pane import AgentPane
from tvis.tui.picture import Picture
from tvis.tui.picture.widget import depth_of, label_legend

INPUT_PX = 48
"""Side of the input and stage pictures asked for: the card is about 30 columns wide."""

TEXT_CHARS = 240
"""Decoded text shown on a card: a few lines of the card's width."""


def card_requests(run: str, batch: int, sample: int) -> list[tuple[str, dict[str, Any]]]:
    """What the input and result cards ask the agent for a sample of a batch (method,
    parameters): its pipeline pictures, and its row of the sample table."""
    where = {"run": run, "batch": batch, "sample": sample}
    return [
        ("pipeline", {**where, "width": INPUT_PX, "height": INPUT_PX}),
        ("sample_table", where),
    ]


def _value_text(value: PipelineValue | None) -> Text:
    """A pipeline value that is not a picture, in a line or two."""
    if not value:
        return Text("not recorded", style=colors.MUTED)
    kind = value.get("kind")
    if kind == "text":
        return Text(fmt.clip(str(value.get("text") or ""), TEXT_CHARS))
    if kind == "ids":
        if value.get("text"):  # joined as the vocabulary joins (words get their spaces)
            return Text(fmt.clip(str(value["text"]), TEXT_CHARS))
        return Text(fmt.clip(" ".join(str(i) for i in value.get("ids") or []), TEXT_CHARS))
    if kind == "tensor":
        stats = value.get("stats") or {}
        return Text(
            f"{fmt.shape(value.get('shape'))} {value.get('dtype') or ''} "
            f"μ {fmt.num(stats.get('mean'))} σ {fmt.num(stats.get('std'))}",
            style=colors.MUTED,
        )
    if kind == "value":
        return Text(fmt.clip(str(value.get("repr")), TEXT_CHARS))
    return Text("not recorded", style=colors.MUTED)


class CardAnswered(Message):
    """A card drew what the agent answered (the page's one-line summary repeats it)."""


class InputCard(AgentPane):
    """The followed sample: its picture (or text, or values), its stages, its target (a
    segmentation target as a class-coloured mask)."""

    DEFAULT_CSS = """
    InputCard { height: auto; padding: 0 1; }
    InputCard > Static { height: auto; }
    InputCard > .title { text-style: bold; color: #4fb3a9; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key: tuple | None = None
        self.pipeline: PipelineReply | None = None
        self.stage_call: int | None = None
        self.target = ""
        self.mask: SampleTableReply | None = None  # a per-pixel loss's target ("pixels")

    def compose(self) -> ComposeResult:
        yield Static("input", classes="title")
        yield Picture(max_rows=8, legend=False, id="card-input")
        yield Static(classes="body")
        mask, legend = (
            Picture(max_rows=8, legend=False, id="card-mask"),
            Static(classes="mask-legend"),
        )
        mask.display = legend.display = False  # shown for a per-pixel target only
        yield mask
        yield legend

    def load(self, run: str, batch: int, sample: int) -> None:
        key = (run, batch, sample)
        if key == self.key:
            return
        self.key, self.pipeline, self.target, self.mask = key, None, "", None
        (_, pipeline), (_, table) = card_requests(run, batch, sample)
        if not self.ask("pipeline", **pipeline):
            self.query_one("#card-input", Picture).placeholder("loading …")
        self.ask("sample_table", tag="target", **table)

    def light(self, batch: int) -> None:
        """A light group plays: its forwards ran without gradients and kept no input."""
        key = ("light", batch)
        if key == self.key:
            return
        self.key, self.pipeline, self.target, self.mask = key, None, "", None
        self._draw_mask()
        for tag in ("main", "target"):
            self.cancel(tag)
        self.query_one(".title", Static).update("input")
        self.query_one("#card-input", Picture).placeholder(
            "a light group (forwards without gradients, e.g. evaluation) keeps no input values."
        )
        self.query_one(".body", Static).update("")

    def show_stage(self, call: int | None) -> None:
        """Show the output of stage ``call`` (None: the input as the model received it)."""
        if call != self.stage_call:
            self.stage_call = call
            self._draw()

    def answered(self, tag: str, result: Any) -> None:  # target: SampleTableReply
        if tag == "target":
            self.target = _target_text(result, self.key[2] if self.key else 0)
            self.mask = result if result.get("kind") == "pixels" else None
            self._draw_mask()
        else:
            self.pipeline = result
        self._draw()
        self.post_message(CardAnswered())

    def failed(self, tag: str, message: str) -> None:
        if tag == "target":
            return  # a recording without a loss has no target: the result card says so
        self.query_one("#card-input", Picture).placeholder(message)
        self.query_one(".body", Static).update("")

    def _draw(self) -> None:
        p = self.pipeline
        if p is None:
            return
        stages = p.get("stages") or []
        shown = next((s for s in stages if s.get("call") == self.stage_call), None)
        value = shown["output"] if shown else p.get("input") or p.get("raw")
        title = "stage: " + str(shown.get("name")) if shown else "as the model received it"
        picture = self.query_one("#card-input", Picture)
        body = Text()
        if value and value.get("kind") == "image":
            picture.show_rgb(value["array"])
        else:
            picture.clear()
            body.append_text(_value_text(value))
            body.append("\n")
        self.query_one(".title", Static).update(Text(f"sample {p.get('sample')} · {title}"))
        if p.get("index") is not None:
            body.append(f"dataset[{p['index']}]", style=colors.MUTED)
        for stage in stages:
            here = stage.get("call") == self.stage_call
            body.append(
                f"\n {'▸' if here else '·'} {fmt.clip(str(stage.get('name')), 24)}",
                style="bold" if here else colors.MUTED,
            )
        if self.target:
            body.append("\ntarget ", style=colors.MUTED)
            body.append(self.target, style="bold")
        elif self.mask is not None:
            h, w = self.mask.get("shape") or (0, 0)
            body.append(f"\ntarget mask {h}×{w}", style=colors.MUTED)
            if self.mask.get("slice"):
                body.append(f" · {self.mask['slice']}", style=colors.MUTED)
        self.query_one(".body", Static).update(body)

    def _draw_mask(self) -> None:
        """A per-pixel target as a picture in class colours, ignored pixels grey."""
        picture = self.query_one("#card-mask", Picture)
        legend = self.query_one(".mask-legend", Static)
        mask = self.mask
        picture.display = legend.display = mask is not None
        if mask is None:
            picture.clear()
            return
        ignored = mask["ignored"].astype(bool)
        picture.show_labels(mask["target"], ignored)
        depth = depth_of(self.app.console.color_system)
        # The reply names the classes of the prediction too (the Loss page draws both):
        # this card draws the target alone.
        drawn = set(mask["target"][~ignored].tolist())
        named = zip(mask.get("present") or [], mask.get("names") or [], strict=False)
        shown = [(c, n) for c, n in named if c in drawn]
        text = label_legend([c for c, _ in shown], [n for _, n in shown], depth)
        if ignored.any():
            text.append("  ")
            text.append_text(label_legend([], [], depth, ignored=True))
        legend.update(text)


def _target_text(table: SampleTableReply, sample: int) -> str:
    if table.get("kind") == "pixels":
        return ""  # drawn as a picture (InputCard._draw_mask)
    if table.get("kind") == "tokens":
        texts = table.get("text")
        text = texts.get("target") if texts else None
        if text is None:  # no vocabulary: the ids, as the input shows them
            text = fmt.token_ids(table.get("rows") or [], "target")
        return fmt.clip(text, TEXT_CHARS)
    row = next((r for r in table.get("rows") or [] if r.get("sample") == sample), None)
    if row is None:
        return ""
    return str(row.get("target_name") or row.get("target") or "")


class ResultCard(AgentPane):
    """What the model made of the sample: prediction, p(target), the losses. Shown once
    the loss is reached, as in training."""

    DEFAULT_CSS = """
    ResultCard { height: auto; padding: 0 1; }
    ResultCard > Static { height: auto; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key: tuple | None = None
        self.table: SampleTableReply | None = None
        self.batch_loss: float | None = None
        self.reached = False
        self.sample = 0
        self.error = ""

    def compose(self) -> ComposeResult:
        yield Static(classes="body")

    def load(self, run: str, batch: int, sample: int, batch_loss: float | None) -> None:
        key = (run, batch, sample)
        self.batch_loss = batch_loss
        if key == self.key:
            return
        self.key, self.table, self.sample, self.error = key, None, sample, ""
        _, table = card_requests(run, batch, sample)[1]
        self.ask("sample_table", **table)

    def reach(self, reached: bool) -> None:
        if reached != self.reached:
            self.reached = reached
            self._draw()

    def answered(self, tag: str, result: SampleTableReply) -> None:
        self.table = result
        self._draw()
        self.post_message(CardAnswered())

    def failed(self, tag: str, message: str) -> None:
        self.table, self.error = None, message
        self._draw()

    def _draw(self) -> None:
        text = Text("result", style=f"bold {colors.PHASE['loss']}")
        if not self.reached:
            text.append("\nappears when the loss is computed", style=colors.MUTED)
        elif self.error:
            text.append("\n" + self.error, style=colors.MUTED)
        elif self.table is not None:
            text.append_text(_result_text(self.table, self.sample))
            text.append("\nbatch loss ", style=colors.MUTED)
            text.append(fmt.num(self.batch_loss), style=colors.PHASE["loss"])
        self.query_one(".body", Static).update(text)


def _result_text(table: SampleTableReply, sample: int) -> Text:
    text = Text()
    if table.get("kind") == "pixels":
        text.append(f"\npixel accuracy {fmt.pct(table.get('accuracy'))}", style=colors.MUTED)
        text.append("\nsample loss ", style=colors.MUTED)
        text.append(fmt.num(table.get("loss_mean")), style=colors.PHASE["loss"])
        return text
    if table.get("kind") == "tokens":
        texts = table.get("text")
        predicted = texts.get("pred") if texts else None
        if predicted is None:  # no vocabulary: the ids, as the target shows them
            predicted = fmt.token_ids(table.get("rows") or [], "pred")
        text.append("\npredicted ", style=colors.MUTED)
        text.append(fmt.clip(predicted, TEXT_CHARS))
        text.append(f"\ntoken accuracy {fmt.pct(table.get('accuracy'))}", style=colors.MUTED)
        losses = [r.get("loss") for r in table.get("rows") or [] if not r.get("pad")]
        finite = [v for v in losses if isinstance(v, (int, float))]
        if finite:
            text.append("\nsample loss ", style=colors.MUTED)
            text.append(fmt.num(sum(finite) / len(finite)), style=colors.PHASE["loss"])
        return text
    row = next((r for r in table.get("rows") or [] if r.get("sample") == sample), None)
    if row is None:
        text.append("\nno per-sample result recorded", style=colors.MUTED)
        return text
    correct, pred = row.get("correct"), row.get("pred_name") or row.get("pred")
    if pred is not None:  # a regression's sample has no class predicted, nor p(target)
        verdict = "" if correct is None else colors.GOOD if correct else colors.BAD
        text.append("\npredicted ", style=colors.MUTED)
        text.append(str(pred), style=f"bold {verdict}".strip())
    if row.get("p_target") is not None:
        text.append(f"\np(target) {fmt.num(row.get('p_target'))}", style="")
    text.append("\nsample loss ", style=colors.MUTED)
    text.append(fmt.num(row.get("loss")), style=colors.PHASE["loss"])
    return text


def update_text(updates: list[ReplayEvent], reached: bool, width: int) -> Text:
    """The optimizer's moment: per group, learning rate and the parameters that moved most."""
    text = Text("update", style=f"bold {colors.PHASE['optimizer']}")
    if not updates:
        text.append("\nno optimizer step after this batch", style=colors.MUTED)
        return text
    if not reached:
        text.append("\nafter backward", style=colors.MUTED)
        return text
    for u in updates:
        text.append(f"\n{u.name} · lr {fmt.num(u.lr)}", style=colors.MUTED)
        for p in u.top:
            ratio = p["ratio"]
            text.append(f"\n {fmt.clip(p['name'], max(8, width - 12)):<{max(8, width - 12)}}")
            text.append(f" {fmt.num(ratio, 2)}", style=colors.ratio_color(ratio))
        text.append("\n ‖Δw‖/‖w‖, most moved first", style=colors.MUTED)
    return text
