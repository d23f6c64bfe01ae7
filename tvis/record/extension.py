"""The interface a recorder extension implements (function tracing, data, loss, ...)."""

from __future__ import annotations


class Extension:
    """A part of the recorder that installs its own hooks; every method is optional."""

    def install(self, recorder) -> None:
        pass

    def uninstall(self, recorder) -> None:
        pass

    def on_module_exit(self, recorder, batch, call, module, output) -> None:
        pass

    def pause(self) -> None:
        """Stop observing for a moment (see Recorder.quiet)."""

    def resume(self) -> None:
        """Observe again after ``pause``."""

    def on_call_stack_change(self, recorder) -> None:
        """A module call began or ended (the innermost open call may have changed)."""

    def before_backward(self, recorder, batch, loss) -> None:
        pass

    def on_batch_open(self, recorder, batch) -> None:
        """A batch (training or light) was opened."""

    def on_batch_close(self, recorder, batch) -> None:
        pass

    def on_thread_adopted(self, recorder) -> None:
        """Training turned out to run on the calling thread, which is now the one recorded."""
