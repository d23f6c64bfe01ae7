"""Turns one decoded request into one reply map, for the stdio server and the local client.

Methods are plain functions registered with ``@rpc``; their type hints are the parameter
schema, so a request with a wrong or missing parameter is refused before the method runs.
``handle`` never raises: every failure becomes an error reply with a status.
"""

from __future__ import annotations

import functools
import inspect
import logging
import types
import typing
from collections.abc import Callable
from typing import Any, Union

from tvis.agent.protocol import AGENT_FAULT, BAD_REQUEST, NOT_FOUND, AgentError
from tvis.store.reader import StoreError

log = logging.getLogger("tvis.agent")

METHODS: dict[str, Callable[..., Any]] = {}


def rpc(func: Callable[..., Any]) -> Callable[..., Any]:
    """Register ``func`` (a method of one of the API's services) under its own name."""
    METHODS[func.__name__] = func
    return func


def long_rpc(func: Callable[..., Any]) -> Callable[..., Any]:
    """Register ``func`` as a method whose work gives way to short requests in flight
    (agent/traffic.py)."""
    setattr(func, "gives_way", True)  # noqa: B010 (a mark read by agent/traffic.py)
    return rpc(func)


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(hint))
    if typing.get_origin(hint) is list:
        return f"a list of {_type_name(typing.get_args(hint)[0])}"
    return "null" if hint is type(None) else getattr(hint, "__name__", str(hint))


def _matches(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(_matches(value, a) for a in typing.get_args(hint))
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(_matches(v, item) for v in value)
    if hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, hint)


@functools.cache
def _schema(func: Callable[..., Any]) -> tuple[dict[str, Any], set[str], bool]:
    hints = typing.get_type_hints(func)
    params = list(inspect.signature(func).parameters.values())[1:]  # skip self
    kinds = {
        p.name: hints.get(p.name, Any)
        for p in params
        if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD
    }
    required = {p.name for p in params if p.default is p.empty and p.name in kinds}
    open_ended = any(p.kind is p.VAR_KEYWORD for p in params)
    return kinds, required, open_ended


def check_params(method: str, func: Callable[..., Any], params: dict[str, Any]) -> None:
    """Refuse parameters that are unknown, missing or of the wrong type (400)."""
    kinds, required, open_ended = _schema(func)
    missing = sorted(required - params.keys())
    if missing:
        raise AgentError(f"{method} needs the parameter {missing[0]!r}.", BAD_REQUEST)
    for name, value in params.items():
        if name not in kinds:
            if open_ended:
                continue
            raise AgentError(f"{method} has no parameter {name!r}.", BAD_REQUEST)
        if not _matches(value, kinds[name]):
            raise AgentError(
                f"parameter {name!r} of {method} must be {_type_name(kinds[name])}, "
                f"not {type(value).__name__}.",
                BAD_REQUEST,
            )


def _error(request_id: Any, message: str, status: int) -> dict[str, Any]:
    return {"id": request_id, "error": message, "status": status}


def request_id(request: Any) -> int | None:
    """The id of a request map, or None when it has none that can be echoed."""
    if isinstance(request, dict):
        rid = request.get("id")
        if isinstance(rid, int) and not isinstance(rid, bool):
            return rid
    return None


def background(request: Any) -> bool:
    """Whether a request map asks to be served after the others (``"background": true``,
    beside ``id``: a prefetch). An agent that predates the key ignores it."""
    return isinstance(request, dict) and request.get("background") is True


def yields(request: Any) -> bool:
    """Whether a request map asks for a method that gives way to others by itself."""
    method = request.get("method") if isinstance(request, dict) else None
    return isinstance(method, str) and getattr(METHODS.get(method), "gives_way", False)


def handle(api: Any, request: Any) -> dict[str, Any]:
    """The reply map for one request map; never raises. ``api`` (agent/api.py) says which
    of its services a method runs on (``receiver``) and counts requests (``traffic``)."""
    rid = request_id(request)
    if rid is None:
        return _error(None, "a request must be a map with an integer 'id'.", BAD_REQUEST)
    method, params = request.get("method"), request.get("params", {})
    if params is None:
        params = {}
    func = METHODS.get(method) if isinstance(method, str) else None
    if func is None:
        known = ", ".join(sorted(METHODS))
        return _error(rid, f"unknown method {method!r}; this agent knows {known}.", BAD_REQUEST)
    if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
        return _error(rid, "params must be a map from names to values.", BAD_REQUEST)
    try:
        check_params(method, func, params)
        # What a long build gives way to is a request someone waits for, not a prefetch.
        with api.traffic.serving(long=getattr(func, "gives_way", False) or background(request)):
            return {"id": rid, "result": func(api.receiver(func), **params)}
    except AgentError as e:
        return _error(rid, e.message, e.status)
    except StoreError as e:
        return _error(rid, str(e), NOT_FOUND)
    except Exception as e:  # the agent must answer and keep serving, whatever went wrong
        log.exception("%s failed", method)
        return _error(rid, f"the agent failed on {method}: {type(e).__name__}: {e}.", AGENT_FAULT)
