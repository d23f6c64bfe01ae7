"""The rooms' import rules of DESIGN.md ("Three processes, three rooms"), one test each, read
from the source (lazy imports included) or, for what a process loads, from a fresh
interpreter:

- the store (run-directory format, the one schema) is the lowest floor: it imports no other
  room of tvis, and never torch, textual or rich;
- the agent imports numpy, msgpack and the store: never torch, textual or rich, never the
  viewer, the recorder or live catching;
- the viewer never imports torch or the recorder, and talks to the agent only through its
  client;
- the recorder (the training process) never imports textual or rich, the agent or the viewer;
- torch is imported in the recorder, and elsewhere only lazily (inside a function) at the
  tensor-conversion edges (tvis.live's, and the Python API's ``.torch()``);
- ``import tvis`` loads neither torch nor the recorder, and the viewer, the agent, the CLI
  and live catching import without torch.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Room folders in the source tree (agent/ and tui/ install as tvis.agent and tvis.tui).
STORE, RECORD, AGENT, VIEWER = (
    ROOT / "tvis/store",
    ROOT / "tvis/record",
    ROOT / "agent",
    ROOT / "tui",
)
# What tvis the viewer may import of the agent: the client side of the protocol (the
# replies it reads are declared, and decoded, in tvis.agent.replies).
AGENT_CLIENT = (
    "tvis.agent.client",
    "tvis.agent.protocol",
    "tvis.agent.replies",
    "tvis.agent.target",
)
# The only files outside the recorder that may import torch, each inside a function.
TORCH_EDGES = ("tvis/live/tensors.py", "tvis/runs.py")
UI_LIBRARIES = ("textual", "textual_image", "rich")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, anywhere in the file (lazy imports included)."""
    return _imports(ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))))


def lazy_lines(path: Path) -> set[int]:
    """The lines of ``path``'s imports that run only when a function is called."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    return {
        line
        for function in ast.walk(tree)
        if isinstance(function, functions)
        for line, _ in _imports(ast.walk(function))
    }


def _imports(nodes) -> list[tuple[int, str]]:
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def breaks(module: str, forbidden: tuple[str, ...]) -> bool:
    return any(module == f or module.startswith(f + ".") for f in forbidden)


def offences(folders: list[Path], rule) -> list[str]:
    """``path:line imports module`` for each import in ``folders`` that ``rule`` refuses."""
    return [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for folder in folders
        for path in sorted(folder.rglob("*.py"))
        for line, module in imported_modules(path)
        if rule(module)
    ]


def _tvis_outside(allowed: tuple[str, ...]):
    """A rule refusing a module of tvis outside ``allowed`` (the package's own ``tvis`` and
    its version always allowed: every room may say which tvis it is)."""

    def rule(module: str) -> bool:
        if module in ("tvis", "tvis.__version__") or not breaks(module, ("tvis",)):
            return False
        return not breaks(module, allowed)

    return rule


# -- the store: the lowest floor ---------------------------------------------------------------


def test_the_store_imports_no_other_room():
    assert offences([STORE], _tvis_outside(("tvis.store",))) == []


def test_the_store_never_imports_torch_or_a_ui_library():
    assert offences([STORE], lambda m: breaks(m, ("torch", *UI_LIBRARIES))) == []


# -- the agent ---------------------------------------------------------------------------------


def test_the_agent_never_imports_torch_or_a_ui_library():
    assert offences([AGENT], lambda m: breaks(m, ("torch", *UI_LIBRARIES))) == []


def test_the_agent_imports_of_tvis_only_itself_and_the_store():
    assert offences([AGENT], _tvis_outside(("tvis.agent", "tvis.store"))) == []


# -- the viewer --------------------------------------------------------------------------------


def test_the_viewer_never_imports_torch_or_the_recorder():
    assert offences([VIEWER], lambda m: breaks(m, ("torch", "tvis.record"))) == []


def test_the_viewer_reaches_the_agent_only_through_its_client():
    rule = lambda m: breaks(m, ("tvis.agent",)) and not breaks(m, AGENT_CLIENT)  # noqa: E731
    assert offences([VIEWER], rule) == []


# -- the recorder ------------------------------------------------------------------------------


def test_the_recorder_never_imports_a_ui_library():
    assert offences([RECORD], lambda m: breaks(m, UI_LIBRARIES)) == []


def test_the_recorder_never_imports_the_agent_or_the_viewer():
    assert offences([RECORD], lambda m: breaks(m, ("tvis.agent", "tvis.tui"))) == []


# -- torch -------------------------------------------------------------------------------------


def test_torch_outside_the_recorder_only_lazily_at_the_conversion_edges():
    found = []
    for path in sorted(
        [*(ROOT / "tvis").rglob("*.py"), *AGENT.rglob("*.py"), *VIEWER.rglob("*.py")]
    ):
        where = path.relative_to(ROOT).as_posix()
        if path.is_relative_to(RECORD):
            continue
        lazy = lazy_lines(path)
        for line, module in imported_modules(path):
            if breaks(module, ("torch",)) and (where not in TORCH_EDGES or line not in lazy):
                found.append(f"{where}:{line} imports {module}")
    assert found == []


# -- what a process loads ------------------------------------------------------------------------


def _loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` (stdin closed: nothing
    probes a terminal)."""
    script = code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))\n"
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_import_tvis_loads_neither_torch_nor_the_recorder():
    loaded = _loaded_after("import tvis")
    assert not {m for m in loaded if breaks(m, ("torch", "tvis.record"))}


