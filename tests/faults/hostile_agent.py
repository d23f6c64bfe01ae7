"""A hostile agent: a small process that speaks the agent protocol on its stdio the way a
compromised cluster account could, for the laptop side (client, Python API, viewer, `tvis
ls`, export) to be tried against.

    python hostile_agent.py MODE

Modes: ``names`` (run ids that climb out of folders, escapes in every string, a parameter
named with a newline), ``flood`` (replies of millions of empty arrays), ``unsolicited``
(data frames and replies nobody asked for, then honest answers), ``silent`` (shakes hands,
then says nothing: a stopped ssh), ``stuck`` (beats but never answers), ``entries``
(tensor records no array can have). Every mode ends when its stdin ends.
"""

from __future__ import annotations

import struct
import sys
import threading
import time

import msgpack

HEADER = struct.Struct(">I")
DATA_FLAG = 1 << 31
ESCAPES = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]0;pwned\x07\x1b[2J"
CLIMB = "../../../../../../../../tmp/tvis-hostile/escaped"
PARAM = "w\nimport os; os.system('touch /tmp/tvis-hostile-pasted')\n#"
ENTRIES = {
    1: {"dtype": "|O", "shape": [4]},
    2: {"dtype": "<f4", "shape": [2**40, 2**40]},
    3: {"dtype": "<f4", "shape": "abc"},
    4: {"dtype": "<f4", "shape": [2**31, 2**31, 2**31]},
}

out = sys.stdout.buffer
lock = threading.Lock()


def send(obj: dict) -> None:
    body = msgpack.packb(obj, use_bin_type=True)
    with lock:
        out.write(HEADER.pack(len(body)) + body)
        out.flush()


def send_raw(data: bytes) -> None:
    with lock:
        out.write(data)
        out.flush()


def requests():
    stdin = sys.stdin.buffer
    while True:
        head = stdin.read(4)
        if len(head) < 4:
            return
        yield msgpack.unpackb(stdin.read(HEADER.unpack(head)[0]), raw=False)


def hello(rid: int) -> None:
    send(
        {
            "id": rid,
            "result": {
                "protocol": 1,
                "version": "0",
                "host": "hostile",
                "runs": 1,
                "heartbeat": 0.5,
            },
        }
    )


def run_row(mode: str) -> dict:
    return {
        "run": "r",
        "run_id": CLIMB + ESCAPES,
        "status": "complete" + ESCAPES,
        "script": ESCAPES + "train.py",
        "steps": 1,
        "batches": 1,
        "calls": 1,
        "bytes": 8,
    }


def names(rid: int, method: str, params: dict) -> None:
    if method == "runs":
        send({"id": rid, "result": [run_row("names")]})
    elif method == "run":
        send(
            {
                "id": rid,
                "result": {
                    **run_row("names"),
                    "batches": [{"index": 0}],
                    "steps": [{"index": 0}],
                    "params": [{"name": PARAM}],
                },
            }
        )
    elif method == "read":
        size = params["length"]
        send_raw(HEADER.pack(DATA_FLAG | size) + struct.pack(">Q", rid) + b"\1" * size)
    else:
        send({"id": rid, "error": "no", "status": 404})


def flood(rid: int, method: str, params: dict) -> None:
    # 16 lists of a million empty arrays: 16 MiB of msgpack, ~1.1 GB as Python lists.
    inner = b"\xdd" + struct.pack(">I", 1 << 20) + b"\x90" * (1 << 20)
    result = b"\xdc" + struct.pack(">H", 16) + inner * 16
    body = b"\x82\xa2id" + msgpack.packb(rid) + b"\xa6result" + result
    send_raw(HEADER.pack(len(body)) + body)


def unsolicited(rid: int, method: str, params: dict) -> None:
    size = 60 << 20
    send_raw(HEADER.pack(DATA_FLAG | size) + struct.pack(">Q", 999_999))
    chunk = b"\xee" * (1 << 20)
    for _ in range(size >> 20):
        send_raw(chunk)
    send({"id": 999_998, "result": b"\xee" * (16 << 20)})
    send({"id": rid, "result": []})


def entries(rid: int, method: str, params: dict) -> None:
    if method == "runs":
        send({"id": rid, "result": [{"run": "r", "run_id": "r", "status": "complete"}]})
    elif method == "run":
        send({"id": rid, "result": {"run": "r", "run_id": "r", "batches": [{"index": 0}]}})
    elif method == "tensor":
        value = ENTRIES[params["tensor"]]
        send({"id": rid, "result": {"id": params["tensor"], "value": {**value, "nbytes": 16}}})
    else:
        send({"id": rid, "error": "no", "status": 404})


def beat_forever() -> None:
    while True:
        send({"id": None, "alive": True})
        time.sleep(0.5)


def main(mode: str) -> None:
    beating = False
    for request in requests():
        rid, method, params = request["id"], request["method"], request.get("params") or {}
        if method == "hello":
            hello(rid)
        elif mode == "silent":
            continue
        elif mode == "stuck":
            if not beating:
                beating = True
                threading.Thread(target=beat_forever, daemon=True).start()
        else:
            {"names": names, "flood": flood, "unsolicited": unsolicited, "entries": entries}[mode](
                rid, method, params
            )


if __name__ == "__main__":
    main(sys.argv[1])
