"""Names of a multi-label model's labels, found in the script: a multi-label tagger's
targets are rows of 0/1, so no dataset ``classes`` attribute or target id names them,
but the script usually keeps the names in a list of exactly that many strings
(``TAGS = ["sky", "water", ...]``, ``CLASSES``, ``label_names``)."""

from __future__ import annotations

from tvis.record.data import MAX_LABELS

# Names a list of label names goes by; any other list of the right length is a weaker
# guess, taken only when it is the only one in sight.
_NAMES = ("tag", "label", "class", "categor", "name", "attr", "genre", "topic")


def settle(rec, count: int, frame) -> None:
    """Record ``count`` label names as the run's classes when the script's frames (from
    ``frame`` outwards) hold one list of that many distinct strings."""
    info = rec.data_info
    if "classes" in info or count < 2 or count > MAX_LABELS:
        return
    named, unnamed = [], []
    seen: set[int] = set()
    while frame is not None:
        if rec.project.relpath(frame.f_code.co_filename) is not None:
            for name, value in list(frame.f_locals.items()):
                if id(value) in seen or not _names_list(value, count):
                    continue
                seen.add(id(value))
                lowered = name.lower()
                (named if any(s in lowered for s in _NAMES) else unnamed).append(value)
        frame = frame.f_back
    chosen = named[0] if named else unnamed[0] if len(unnamed) == 1 else None
    if chosen is not None:
        info["classes"] = [str(c) for c in chosen]


def _names_list(value, count: int) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) == count
        and all(isinstance(v, str) and v for v in value)
        and len(set(value)) == count
    )
