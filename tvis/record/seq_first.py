"""Sequence-first models (pytorch/examples' word_language_model, nn.LSTM and
nn.Transformer code with ``batch_first=False``): their input is ``[T, B, ...]``, so the
batch size is dim 1, not dim 0.

The batch size is first taken from dim 0 of the model's input. When a recurrent or
attention module that reads dim 1 as the batch is entered, and the model's own input has
that same size in dim 1 (and, for a recurrent module, its hidden state agrees), the batch
is sequence-first: ``B`` samples of ``T`` time steps. A batch-first model that transposes
before such a module (DETR: an image ``[B, C, H, W]``) gives that module the same ``B``
and changes nothing."""

from __future__ import annotations

import torch


def module_batch(module: torch.nn.Module, args: tuple) -> int | None:
    """The batch size a sequence-first module reads from ``args`` (dim 1 of its input),
    or None when the module is batch-first or the call says nothing sure."""
    first = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if first is None or first.dim() != 3:  # unbatched [T, H] inputs say nothing
        return None
    if isinstance(module, torch.nn.RNNBase) and not module.batch_first:
        hidden = args[1] if len(args) > 1 else None
        if isinstance(hidden, (tuple, list)) and hidden:
            hidden = hidden[0]
        # The hidden state [layers, B, H] confirms the batch the input's dim 1 holds.
        if isinstance(hidden, torch.Tensor) and hidden.dim() == 3:
            if hidden.shape[1] == first.shape[1]:
                return int(first.shape[1])
        return None
    if isinstance(module, torch.nn.MultiheadAttention) and not module.batch_first:
        return int(first.shape[1])
    return None


def settle(batch, module: torch.nn.Module, args: tuple) -> None:
    """Make ``batch`` sequence-first when ``module`` reads a batch of another size than
    dim 0 of the model's input and that input holds it in dim 1 (``[T, B, ...]``)."""
    shape = batch.input_shape
    if batch.seq_len is not None or shape is None or len(shape) not in (2, 3):
        return
    size = module_batch(module, args)
    if size is None or size == batch.batch_size or shape[1] != size:
        return
    batch.seq_len = int(shape[0])
    batch.rebatch(size)


def sample_order(batch, n: int) -> torch.Tensor | None:
    """For ``n`` time-major rows of a sequence-first batch (row ``t*B + b``, what
    ``output.view(-1, V)`` of a ``[T, B, V]`` output gives): the row indices that put
    each sample's own rows together (``b*T + t``). None when the rows are not that."""
    steps, size = batch.seq_len, batch.batch_size
    if steps is None or not size or size == 1 or n != steps * size:
        return None
    return torch.arange(n).view(steps, size).t().reshape(-1)
