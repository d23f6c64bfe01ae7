"""Writes batches on a background thread so the training loop does not wait on disk.

The queue is bounded: if the disk is slower than training, the recorder waits rather than
holding an unbounded number of batches in memory. ``flush`` waits for everything queued:
the recorder calls it when an optimizer step ends, so a finished step is on disk before
the next one starts.

A full disk ends writing values, never the training: the first ``ENOSPC`` sets
``disk_full``, the half-written folder is removed, batches and steps that did not reach
the disk are left out of the run index, and the recorder keeps statistics only.
"""

from __future__ import annotations

import errno
import functools
import math
import queue
import threading

import msgpack

from tvis.record import builder, params, tensors
from tvis.store import atomic
from tvis.store.format import RUN_INDEX
from tvis.store.writer import RunWriter

# Batches in flight between the recorder and the disk; each holds its kept values.
QUEUE_DEPTH = 4

# Errors that mean the disk (or the user's quota) has no room left.
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


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
        self.disk_full: str | None = None  # the error of the first write that found no room
        self.batches_written = 0
        self.steps_written = 0
        self.written_after_full = 0  # batches and steps (statistics only) that fit after it
        self.lost_batches: set[int] = set()
        self.lost_steps: set[int] = set()
        self._queue: queue.Queue = queue.Queue(QUEUE_DEPTH)
        self._thread = threading.Thread(target=self._drain, name="tvis-writer", daemon=True)
        self._thread.start()

    def put_batch(self, index: int, record: dict, arrays: dict, pending: list) -> None:
        """Queue a batch; its ``pending`` statistics are computed here (``builder.settle``)."""
        self.bytes_queued += sum(a.nbytes for a in arrays.values())
        self._queue.put((self._settle_and_write, (index, record, arrays, pending)))

    def put_late_lines(self, index: int, record: dict, lines: list[dict]) -> None:
        """Lines that ran after batch ``index`` was written (``record``, as written): the
        ones it does not have join it, and its record is written again."""
        self._queue.put((self._add_lines, (index, record, lines)))

    def _add_lines(self, index: int, record: dict, lines: list[dict]) -> None:
        if index in self.lost_batches or self.disk_full:
            return
        known = {(line["file"], line["line"]) for line in record["lines"]}
        record["lines"] += [line for line in lines if (line["file"], line["line"]) not in known]
        self.writer.write_batch_record(index, record)

    def put_stats(self, pending: list) -> None:
        """Queue statistics put off by the recorder, ahead of their batch."""
        if pending:
            self._queue.put((self._fill, (pending,)))

    def _fill(self, pending: list) -> None:
        self._failed(tensors.fill(pending), "tensors")

    def put_step(self, index: int, record: dict, jobs: list, raw_bytes: int) -> None:
        """Queue a step; its values are derived and encoded here (``params.settle``), and
        the byte count corrected from ``raw_bytes`` to what the encoding took."""
        self.bytes_queued += raw_bytes
        self._queue.put((self._settle_step, (index, record, jobs, raw_bytes)))

    def _settle_step(self, index: int, record: dict, jobs: list, raw_bytes: int) -> None:
        arrays, failed = params.settle(record, jobs)
        jobs.clear()  # the host copies go as soon as they are encoded
        self._failed(failed, "parameters")
        norms = [p["norms"]["grad"] for p in record["params"] if p["norms"]["grad"] is not None]
        if norms:
            self.grad_norms.append((index, math.sqrt(sum(n * n for n in norms))))
        encoded = sum(a.nbytes for a in arrays.values())
        self.bytes_queued += encoded - raw_bytes
        self.param_bytes += encoded
        self._write(self.writer.write_step, self.lost_steps, index, record, arrays)

    def _settle_and_write(self, index: int, record: dict, arrays: dict, pending: list) -> None:
        self._failed(builder.settle(record, pending), "tensors")
        if record.get("anomalies"):
            self.origins.append((index, record["anomalies"]))
        write = functools.partial(
            self.writer.write_batch, handed_over=True
        )  # nothing reads it after
        self._write(write, self.lost_batches, index, record, arrays)

    def _write(self, write, lost: set, index: int, record: dict, arrays: dict) -> None:
        try:
            write(index, record, arrays)
        except BaseException:
            lost.add(index)
            raise
        if lost is self.lost_batches:
            self.batches_written += 1
        else:
            self.steps_written += 1
        if self.disk_full:
            self.written_after_full += 1

    def _failed(self, count: int, what: str) -> None:
        if count:
            self.errors.append(f"statistics of {count} {what} could not be computed")

    def put_index(self, index: dict) -> None:
        # Packed now: the recorder keeps mutating its lists after handing them over.
        data = msgpack.packb(index, use_bin_type=True)
        self._queue.put((self._write_index_bytes, (data,)))

    def _write_index_bytes(self, data: bytes) -> None:
        if self.lost_batches or self.lost_steps:
            data = msgpack.packb(self.without_lost(msgpack.unpackb(data)), use_bin_type=True)
        atomic.write_bytes(self.writer.path / RUN_INDEX, data)

    def without_lost(self, index: dict) -> dict:
        """The run index without the batches and steps that never reached the disk."""
        return {
            **index,
            "batches": [b for b in index["batches"] if b["index"] not in self.lost_batches],
            "steps": [s for s in index["steps"] if s["index"] not in self.lost_steps],
        }

    def flush(self) -> None:
        """Wait until everything queued so far is written (or has failed)."""
        self._queue.join()

    def close(self) -> None:
        """Write everything queued and stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                self._queue.task_done()
                return
            fn, args = item
            try:
                fn(*args)
            except OSError as e:  # a full disk must not kill the training process
                if e.errno in _NO_SPACE:
                    self.disk_full = self.disk_full or f"{e.strerror} ({e.filename or ''})"
                else:
                    self.errors.append(f"{type(e).__name__}: {e}")
            except Exception as e:
                self.errors.append(f"{type(e).__name__}: {e}")
            finally:
                self._queue.task_done()
