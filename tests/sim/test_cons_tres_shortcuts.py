"""The compares the simulator's hot path uses in cons_tres give exactly the counted answers
(kept beside the simulator's tests: they exist for its speed)."""
import numpy as np
import pytest

from slurm_advisor.domain import Job, Resources
from slurm_advisor.slurm.cons_tres import (
    _biggest,
    could_fit,
    fits_once,
    job_slots,
    node_slots,
    usable_slots,
)


def _free(rng, n=40):
    return np.stack([rng.integers(0, 9, n), rng.integers(0, 5, n), rng.integers(0, 9, n) * 4_000], axis=1)


@pytest.mark.parametrize("seed", range(20))
def test_fits_once_could_fit_and_node_slots_equal_the_slot_counts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    free = _free(rng)
    for _ in range(30):
        ps = Resources(int(rng.integers(0, 4)), 0, int(rng.integers(0, 3)) * 4_000)
        worker = Resources(int(rng.integers(0, 4)), int(rng.integers(0, 3)), int(rng.integers(0, 3)) * 4_000)
        job = Job("j", "x", int(rng.integers(0, 2)), int(rng.integers(1, 4)), ps, worker, 10.0)
        assert np.array_equal(fits_once(free, worker), usable_slots(free, worker) >= 1)
        counted = all(not count or np.minimum(usable_slots(free, d), count).sum() >= count
                      for d, count in ((job.ps_demand, job.num_ps), (job.worker_demand, job.num_workers)))
        assert could_fit(free, job) == counted
        for min_nodes, max_nodes in ((1, None), (job.num_tasks, job.num_tasks), (1, 1), (1, 2)):
            slots = node_slots(free, job, min_nodes, max_nodes)
            if job.worker_demand.gpus and not job.num_ps and max_nodes != 1 and \
                    (job.num_tasks == 1 or job.num_tasks == min_nodes == max_nodes):
                assert np.array_equal(slots, np.minimum(job_slots(free, job), 1))
        most = rng.integers(0, 5, 40)
        for cap in (1, 2, 7):
            assert _biggest(most, cap) == int(np.sort(most)[-cap:].sum())
