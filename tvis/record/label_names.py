"""Names of a multi-label model's labels, found in the script: a multi-label tagger's
targets are rows of 0/1, so no dataset ``classes`` attribute or target id names them,
but the script usually keeps the names in a list or tuple of exactly that many strings
(``TAGS = ["sky", "water", ...]``, ``CLASSES``, ``label_names``), or in a map between
each label's index and its name either way (``idx2label = {0: "sky", ...}``,
``label2id = {"sky": 0, ...}``, as Hugging Face configs spell them)."""

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
                if id(value) in seen:
                    continue
                names = _names_of(value, count)
                if names is None:
                    continue
                seen.add(id(value))
                lowered = name.lower()
                (named if any(s in lowered for s in _NAMES) else unnamed).append(names)
        frame = frame.f_back
    chosen = named[0] if named else unnamed[0] if len(unnamed) == 1 else None
    if chosen is not None:
        info["classes"] = chosen


def _names_of(value, count: int) -> list[str] | None:
    """The ``count`` label names ``value`` holds in index order: a list or tuple of
    distinct names, or a dict from each index 0…count-1 to its name or back; else None."""
    if isinstance(value, (list, tuple)):
        names = list(value)
    elif isinstance(value, dict) and len(value) == count:
        pairs = [(k, v) if isinstance(k, int) else (v, k) for k, v in value.items()]
        if sorted(i for i, _ in pairs if type(i) is int) != list(range(count)):
            return None
        names = [n for _, n in sorted(pairs, key=lambda p: p[0])]
    else:
        return None
    if len(names) != count or not all(isinstance(n, str) and n for n in names):
        return None
    return names if len(set(names)) == count else None
