"""Writes batches on a background thread so the training loop does not wait on disk.

The queue is bounded: if the disk is slower than training, the recorder waits rather than
holding an unbounded number of batches in memory.
"""

from __future__ import annotations

import math
import queue
import threading

import msgpack

from tvis.record import builder, params
from tvis.store import atomic
from tvis.store.format import RUN_INDEX
from tvis.store.writer import RunWriter

# Batches in flight between the recorder and the disk; each holds its kept values.
QUEUE_DEPTH = 4


class BackgroundWriter:
    """A RunWriter driven from a queue on its own thread."""

    def __init__(self, writer: RunWriter) -> None:
        self.writer = writer
        self.bytes_queued = 0  # values handed over so far (for the run's byte budget)
        self.param_bytes = 0  # encoded parameter values written (weight, grad, Δw)
        # For the run's anomaly summary: (batch, its "anomalies" map), (step, grad norm).
        self.origins: list[tuple[int, dict]] = []
        self.grad_norms: list[tuple[int, float]] = []
        self.errors: list[str] = []
        self._queue: queue.Queue = queue.Queue(QUEUE_DEPTH)
        self._thread = threading.Thread(target=self._drain, name="tvis-writer", daemon=True)
        self._thread.start()

    def put_batch(self, index: int, record: dict, arrays: dict, pending: list) -> None:
        """Queue a batch; its ``pending`` statistics are computed here (``builder.settle``)."""
        self._put(builder.settle, self.writer.write_batch, index, record, arrays, pending)

    def put_step(self, index: int, record: dict, jobs: list, raw_bytes: int) -> None:
        """Queue a step; its values are derived and encoded here (``params.settle``), and
        the byte count corrected from ``raw_bytes`` to what the encoding took."""
        self.bytes_queued += raw_bytes
        self._queue.put((self._settle_step, (index, record, jobs, raw_bytes)))

    def _settle_step(self, index: int, record: dict, jobs: list, raw_bytes: int) -> None:
        arrays, failed = params.settle(record, jobs)
        jobs.clear()  # the host copies go as soon as they are encoded
        if failed:
            self.errors.append(f"statistics of {failed} parameters could not be computed")
        norms = [p["norms"]["grad"] for p in record["params"] if p["norms"]["grad"] is not None]
        if norms:
            self.grad_norms.append((index, math.sqrt(sum(n * n for n in norms))))
        encoded = sum(a.nbytes for a in arrays.values())
        self.bytes_queued += encoded - raw_bytes
        self.param_bytes += encoded
        self.writer.write_step(index, record, arrays)

    def _put(self, settle, write, index: int, record: dict, arrays: dict, pending: list) -> None:
        self.bytes_queued += sum(a.nbytes for a in arrays.values())
        job = (settle, write, index, record, arrays, pending)
        self._queue.put((self._settle_and_write, job))

    def _settle_and_write(self, settle, write, index, record, arrays, pending) -> None:
        failed = settle(record, pending)
        if failed:
            self.errors.append(f"statistics of {failed} tensors could not be computed")
        if record.get("anomalies"):
            self.origins.append((index, record["anomalies"]))
        write(index, record, arrays)

    def put_index(self, index: dict) -> None:
        # Packed now: the recorder keeps mutating its lists after handing them over.
        data = msgpack.packb(index, use_bin_type=True)
        self._queue.put((self._write_index_bytes, (data,)))

    def _write_index_bytes(self, data: bytes) -> None:
        atomic.write_bytes(self.writer.path / RUN_INDEX, data)

    def close(self) -> None:
        """Write everything queued and stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception as e:  # a full disk must not kill the training process
                self.errors.append(f"{type(e).__name__}: {e}")
