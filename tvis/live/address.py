"""Where catches go: the `[TOKEN@]HOST[:PORT]` address a sender connects to.

The token rides in the address (``server="s3cret@10.0.0.5:2875"`` or the same string in
``TVIS_SERVER``) so that one string says both where and how to connect; there is no second
setting to forget on one rank of a distributed job.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from functools import lru_cache

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 2875
ENV_SERVER = "TVIS_SERVER"


@dataclass(frozen=True)
class Address:
    """A server's host, port and the token a sender presents to it (None: no token)."""

    host: str
    port: int
    token: str | None = None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@lru_cache(maxsize=64)
def parse_address(text: str) -> Address:
    """Parse ``[TOKEN@]HOST[:PORT]`` (IPv6 hosts in brackets); raise ValueError if malformed."""
    token, at, hostport = text.strip().rpartition("@")
    if not hostport:
        raise ValueError(f"{text!r} is not an address; write HOST:PORT or TOKEN@HOST:PORT.")
    if hostport.startswith("["):
        host, _, rest = hostport[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else rest
    elif hostport.count(":") == 1:
        host, _, port_text = hostport.partition(":")
    else:
        host, port_text = hostport, ""
    if not port_text:
        port = DEFAULT_PORT
    elif port_text.isdigit() and int(port_text) < 65536:
        port = int(port_text)
    else:
        raise ValueError(f"{text!r} has no valid port; write HOST:PORT with a port below 65536.")
    return Address(host or DEFAULT_HOST, port, token if at else None)


def resolve(server: str | None) -> str:
    """The address text a catch uses: its ``server`` argument, else ``TVIS_SERVER``, else the default."""
    return server or os.environ.get(ENV_SERVER) or f"{DEFAULT_HOST}:{DEFAULT_PORT}"


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is on this machine's loopback interface."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    addresses = {ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}
    return bool(addresses) and all(a.is_loopback for a in addresses)
