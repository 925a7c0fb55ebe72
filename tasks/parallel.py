"""Rollout jobs as Prefect tasks on Prefect's Ray task runner (prefect-ray), when
``parallel.engine: ray``.

Each job is one ``rollout_batch`` task run: Prefect records it under the flow run, Ray places it
on a worker (a local Ray the run starts, or a cluster at ``parallel.address``). A worker builds
its own engine on the job's weights, loaded from disk by their content id, and returns the
rollouts; the run's process stores them, in the order the jobs were asked for.
"""
from __future__ import annotations

from prefect import get_client, task
from prefect.cache_policies import NONE
from prefect.settings import PREFECT_API_URL, temporary_settings

from whale.run.jobs import RolloutJob, execute
from whale.run.sections import ParallelSettings
from whale.types import Rollout


@task(cache_policy=NONE, task_run_name="rollout_batch-{job.desc}")
def rollout_batch(job: RolloutJob) -> list[Rollout]:
    """Roll ``job`` out in this worker (its engine is kept for the next job on the same weights)."""
    return execute(job)


class RayDispatch:
    """Runs a list of rollout jobs at once on Ray; the run's ``dispatch`` under ``engine: ray``."""

    remote = True

    def __init__(self, settings: ParallelSettings):
        try:
            from prefect_ray import RayTaskRunner
        except ImportError:
            raise RuntimeError("parallel.engine: ray needs prefect-ray and ray: pip install -e '.[ray]'") from None

        self.workers = settings.workers
        self.options = {"num_cpus": settings.cpus_per_job, "num_gpus": settings.gpus_per_job}
        init = {}
        if settings.address is None:  # a local Ray sized for the jobs of one dispatch
            init = {"num_cpus": max(1, round(settings.workers * settings.cpus_per_job)), "include_dashboard": False}
        self.runner = RayTaskRunner(address=settings.address, init_kwargs=init)
        self.runner.__enter__()
        # Workers record their task runs with the run's Prefect API. Without one set, each worker
        # would start a temporary server of its own, so the run's (temporary or not) is named.
        with get_client(sync_client=True) as client:
            self.api_url = str(client.api_url)

    def __call__(self, jobs: list[RolloutJob]) -> list[list[Rollout] | BaseException]:
        """Every job's result, or the exception it failed with (the others are still returned, so
        their rollouts are stored before the run stops)."""
        from prefect_ray.context import remote_options

        with remote_options(**self.options), temporary_settings({PREFECT_API_URL: self.api_url}):
            futures = [self.runner.submit(rollout_batch, {"job": job}) for job in jobs]
        out: list[list[Rollout] | BaseException] = []
        for job, future in zip(jobs, futures, strict=True):
            try:
                out.append(future.result())
            except Exception as e:  # noqa: BLE001  (reported with the job it belongs to)
                out.append(RuntimeError(f"rollout job {job.desc!r} failed on Ray: {type(e).__name__}: {e}"))
        return out

    def close(self) -> None:
        self.runner.__exit__(None, None, None)
