"""The keys every list and table shares (``keys.LIST``): j/k move, g/G jump to the ends."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import BindingType
from textual.widgets import DataTable, OptionList

from tvis.tui import keys


class ListTable(DataTable):
    """A DataTable that moves with the list keys."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.LIST]

    def action_first_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=0)

    def action_last_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)


class ListOptions(OptionList):
    """An OptionList that moves with the list keys."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.LIST]

    def action_first_row(self) -> None:
        self.action_first()

    def action_last_row(self) -> None:
        self.action_last()
