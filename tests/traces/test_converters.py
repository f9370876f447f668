"""Converters over the real public traces: counts, mappings, determinism, and trace round-trips."""
from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from slurm_advisor.domain.jobtypes import KNOWN_TYPES, profile_for, reference_speed
from slurm_advisor.errors import InputError
from slurm_advisor.sim.trace import read_trace, write_trace
from slurm_advisor.traces.gavel import gavel_jobs, parse_job_type
from slurm_advisor.traces.philly import PS_DEMAND, WORKER_DEMAND, philly_jobs, pick_type, ps_count
from slurm_advisor.traces.pollux import pollux_jobs
from slurm_advisor.traces.synthetic import synthetic_jobs


def _round_trip(tmp_path: Path, jobs: list) -> None:
    out = tmp_path / "trace.csv"
    assert write_trace(out, jobs) == len(jobs)
    assert read_trace(out) == sorted(jobs, key=lambda j: j.submit_time)


DAY = 86400
BUSY = 20 * DAY  # the file's first 20 days hold only ~70 jobs; the busy period starts here


@pytest.fixture(scope="module")
def philly_path(shared_data: Path) -> Path:
    return shared_data / "philly" / "philly_jobs.csv.gz"


# --- Philly -------------------------------------------------------------------------------------

def test_philly_window_vc_and_min_duration(philly_path: Path) -> None:
    jobs = philly_jobs(philly_path, vc="6214e9", start_s=BUSY, duration_s=DAY)
    assert jobs
    assert all(j.user == "6214e9" for j in jobs)
    assert all(0 <= j.submit_time < DAY for j in jobs)
    others = philly_jobs(philly_path, start_s=BUSY, duration_s=DAY)
    assert len(others) > len(jobs) and {j.user for j in others} > {"6214e9"}
    assert all(j.iterations >= 60 * reference_speed(profile_for(j.type)) - 1 for j in jobs)


def test_philly_max_jobs_time_scale_and_demands(philly_path: Path) -> None:
    plain = philly_jobs(philly_path, start_s=BUSY, max_jobs=50)
    fast = philly_jobs(philly_path, start_s=BUSY, max_jobs=50, time_scale=2.0)
    assert len(plain) == 50
    assert [j.id for j in plain] == [j.id for j in fast]
    assert [round(j.submit_time / 2) for j in plain] == [j.submit_time for j in fast]
    assert all(j.worker_demand == WORKER_DEMAND for j in plain)


def test_philly_is_deterministic_and_round_trips(philly_path: Path, tmp_path: Path) -> None:
    jobs = philly_jobs(philly_path, start_s=BUSY, duration_s=DAY, seed=3)
    assert len(jobs) > 500
    assert jobs == philly_jobs(philly_path, start_s=BUSY, duration_s=DAY, seed=3)
    assert [j.type for j in jobs] != [j.type for j in philly_jobs(philly_path, start_s=BUSY, duration_s=DAY)]
    _round_trip(tmp_path, jobs)


