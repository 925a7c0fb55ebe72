"""The request batcher of ``whale serve``: requests that arrive close together share one backend call."""
from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import astuple

from whale.rollout.backends.base import GenRequest, Sampling
from whale.rollout.backends.hf import TransformersBackend


class Batcher:
    """A queue and one worker thread: close arrivals share one ``backend.generate`` call."""

    def __init__(self, backend: TransformersBackend, max_batch: int, window_s: float):
        self.backend, self.max_batch, self.window_s = backend, max_batch, window_s
        self.jobs: queue.Queue = queue.Queue()
        self.lock = threading.Lock()  # a weight swap never lands in the middle of a batch
        self.calls = 0  # backend.generate calls so far (tests check that arrivals were batched)
        self.worker = threading.Thread(target=self._loop, name="whale-batcher", daemon=True)
        self.worker.start()

    def submit(self, requests: list[GenRequest], sampling: Sampling) -> list[tuple]:
        """(GenResult, weights id that produced it) per request, once generated."""
        futures = [Future() for _ in requests]
        for req, fut in zip(requests, futures, strict=False):
            self.jobs.put((req, sampling, fut))
        return [f.result() for f in futures]

    def close(self) -> None:
        self.jobs.put(None)
        self.worker.join(timeout=30)

    def _collect(self) -> list | None:
        first = self.jobs.get()
        if first is None:
            return None
        jobs = [first]
        while len(jobs) < self.max_batch:
            try:
                job = self.jobs.get(timeout=self.window_s)
            except queue.Empty:
                break
            if job is None:  # shut down after this batch
                self.jobs.put(None)
                break
            jobs.append(job)
        return jobs

    def _loop(self) -> None:
        while (jobs := self._collect()) is not None:
            groups: dict[tuple, list] = {}  # one backend call per distinct sampling
            for job in jobs:
                groups.setdefault(astuple(job[1]), []).append(job)
            with self.lock:
                for group in groups.values():
                    self.calls += 1
                    try:
                        results = self.backend.generate([j[0] for j in group], group[0][1])
                    except Exception as e:  # noqa: BLE001 - the error belongs to the waiting requests
                        for j in group:
                            j[2].set_exception(e)
                        continue
                    for j, res in zip(group, results, strict=False):
                        j[2].set_result((res, self.backend.weights_id))
