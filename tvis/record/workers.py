"""DataLoader workers emulated in the main process, exactly as torch would run them.

tvis fetches batches in the process it records, yet a worker's data pipeline must see
what it would see in its own process: its own ``torch``/``numpy``/``random`` streams
seeded from the iterator's base seed (``torch/utils/data/_utils/worker.py``), its
``worker_init_fn``, ``get_worker_info()``, its own copy of the dataset (a fork), its
own ``IterableDataset`` iterator, one intra-op thread, and the batches torch would give
it (round robin, ``prefetch_factor`` batches ahead). Each fetch swaps that worker's state
in and out, so the batches, and every random number the training draws, are
bit-identical to a run with real workers.

Where torch's own order is not deterministic (``in_order=False``; which worker gets a
batch after an ``IterableDataset`` shard runs out early), batches come in the order
torch gives when every worker is equally fast.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import random
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import _DatasetKind
from torch.utils.data import _utils as data_utils
from torch.utils.data import dataloader as dl
from torch.utils.data._utils import worker as worker_module

# Random generators a dataset may hold as attributes: a forked worker gets its own copy
# of each, in the state it had when the workers started.
_GENERATORS = (random.Random, np.random.Generator, np.random.RandomState, torch.Generator)


def can_emulate(loader: dl.DataLoader) -> bool:
    """DataPipes shard through their own worker hooks; everything else is emulated."""
    from torch.utils.data import IterDataPipe, MapDataPipe

    return not isinstance(loader.dataset, (IterDataPipe, MapDataPipe))


class EmulatedWorker:
    """One DataLoader worker: its random streams, dataset copy, info and fetcher."""

    def __init__(self, worker_id: int, num_workers: int, base_seed: int, dataset) -> None:
        seed = base_seed + worker_id
        self.dataset = _forked_copy(dataset)
        self.info = worker_module.WorkerInfo(
            id=worker_id, num_workers=num_workers, seed=seed, dataset=self.dataset
        )
        generator = torch.Generator()
        generator.manual_seed(seed)
        self.torch_state = generator.get_state()
        self.random_state = random.Random(seed).getstate()
        numpy_seed = worker_module._generate_state(base_seed, worker_id)
        self.numpy_state = np.random.RandomState(numpy_seed).get_state()
        self.fetcher: Any = None
        self.failure: BaseException | None = None  # worker_init_fn's, raised at 1st batch
        self.exhausted = False

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """This worker's state in place of the main process's, for one stretch of work."""
        saved = (
            torch.default_generator.get_state(),
            random.getstate(),
            np.random.get_state(),
            worker_module._worker_info,
            torch.get_num_threads(),
            torch.is_grad_enabled(),
        )
        torch.default_generator.set_state(self.torch_state)
        random.setstate(self.random_state)
        np.random.set_state(self.numpy_state)
        worker_module._worker_info = self.info
        if saved[4] != 1:
            torch.set_num_threads(1)  # a worker runs one intra-op thread
        torch.set_grad_enabled(True)  # a fresh process starts with grad mode on
        try:
            yield
        finally:
            self.torch_state = torch.default_generator.get_state()
            self.random_state = random.getstate()
            self.numpy_state = np.random.get_state()
            torch.default_generator.set_state(saved[0])
            random.setstate(saved[1])
            np.random.set_state(saved[2])
            worker_module._worker_info = saved[3]
            if saved[4] != 1:
                torch.set_num_threads(saved[4])
            torch.set_grad_enabled(saved[5])

    def start(self, loader_iter: WorkerEmulatingIter, init_fn: Callable | None) -> None:
        """What a worker process does before its first batch."""
        with self.running():
            try:
                if init_fn is not None:
                    init_fn(self.info.id)
                self.new_fetcher(loader_iter)
            except Exception as e:
                self.failure = e

    def new_fetcher(self, loader_iter: WorkerEmulatingIter) -> None:
        """A fresh fetcher (an ``IterableDataset`` starts over): call inside ``running``."""
        self.fetcher = _DatasetKind.create_fetcher(
            loader_iter._dataset_kind,
            self.dataset,
            loader_iter._auto_collation,
            loader_iter._collate_fn,
            loader_iter._drop_last,
        )

    def fetch(self, index):
        with self.running():
            if self.failure is not None:
                failure, self.failure = self.failure, None
                raise failure
            return self.fetcher.fetch(index)


class WorkerEmulatingIter(dl._BaseDataLoaderIter):
    """A DataLoader iterator that runs its workers' fetches in this process.

    It mirrors ``_MultiProcessingDataLoaderIter``: the same draws from the main random
    streams at the same moments (base seed, sampler), the same batches per worker.
    ``unobserved`` is a context manager under which tvis looks away (batches torch would
    fetch ahead and then drop when a persistent iterator restarts).
    """

    def __init__(self, loader: dl.DataLoader, unobserved: Callable) -> None:
        super().__init__(loader)
        self._unobserved = unobserved
        self._prefetch = loader.prefetch_factor or 2
        self._tasks: deque[tuple[int, Any]] = deque()
        self._task_worker = 0
        self._workers = [
            EmulatedWorker(i, self._num_workers, self._base_seed, self._dataset)
            for i in range(self._num_workers)
        ]
        with self._unobserved():
            for worker in self._workers:
                worker.start(self, loader.worker_init_fn)
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter: bool = False) -> None:
        super()._reset(loader, first_iter)
        if not first_iter:
            # A persistent worker fetches what it was sent before it restarts.
            with self._unobserved():
                self._drain()
                for worker in self._workers:
                    worker.exhausted = False
                    with worker.running():
                        worker.new_fetcher(self)
        self._cycle = itertools.cycle(range(self._num_workers))
        self._tasks.clear()
        for _ in range(self._prefetch * self._num_workers):
            self._dispatch()

    def _drain(self) -> None:
        for worker_id, index in self._tasks:
            worker = self._workers[worker_id]
            if worker.exhausted:
                continue
            try:
                worker.fetch(index)
            except StopIteration:
                worker.exhausted = self._dataset_kind == _DatasetKind.Iterable
            except Exception:
                pass  # torch drops the results (and errors) of a finished epoch

    def _dispatch(self) -> None:
        """Hand the sampler's next index to the next worker still producing (round robin)."""
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._cycle)
            if not self._workers[worker_id].exhausted:
                self._tasks.append((worker_id, index))
                return

    def _next_index(self):
        while self._tasks:
            worker_id, index = self._tasks.popleft()
            if not self._workers[worker_id].exhausted:
                self._task_worker = worker_id
                return index
        raise StopIteration

    def _next_data(self):
        while True:
            index = self._next_index()  # may raise StopIteration: the epoch is over
            worker = self._workers[self._task_worker]
            try:
                data = worker.fetch(index)
            except StopIteration:
                if self._dataset_kind != _DatasetKind.Iterable:
                    raise
                worker.exhausted = True
                self._dispatch()
                continue
            except BaseException:
                self._dispatch()
                raise
            self._dispatch()
            if self._pin_memory:
                data = data_utils.pin_memory.pin_memory(data, self._pin_memory_device)
            return data


def _forked_copy(dataset):
    """The dataset as a forked worker holds it: its own attributes (``worker_init_fn``
    often narrows ``info.dataset.start``/``end``) and its own random generators."""
    try:
        twin = copy.copy(dataset)
        attributes = vars(twin)
    except Exception:
        return dataset
    for name, value in list(attributes.items()):
        if isinstance(value, _GENERATORS):
            attributes[name] = copy.deepcopy(value)
    return twin
