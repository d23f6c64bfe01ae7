"""The one LRU map the agent's caches and the viewer's answer cache share."""

from __future__ import annotations

from tvis.store.lru import LRU


def test_lru_drops_the_least_recently_used_entry_past_its_size():
    cache = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.peek("a") == (True, 1)  # "a" is now the most recent
    cache.put("c", 3)
    assert cache.peek("b") == (False, None) and len(cache) == 2
    assert cache.peek("a") == (True, 1) and cache.peek("c") == (True, 3)


def test_lru_tells_a_kept_none_from_a_missing_key():
    cache = LRU(4)
    cache.put("none", None)
    assert cache.peek("none") == (True, None)
    assert cache.peek("other") == (False, None)


def test_lru_get_builds_once_and_keeps_the_first_value():
    cache = LRU(4)
    built = []
    assert cache.get("k", lambda: built.append(1) or "first") == "first"
    assert cache.get("k", lambda: built.append(1) or "second") == "first"
    assert built == [1]
