"""Training batches drawn `train.sample_chunk` steps at a time.

    stream = BatchStream(sampler, generator, batch_size=512, chunk=8)
    batch = stream.next()        # one step's batch

One sampler call draws chunk * batch_size sequences and the next `chunk` steps take
consecutive slices (fewer kernel launches on a GPU). On the CPU the chunked stream is the
chunk = 1 stream bit for bit (tested); on CUDA another stream of the same distribution.
Checkpoints fall on chunk boundaries, so a resumed run draws what an uninterrupted one draws.
"""

from __future__ import annotations

import torch

from empirical.task.assign_add.draw import TrainingSampler
from empirical.task.batch import Batch


class BatchStream:
    def __init__(
        self, sampler: TrainingSampler, generator: torch.Generator, batch_size: int, chunk: int = 1
    ):
        if chunk < 1:
            raise ValueError(f"chunk = {chunk} must be >= 1")
        self.sampler, self.generator = sampler, generator
        self.batch_size, self.chunk = batch_size, chunk
        self._buffer: Batch | None = None
        self._used = chunk

    def next(self) -> Batch:
        if self._used == self.chunk:
            self._buffer = self.sampler.sample(self.batch_size * self.chunk, self.generator)
            self._used = 0
        i = self._used
        self._used += 1
        if self.chunk == 1:
            return self._buffer
        return self._buffer.slice(i * self.batch_size, (i + 1) * self.batch_size)
