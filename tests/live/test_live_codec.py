"""The value encoding on its own: what a snapshot holds, and what survives the trip as bytes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tvis.live import codec
from tvis.live.session import to_session
from tvis.live.tensors import HostBuffers
from tvis.live.wire import FrameError


def roundtrip(obj):
    """``obj`` through snapshot, encode, the payload bytes, decode and the session view."""
    snap, _ = codec.snapshot(obj, HostBuffers())
    node, buffers = codec.encode(snap)
    payload = np.frombuffer(b"".join(bytes(b) for b in buffers), dtype=np.uint8).copy()
    return to_session(codec.decode(node, payload))


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.arange(12.0).reshape(3, 4).t(),
        lambda: torch.arange(60.0).reshape(3, 4, 5)[:, ::2, 1::2],
        lambda: torch.arange(24).reshape(2, 3, 4).permute(2, 0, 1),
        lambda: torch.arange(10.0).expand(3, 10),
        lambda: torch.tensor(2.5),
        lambda: torch.empty(0, 3),
        lambda: torch.randn(5, 7).to(torch.bfloat16).t(),
        lambda: torch.randn(4, 4).half(),
        lambda: torch.randint(-100, 100, (6,), dtype=torch.int8),
        lambda: torch.randint(0, 2**40, (3, 2), dtype=torch.int64),
        lambda: torch.rand(3, 3) > 0.5,
        lambda: torch.randn(3, 2, dtype=torch.complex64).conj(),
        lambda: torch.randn(4, 3, dtype=torch.float64),
    ],
    ids=[
        "transposed",
        "strided",
        "permuted-int",
        "expanded",
        "0-d",
        "empty",
        "bf16-transposed",
        "fp16",
        "int8",
        "int64",
        "bool",
        "complex-conj",
        "float64",
    ],
)
def test_tensor_values_dtypes_and_shapes_survive_any_strides(make):
    tensor = make()
    back = roundtrip(tensor)
    assert back.dtype == tensor.dtype
    assert back.shape == tensor.shape
    assert torch.equal(back, tensor.resolve_conj())


def test_parameter_arrives_as_plain_tensor_with_its_values():
    weight = torch.nn.Linear(4, 3).weight
    back = roundtrip(weight)
    assert type(back) is torch.Tensor and not back.requires_grad
    assert torch.equal(back, weight.detach())


def test_snapshot_is_a_copy_untouched_by_later_in_place_changes():
    weight = torch.zeros(3, 3)
    snap, nbytes = codec.snapshot(weight, HostBuffers())
    weight.add_(1)
    assert nbytes == 36
    assert torch.equal(snap, torch.zeros(3, 3))


def test_snapshot_leaves_autograd_and_the_original_alone():
    x = torch.randn(3, requires_grad=True)
    y = x * 2
    snap, _ = codec.snapshot(y, HostBuffers())
    assert not snap.requires_grad and snap.grad_fn is None
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4).T,
        np.arange(20, dtype=">f8").reshape(4, 5)[::2],
        np.array([[True, False]]),
        np.arange(6, dtype=np.uint16),
    ],
    ids=["transposed", "big-endian-strided", "bool", "uint16"],
)
def test_numpy_arrays_come_back_as_equal_numpy_arrays(array):
    back = roundtrip(array)
    assert isinstance(back, np.ndarray)
    np.testing.assert_array_equal(back, array)
    assert back.dtype == array.dtype.newbyteorder("=")


def test_numbers_and_strings_come_back_as_themselves():
    values = [0, -(2**63), 2**64 - 1, 2**70, -(2**70), 1.5, float("nan"), True, None, 2 - 3j]
    values += ["", "loss went up", "ünïcødé ✓"]
    for value in values:
        back = roundtrip(value)
        assert type(back) is type(value)
        assert back == value or (value != value and back != back)


def test_numpy_scalars_come_back_as_python_numbers():
    assert roundtrip(np.float32(0.5)) == 0.5
    assert roundtrip(np.int64(7)) == 7


def test_nested_lists_tuples_and_dicts_keep_their_structure():
    tree = {
        "logits": torch.randn(2, 3).t(),
        "targets": [torch.tensor([1, 2]), np.arange(3)],
        "meta": ("step", 40_000, {"lr": 1e-3, 7: None}),
    }
    back = roundtrip(tree)
    assert list(back) == ["logits", "targets", "meta"]
    assert torch.equal(back["logits"], tree["logits"])
    assert torch.equal(back["targets"][0], tree["targets"][0])
    np.testing.assert_array_equal(back["targets"][1], tree["targets"][1])
    assert back["meta"] == ("step", 40_000, {"lr": 1e-3, 7: None})


def test_unsupported_values_arrive_as_a_note_saying_why():
    back = roundtrip({"ok": 1, "odd": object(), "f8": torch.zeros(2, dtype=torch.float8_e4m3fn)})
    assert back["ok"] == 1
    assert back["odd"] == "<not sent: object is not a tensor, array, number or string>"
    assert back["f8"] == "<not sent: float8_e4m3fn tensors are not supported>"


def test_nesting_beyond_the_bound_is_cut_with_a_note():
    deep: list = []
    for _ in range(codec.MAX_DEPTH + 5):
        deep = [deep]
    back = roundtrip(deep)
    for _ in range(codec.MAX_DEPTH):
        back = back[0]
    assert back == f"<not sent: nested deeper than {codec.MAX_DEPTH} levels>"


def test_bfloat16_without_torch_is_exact_float32(monkeypatch):
    from tvis.live import tensors

    tensor = torch.randn(5, 3).to(torch.bfloat16)
    monkeypatch.setattr(tensors, "torch_available", lambda: False)
    back = roundtrip(tensor)
    assert isinstance(back, np.ndarray) and back.dtype == np.float32
    np.testing.assert_array_equal(back, tensor.float().numpy())


@pytest.mark.parametrize(
    ("node", "payload_len"),
    [
        ({"kind": "tensor", "dtype": "object", "shape": [1]}, 8),
        ({"kind": "tensor", "dtype": "float32", "shape": [2, 2]}, 8),
        ({"kind": "tensor", "dtype": "float32", "shape": [1]}, 8),
        ({"kind": "tensor", "dtype": "float32", "shape": [-1]}, 0),
        ({"kind": "tensor", "dtype": "float32", "shape": "3"}, 12),
        ({"kind": "str", "nbytes": 10}, 4),
        ({"kind": "scalar", "dtype": "int", "value": "12abc"}, 0),
        ({"kind": "scalar", "dtype": "float", "value": "1.0"}, 0),
        ({"kind": "tree", "container": "set", "items": []}, 0),
        ({"kind": "tree", "container": "dict", "items": [], "keys": [[1]]}, 0),
        ({"kind": "pickle", "data": b"cos\nsystem\n"}, 0),
    ],
    ids=[
        "unknown-dtype",
        "shape-beyond-payload",
        "payload-beyond-leaves",
        "negative-size",
        "shape-not-a-list",
        "string-beyond-payload",
        "int-not-digits",
        "float-as-string",
        "unknown-container",
        "keys-mismatch",
        "unknown-kind",
    ],
)
def test_malformed_nodes_are_refused(node, payload_len):
    with pytest.raises(FrameError):
        codec.decode(node, np.zeros(payload_len, dtype=np.uint8))


def test_large_snapshot_memory_is_reused_once_handed_back():
    buffers = HostBuffers()
    first, _ = codec.snapshot(torch.ones(512, 1024), buffers)
    pointer = first.data_ptr()
    codec.release(first, buffers)
    del first
    second, _ = codec.snapshot(torch.arange(512 * 1024.0).reshape(512, 1024), buffers)
    assert second.data_ptr() == pointer
    assert torch.equal(second, torch.arange(512 * 1024.0).reshape(512, 1024))
