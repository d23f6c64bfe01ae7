"""The data pipeline: DataLoader workers moved in-process, each batch's fetch recorded."""

from __future__ import annotations

from torch.utils.data import dataloader as dl

from tvis.record.extension import Extension


class DataPipeline(Extension):
    """Patches the DataLoader so batches are fetched in this process, where tvis sees them."""

    def install(self, recorder) -> None:
        self.recorder = recorder
        self.moved: set[int] = set()
        original_iterator = dl.DataLoader._get_iterator
        original_next = dl._BaseDataLoaderIter.__next__
        recorder.patches.set(dl.DataLoader, "_get_iterator", self._iterator(original_iterator))
        recorder.patches.set(dl._BaseDataLoaderIter, "__next__", self._next(original_next))

    def _iterator(self, original):
        def get_iterator(loader):
            if loader.num_workers == 0:
                return original(loader)
            workers, timeout = loader.num_workers, loader.timeout
            if id(loader) not in self.moved:
                self.moved.add(id(loader))
                self.recorder.notice(
                    f"a DataLoader's {workers} workers run in the main process under tvis, "
                    "so the data pipeline can be recorded.",
                    level="info",
                )
            # The single-process iterator checks these two at construction only.
            loader.num_workers, loader.timeout = 0, 0
            try:
                return dl._SingleProcessDataLoaderIter(loader)
            finally:
                loader.num_workers, loader.timeout = workers, timeout

        return get_iterator

    def _next(self, original):
        recorder = self.recorder

        def next_batch(iterator):
            if recorder.stopped:
                recorder.stop_again()
            with recorder.work:
                try:
                    recorder.data_begin()
                    self._remember_dataset(iterator)
                except Exception as e:
                    recorder.guard("noting a DataLoader batch", e)
            start = recorder.clock()
            try:
                data = original(iterator)
            except BaseException:
                recorder.in_data = max(0, recorder.in_data - 1)
                raise
            with recorder.work:
                try:
                    seconds = recorder.work.started - recorder.overhead - start
                    recorder.data_end([("batch", data)], seconds)
                except Exception as e:
                    recorder.guard("recording a DataLoader batch", e)
            return data

        return next_batch

    def _remember_dataset(self, iterator) -> None:
        info = self.recorder.data_info
        classes = getattr(iterator._dataset, "classes", None)
        if classes is not None and "classes" not in info:
            try:
                info["classes"] = [str(c) for c in list(classes)[:100_000]]
            except TypeError:
                pass