def test_philly_has_ps_jobs_with_the_documented_shape(philly_path: Path) -> None:
    jobs = philly_jobs(philly_path, start_s=BUSY, duration_s=10 * DAY)
    ps = [j for j in jobs if j.num_ps]
    assert ps, "the mixed-in CNN types must give some parameter-server jobs"
    for j in ps:
        assert j.type in {"resnet50", "vgg16", "inception3"} and j.num_workers > 1
        assert j.num_ps == max(1, j.num_workers // 4) and j.ps_demand == PS_DEMAND


def test_pick_type_follows_pollux_buckets() -> None:
    rng = np.random.default_rng(0)
    small = {pick_type(0.5, rng) for _ in range(200)}
    huge = {pick_type(500.0, rng) for _ in range(200)}
    assert small == {"resnet18", "ncf", "lstm"}
    assert huge == {"resnet50", "vgg16", "inception3"}
    assert ps_count("vgg16", 1) == 0 and ps_count("vgg16", 8) == 2 and ps_count("bert", 8) == 0


def test_philly_missing_file_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        philly_jobs(tmp_path / "nope.csv.gz")


# --- Gavel --------------------------------------------------------------------------------------

def test_gavel_old_format_all_jobs_clamped(shared_data: Path, tmp_path: Path) -> None:
    jobs = gavel_jobs(shared_data / "gavel" / "traces" / "msr_seed0" / "2869ce.trace")
    assert len(jobs) == 533
    assert max(j.num_workers for j in jobs) == 8
    assert sum(j.num_workers == 8 for j in jobs) == 379 + 2 + 70  # sf 16 and 32 clamped to 8
    first = jobs[0]
    assert (first.type, first.batch_size, first.num_workers, first.iterations) == ("transformer", 128, 4,
                                                                                    5352613)
    assert all(j.num_ps == 0 and j.type in KNOWN_TYPES for j in jobs)
    _round_trip(tmp_path, jobs)


def test_gavel_current_format(shared_data: Path) -> None:
    jobs = gavel_jobs(shared_data / "gavel" / "traces" / "physical_cluster" / "artifact_evaluation.trace",
                      max_workers=4)
    assert len(jobs) == 15
    assert (jobs[0].type, jobs[0].batch_size, jobs[0].iterations) == ("resnet50", 64, 2931)
    assert {j.type for j in jobs} >= {"a3c", "cyclegan", "lstm", "recommendation", "resnet18"}


def test_gavel_bad_line_names_file_and_line(tmp_path: Path) -> None:
    good = "ResNet-18 (batch size 64)\tcmd\t--num_steps\t1\t1000\t0.0\t1\n"
    path = tmp_path / "bad.trace"
    path.write_text(good + "ResNet-18 (batch size 64)\tcmd\t--num_steps\t1\tlots\t0.0\t1\n")
    with pytest.raises(InputError, match=r"bad\.trace: line 2"):
        gavel_jobs(path)
    path.write_text(good + "only\tthree\tfields\n")
    with pytest.raises(InputError, match="line 2: 3 tab-separated fields"):
        gavel_jobs(path)
    path.write_text(good.replace("ResNet-18", "AlexNet"))
    with pytest.raises(InputError, match="line 1: unknown Gavel model 'AlexNet'"):
        gavel_jobs(path)


def test_parse_job_type() -> None:
    assert parse_job_type("LM (batch size 80)") == ("lstm", 80)
    assert parse_job_type("CycleGAN") == ("cyclegan", None)


# --- Pollux -------------------------------------------------------------------------------------

def test_pollux_workload(shared_data: Path, tmp_path: Path) -> None:
    pollux = shared_data / "pollux"
    jobs = pollux_jobs(pollux / "traces" / "workload-1.csv", pollux / "models")
    assert len(jobs) == 160
    cifar = jobs[0]  # cifar10-0,107,cifar10,6,2048 -> validation-2048.csv ends at iteration 3178
    assert (cifar.id, cifar.type, cifar.num_workers, cifar.batch_size) == ("cifar10-0", "resnet18", 6, 341)
    assert cifar.submit_time == 107 and cifar.iterations == 3178
    assert all(j.num_ps == 0 for j in jobs)
    _round_trip(tmp_path, jobs)


def test_pollux_unknown_application(shared_data: Path, tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text("name,time,application,num_replicas,batch_size\nx-0,5,alexnet,1,64\n")
    with pytest.raises(InputError, match="line 2: column 'application': unknown 'alexnet'"):
        pollux_jobs(path, shared_data / "pollux" / "models")


# --- Synthetic ----------------------------------------------------------------------------------

def test_synthetic_philly_mix(tmp_path: Path) -> None:
    jobs = synthetic_jobs(2000, seed=1)
    assert jobs == synthetic_jobs(2000, seed=1)
    assert jobs != synthetic_jobs(2000, seed=2)
    assert 0.9 < sum(j.num_workers == 1 for j in jobs) / len(jobs) < 0.96
    assert jobs[0].submit_time == 0 and all(a.submit_time <= b.submit_time for a, b in pairwise(jobs))
    _round_trip(tmp_path, jobs)


def test_synthetic_large_mix_ps_jobs() -> None:
    jobs = synthetic_jobs(500, mix="large", ps_fraction=1.0)
    multi = [j for j in jobs if j.num_workers > 1]
    assert sum(4 <= j.num_workers <= 16 for j in jobs) / len(jobs) > 0.8
    assert all(1 <= j.num_ps <= j.num_workers // 2 for j in multi)
    assert all(j.num_ps == 0 for j in jobs if j.num_workers == 1)
    assert all(j.num_ps == 0 for j in synthetic_jobs(200, mix="large", ps_fraction=0.0))


def test_synthetic_bad_mix() -> None:
    with pytest.raises(InputError, match="unknown mix 'huge'; valid: philly, large"):
        synthetic_jobs(5, mix="huge")


# --- Committed examples -------------------------------------------------------------------------

@pytest.mark.parametrize("name, count", [("philly-small.csv", 300), ("large-mix.csv", 200)])
def test_example_traces_load_and_stay_small(name: str, count: int) -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "traces" / name
    assert len(read_trace(path)) == count
    assert path.stat().st_size < 40_000


# --- Time limits: no public trace here carries one ----------------------------------------------

def test_converters_leave_the_time_limit_empty(shared_data: Path, philly_path: Path, tmp_path: Path) -> None:
    every = [
        philly_jobs(philly_path, start_s=BUSY, max_jobs=50),
        gavel_jobs(shared_data / "gavel" / "traces" / "physical_cluster" / "artifact_evaluation.trace"),
        pollux_jobs(shared_data / "pollux" / "traces" / "workload-1.csv", shared_data / "pollux" / "models"),
        synthetic_jobs(50, mix="large"),
    ]
    for jobs in every:
        assert all(j.time_limit_s is None for j in jobs)
        out = tmp_path / "t.csv"
        write_trace(out, jobs)
        rows = out.read_text().splitlines()
        assert rows[0].endswith(",time_limit_s") and all(r.endswith(",") for r in rows[1:])
