"""RunningJobs: the same map, in the same order, as a dict copied and changed at every step."""
import numpy as np
import pytest

from slurm_advisor.domain import Job, Placement, Resources, RunningJob
from slurm_advisor.domain.running_jobs import CHUNK, EMPTY, RunningJobs

WORKER = Resources(4, 1, 8_000)


def running(job_id: str, start: float = 0.0) -> RunningJob:
    j = Job(job_id, "resnet50", 0, 1, Resources(0, 0, 0), WORKER, 10.0)
    return RunningJob(j, Placement.of(j, ["n1"]), start)


def same(m: RunningJobs, d: dict) -> None:
    assert list(m) == list(d)
    assert list(m.values()) == list(d.values())
    assert len(m) == len(d)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_adds_replaces_and_removals_match_a_dict(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, d, ids, fresh = EMPTY, {}, [], 0
    versions = []
    for step in range(6_000):
        roll = rng.random()
        if roll < 0.05 and ids:  # the same id again: replaced in place
            job_id = ids[int(rng.integers(len(ids)))]
            rj = running(job_id, float(step))
            m, d = m.adding(rj), {**d, job_id: rj}
        elif roll < 0.55 or not ids:
            job_id = f"j{fresh}"
            fresh += 1
            rj = running(job_id, float(step))
            m, d = m.adding(rj), {**d, job_id: rj}
            ids.append(job_id)
        else:  # removals favour young jobs, so that old chunks keep a few survivors
            k = len(ids) - 1 - min(len(ids) - 1, int(rng.exponential(30)))
            job_id = ids.pop(k)
            m = m.removing(job_id)
            d = {key: v for key, v in d.items() if key != job_id}
        if step % 500 == 0:
            versions.append((m, dict(d)))
        assert (job_id in m) == (job_id in d) and m.get(job_id) == d.get(job_id)
    same(m, d)
    for old, expected in versions:  # no change ever reached an earlier map
        same(old, expected)
    for job_id in list(d)[::37]:
        assert m[job_id] is d[job_id]
    assert m.get("nobody") is None and "nobody" not in m


def test_chunks_stay_few_under_churn() -> None:
    """A long-lived job in every chunk would keep each chunk alive: the map rebuilds them."""
    m = EMPTY
    for i in range(40 * CHUNK):
        m = m.adding(running(f"j{i}"))
    for i in range(40 * CHUNK):
        if i % CHUNK and i < 39 * CHUNK:  # all but the first job of every chunk but the last end
            m = m.removing(f"j{i}")
    assert len(m._chunks) == 40
    m = m.adding(running("last"))  # opens a chunk: the 39 almost empty ones are rebuilt
    assert len(m) == 39 + CHUNK + 1
    assert len(m._chunks) <= 2 * (len(m) // CHUNK) + 9
    assert list(m) == [f"j{i}" for i in range(0, 39 * CHUNK, CHUNK)] + [f"j{i}" for i in range(39 * CHUNK, 40 * CHUNK)] + ["last"]
    assert m.removing("j0").adding(running("j0")).get("j0") is not None


def test_removing_what_is_not_running_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        RunningJobs.of([running("a")]).removing("b")


def test_of_keeps_a_dicts_rule_for_repeated_ids() -> None:
    first, again, other = running("a", 1.0), running("a", 2.0), running("b")
    m = RunningJobs.of([first, other, again])
    assert list(m.values()) == [again, other]
    assert len(m) == 2


def test_changes_since_any_earlier_or_later_map() -> None:
    """What changed between two maps, read from the chunks they do not share, is the set
    difference; maps that share too few chunks say so (None)."""
    rng = np.random.default_rng(5)
    m, ids, versions = EMPTY, [], []
    for step in range(3_000):
        if rng.random() < 0.6 or not ids:
            ids.append(f"j{step}")
            m = m.adding(running(ids[-1], float(step)))
        else:
            m = m.removing(ids.pop(int(rng.integers(len(ids)))))
        if step % 61 == 0:
            versions.append(m)
    answered = 0
    for a in versions[::3]:
        for b in versions[::4]:
            changes = b.changes_since(a)
            if changes is None:
                continue
            answered += 1
            gone, new = changes
            before, after = {id(rj): rj for rj in a.values()}, {id(rj): rj for rj in b.values()}
            assert sorted(map(id, gone)) == sorted(before.keys() - after.keys())
            assert sorted(map(id, new)) == sorted(after.keys() - before.keys())
    assert answered > 10
    big = RunningJobs.of(running(f"b{i}") for i in range(20 * CHUNK))
    assert big.changes_since(EMPTY) is None
    assert RunningJobs.of(big.values()).changes_since(big) is None  # the same jobs, chunks of its own
    assert m.changes_since(m) == ([], [])
    assert m.adding(running("again")).changes_since(m)[1][0].job.id == "again"
