"""Framing and array encoding."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

from tvis.agent.protocol import (
    HEADER,
    MAX_REPLY_FRAME,
    FrameTooLarge,
    Truncated,
    decode,
    encode,
    frame,
    read_frame,
    reply_body,
    skip,
)


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.arange(6, dtype=np.int64),
        np.array([True, False]),
        np.array(3.5, dtype=np.float64),
        np.zeros((0, 5), dtype=np.float16),
        np.arange(8, dtype=">f4"),
        np.arange(20, dtype=np.uint8).reshape(4, 5)[:, ::2],
    ],
    ids=["f32", "i64", "bool", "0d", "empty", "big-endian", "strided"],
)
def test_array_round_trip_keeps_values_dtype_kind_and_shape(array):
    back = decode(encode({"a": array}))["a"]
    assert isinstance(back, np.ndarray)
    assert back.shape == array.shape
    assert back.dtype.kind == array.dtype.kind and back.dtype.itemsize == array.dtype.itemsize
    np.testing.assert_array_equal(back, array)


def test_array_travels_as_bin_not_as_a_list_of_numbers():
    body = encode({"a": np.arange(1000, dtype=np.float32)})
    raw = decode(body, arrays=False)["a"]
    assert raw["__nd__"] == 1 and raw["dtype"] == "<f4" and isinstance(raw["data"], bytes)
    assert len(body) < 4100


def test_nan_and_inf_survive_the_wire():
    back = decode(encode({"x": float("nan"), "y": [float("inf"), -float("inf")]}))
    assert math.isnan(back["x"]) and back["y"] == [math.inf, -math.inf]


def test_numpy_scalars_and_tuples_encode_as_plain_values():
    back = decode(encode({"n": np.float32(1.5), "i": np.int64(3), "t": (1, 2)}))
    assert back == {"n": 1.5, "i": 3, "t": [1, 2]}
    assert type(back["i"]) is int


def test_read_frame_returns_none_at_a_clean_end():
    assert read_frame(io.BytesIO(b""), 100) is None


def test_read_frame_refuses_a_length_above_the_limit_without_reading_it():
    stream = io.BytesIO(HEADER.pack(0xFFFFFFFF) + b"rest")
    with pytest.raises(FrameTooLarge) as e:
        read_frame(stream, 1 << 20)
    assert e.value.size == 0xFFFFFFFF
    assert stream.read() == b"rest"


def test_read_frame_reports_a_frame_cut_short():
    with pytest.raises(Truncated):
        read_frame(io.BytesIO(frame(b"abcdef")[:-2]), 100)
    with pytest.raises(Truncated):
        read_frame(io.BytesIO(b"\x00\x00"), 100)


def test_skip_discards_exactly_the_declared_bytes():
    stream = io.BytesIO(b"x" * 10 + frame(b"next"))
    assert skip(stream, 10, chunk=3)
    assert read_frame(stream, 100) == b"next"
    assert not skip(io.BytesIO(b"short"), 10)


def test_reply_body_turns_an_oversized_reply_into_an_error_with_its_id():
    big = np.zeros(MAX_REPLY_FRAME // 4 + 1, dtype=np.float32)
    reply = decode(reply_body({"id": 7, "result": big}))
    assert reply["id"] == 7 and reply["status"] == 500 and "ask for less" in reply["error"]


def test_reply_body_turns_an_unencodable_result_into_an_error():
    reply = decode(reply_body({"id": 3, "result": object()}))
    assert reply["id"] == 3 and reply["status"] == 500
