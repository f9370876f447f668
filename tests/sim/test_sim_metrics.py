"""SimResult's queue growth: near 0 for a queue that comes and goes, near 1 - capacity/load
for one that grows without bound."""
import pytest

from slurm_advisor.sim.metrics import JobRecord, SimResult


def result(records) -> SimResult:
    return SimResult("p", tuple(records), total_gpus=1)


def one_server(n: int, gap: float, service: float) -> SimResult:
    """n jobs every ``gap`` seconds on one GPU, each ``service`` seconds, first come first served."""
    records, free = [], 0.0
    for i in range(n):
        submit = i * gap
        start = max(submit, free)
        free = start + service
        records.append(JobRecord(f"j{i}", "t", submit, start, free, service, 1, 1))
    return result(records)


def test_a_server_that_keeps_up_has_no_growth():
    assert one_server(200, gap=10.0, service=8.0).queue_growth() == pytest.approx(0.0, abs=1e-9)


def test_an_overloaded_server_grows_by_one_minus_capacity_over_load():
    # load 2: half the arrivals are still waiting when the last one comes
    assert one_server(400, gap=5.0, service=10.0).queue_growth() == pytest.approx(0.5, abs=0.02)
    assert one_server(400, gap=8.0, service=10.0).queue_growth() == pytest.approx(0.2, abs=0.02)


def test_a_burst_that_drains_is_not_growth():
    burst = one_server(50, gap=0.0, service=1.0).records  # 50 at once, served in 50 s
    later = [JobRecord(f"k{i}", "t", 100.0 + 10 * i, 100.0 + 10 * i, 101.0 + 10 * i, 1.0, 1, 1)
             for i in range(150)]
    assert result(burst + tuple(later)).queue_growth() < 0.05


def test_few_records_have_no_trend():
    assert result([]).queue_growth() == 0.0
    assert one_server(2, gap=1.0, service=5.0).queue_growth() == 0.0
