"""Loaded by `bench/frames_bench.py` into the `tvis tui` it drives (this folder first on
PYTHONPATH, TVIS_FRAMES naming the log): the viewer notes, with the time, each key it
reads, each layout and paint (with their CPU; a paint with the widgets marked for repaint
since the last) and each write to the terminal."""

import os

if os.environ.get("TVIS_FRAMES"):
    import time

    from tvis.tui import command

    # Textual is imported here, before `tvis tui` tunes it: untuned, the viewer traced drew
    # at 60 frames a second and held a lone ESC for 100 ms — another app's figures.
    command.tune_textual()

    from textual import _compositor, events
    from textual.drivers import linux_driver

    # The viewer's alone: its agent, a child, would start the log again.
    _log = open(os.environ.pop("TVIS_FRAMES"), "w", buffering=1)  # noqa: SIM115

    def _note(kind: str, start: float, cpu: float, detail: object = "") -> None:
        spent = time.thread_time() - cpu
        _log.write(f"{start:.6f}\t{kind}\t{1000 * spent:.2f}\t{detail}\n")

    def _timed(owner: type, name: str, kind: str) -> None:
        function = getattr(owner, name)

        def timed(*args, **kwargs):
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                _note(kind, start, cpu)

        setattr(owner, name, timed)

    _timed(_compositor.Compositor, "reflow", "layout")

    # What a paint draws: the widgets marked for repaint since the last one.
    _marked: dict[str, int] = {}
    _update_widgets = _compositor.Compositor.update_widgets

    def _mark(self, widgets):
        for widget in widgets:
            name = type(widget).__name__
            _marked[name] = _marked.get(name, 0) + 1
        return _update_widgets(self, widgets)

    _compositor.Compositor.update_widgets = _mark
    _render_update = _compositor.Compositor.render_update

    def _paint(self, *args, **kwargs):
        start, cpu = time.perf_counter(), time.thread_time()
        drawn = " ".join(f"{n}×{c}" if c > 1 else n for n, c in _marked.items())
        _marked.clear()
        try:
            return _render_update(self, *args, **kwargs)
        finally:
            _note("paint", start, cpu, drawn)

    _compositor.Compositor.render_update = _paint

    _key_init = events.Key.__init__

    def _key(self, key, character=None):
        _note("key", time.perf_counter(), time.thread_time(), key)
        _key_init(self, key, character)

    events.Key.__init__ = _key

    _write = linux_driver.LinuxDriver.write

    def _written(self, data):
        _note("write", time.perf_counter(), time.thread_time(), len(data))
        return _write(self, data)

    linux_driver.LinuxDriver.write = _written