def test_the_viewer_the_agent_the_cli_and_live_import_without_torch():
    """Every module of the viewer, the agent, the store and live catching, and the CLI:
    `tvis tui`, `tvis agent` and `tvis ls` on a machine without torch."""
    code = (
        "import importlib, pkgutil\n"
        "import tvis, tvis.cli, tvis.listing, tvis.runs, tvis.targets\n"
        "for name in ('tvis.tui', 'tvis.agent', 'tvis.store', 'tvis.live'):\n"
        "    package = importlib.import_module(name)\n"
        "    for info in pkgutil.walk_packages(package.__path__, name + '.'):\n"
        "        if not info.name.endswith('__main__'):\n"
        "            importlib.import_module(info.name)\n"
    )
    loaded = _loaded_after(code)
    assert "tvis.tui.app" in loaded and "tvis.agent.server" in loaded
    assert not {m for m in loaded if breaks(m, ("torch", "tvis.record"))}


def test_the_walker_sees_a_lazy_import(tmp_path: Path):
    source = tmp_path / "lazy.py"
    source.write_text("def f():\n    from tvis.record import builder\n    import torch.nn\n")
    modules = [m for _, m in imported_modules(source)]
    assert breaks(modules[0], ("tvis.record",)) and "torch.nn" in modules
    assert lazy_lines(source) == {2, 3}


def test_tvis_tui_starts_its_local_agent_before_the_heavy_imports(tmp_path: Path):
    """`tvis tui FOLDER` starts `tvis agent --stdio` first, so that the agent's imports
    overlap the viewer's: nothing on the way there imports numpy, textual, rich or the
    agent's API (which the viewer, talking to another process, never needs)."""
    code = (
        "import argparse\n"
        "from tvis.tui import command\n"
        "args = argparse.Namespace(via=[], remote_tvis=None, run=None)\n"
        f"dialer, label = command._connector({str(tmp_path)!r}, args, allow_empty=True)\n"
        "started = dialer._opening.client()\n"
        "assert type(started).__name__ == 'LocalProcessClient', started\n"
        "started.close()\n"
    )
    loaded = _loaded_after(code)
    assert "tvis.agent.client" in loaded
    heavy = ("numpy", "textual", "rich", "tvis.agent.api", "tvis.agent.dispatch", "tvis.tui.app")
    assert not {m for m in loaded if breaks(m, heavy)}


def test_the_first_pages_load_no_syntax_highlighter_and_build_no_256_colour_table():
    """Replay and Explore open with the source pane closed and in truecolor or halfcell:
    pygments (Rich's Syntax) and the 256-colour table wait until they are needed."""
    code = (
        "import tvis.tui.app, tvis.tui.pages.replay, tvis.tui.pages.explore\n"
        "from tvis.tui.picture import colormaps\n"
        "assert colormaps._sent_256.cache_info().currsize == 0\n"
    )
    loaded = _loaded_after(code)
    assert "tvis.tui.widgets.source_view" in loaded
    assert not {m for m in loaded if breaks(m, ("pygments", "rich.syntax"))}


def test_the_app_shell_loads_no_numpy_and_the_first_page_comes_on_a_thread():
    """`tvis tui` draws "connecting …" without numpy (0.1–0.2 s of imports): the first
    page's modules, numpy among them, are imported on a thread of their own while the
    agent answers, when the app's thread waits."""
    shell = _loaded_after("import tvis.cli, tvis.tui.command, tvis.tui.app, tvis.tui.link")
    assert "tvis.agent.replies" in shell
    assert not {m for m in shell if breaks(m, ("numpy", "tvis.tui.pages.replay"))}
    code = (
        "import threading\n"
        "from tvis.tui.pages import pages_for, warm\n"
        "warm(pages_for(True)[0])\n"
        "for thread in threading.enumerate():\n"
        "    if thread.name.startswith('tvis-import-'):\n"
        "        thread.join()\n"
    )
    loaded = _loaded_after(code)
    assert "tvis.tui.pages.replay" in loaded and "numpy" in loaded


def test_the_agent_answers_the_first_page_before_it_loads_the_decoders(recorded_run: Path):
    """numcodecs (≈ 60 ms of the agent's start, most of it reading every package's entry
    points) is not needed to answer hello, runs, run and Replay's event list: `tvis agent
    --stdio` loads it on a thread as it starts serving, and a stored value's first decode
    loads it wherever the agent runs."""
    first_page = (
        "from tvis import __version__\n"
        "from tvis.agent.client import LocalClient\n"
        "from tvis.agent.protocol import PROTOCOL_VERSION\n"
        "from tvis.agent.replies import replay_query\n"
        f"client = LocalClient({str(recorded_run.parent)!r})\n"
        "client.call('hello', protocol=PROTOCOL_VERSION, version=__version__)\n"
        "run = client.call('runs')[0]['run']\n"
        "client.call('run', run=run)\n"
        "client.call('replay', **replay_query(run, 0, 'layer', []))\n"
    )
    assert "numcodecs" not in _loaded_after(first_page)
    a_value = (
        "root = client.call('calls', run=run, batch=0, parent=-1, offset=0, limit=50)\n"
        "call = root['calls'][-1]['id']\n"
        "out = client.call('call', run=run, batch=0, call=call)['outputs'][0]['tensor']\n"
        "client.call('view', run=run, tensor=out, grad=False, index=[], batch=0, sample=0,\n"
        "            width=20, height=10)\n"
    )
    assert "numcodecs" in _loaded_after(first_page + a_value)
    source = (ROOT / "agent/command.py").read_text(encoding="utf-8")
    assert 'threading.Thread(target=codecs, name="tvis-codecs"' in source
