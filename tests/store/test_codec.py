"""The parameter-value codec is lossless for every dtype a run stores."""

from __future__ import annotations

import numpy as np
import pytest
import zstandard

from tvis.store import codec


@pytest.mark.parametrize("dtype", ["<f4", "<f8", "<f2", "<c8", "<c16", "<i8", "|u1"])
def test_roundtrip_is_bit_exact_for_dtype(dtype):
    rng = np.random.default_rng(0)
    values = (rng.standard_normal(1000) * 100).astype(dtype).reshape(10, 100)
    encoded = codec.encode(values)
    decoded = codec.decode(encoded.payload, encoded.dtype, encoded.shape, crc32=encoded.crc32)
    assert decoded.dtype == values.dtype and decoded.shape == values.shape
    assert decoded.tobytes() == values.tobytes()


def test_xor_delta_against_base_roundtrips_and_is_small_when_little_changed():
    rng = np.random.default_rng(1)
    before = (rng.standard_normal(1 << 16) * 0.02).astype(np.float32)
    after = before - np.float32(1e-4) * np.sign(before)
    after[[3, 5]] = [np.nan, -np.inf]  # non-finite values survive bit for bit
    delta = codec.encode(after, before)
    decoded = codec.decode(delta.payload, delta.dtype, delta.shape, before, delta.crc32)
    assert decoded.tobytes() == after.tobytes()
    assert delta.nbytes < codec.encode(after).nbytes
    unchanged = codec.encode(before, before)
    assert unchanged.nbytes < 100


@pytest.mark.parametrize("shape", [(1,), (1, 1), ()])
def test_xor_delta_of_a_one_element_array_roundtrips(shape):
    base = np.full(shape, 0.5, np.float32)
    array = np.full(shape, 0.25, np.float32)
    decoded = codec.decode(codec.encode(array, base).payload, np.float32, shape, base)
    np.testing.assert_array_equal(decoded, array)


def test_corrupt_payload_or_wrong_base_is_a_value_error():
    values = np.arange(64, dtype=np.float32)
    encoded = codec.encode(values, values * 2)
    with pytest.raises(ValueError, match="checksum"):
        codec.decode(encoded.payload, encoded.dtype, encoded.shape, values * 3, encoded.crc32)
    with pytest.raises(ValueError, match="corrupt"):
        codec.decode(b"not zstd at all", encoded.dtype, encoded.shape, None, encoded.crc32)


def test_payload_is_the_byte_planes_compressed_as_the_format_says():
    values = np.random.default_rng(2).standard_normal(4096).astype(np.float32)
    planes = values.view(np.uint8).reshape(-1, 4).T.tobytes()  # every first byte, then ...
    expected = zstandard.ZstdCompressor(level=codec.LEVEL).compress(planes)
    assert codec.encode(values).payload == expected
