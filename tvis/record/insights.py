"""Which insight pages a run feeds, noted in the run index (``data["insights"]``) so a
viewer can tell which pages apply without opening a batch::

    {"gradcam": [conv layer names], "attention": [module names],
     "repr": [module names], "embeddings": [{"module", "param", "rows", "dim", "padding_idx"}]}
"""

from __future__ import annotations

# Names listed per kind: a model with more layers than this still shows the page; the
# list only saves the viewer a look into a batch.
MAX_NAMES = 512


def note(info: dict, kind: str, name) -> None:
    """Add ``name`` to the ``kind`` list of the run's insights, once."""
    names = info.setdefault("insights", {}).setdefault(kind, [])
    if name not in names and len(names) < MAX_NAMES:
        names.append(name)
