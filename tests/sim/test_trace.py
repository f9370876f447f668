"""The job trace CSV: every bad input is one InputError naming file, line and column."""
from pathlib import Path

import pytest

from slurm_advisor.domain import Job, Resources
from slurm_advisor.errors import InputError
from slurm_advisor.sim.trace import COLUMNS, MAX_MODEL_SIZE_MB, read_trace, write_trace

HEADER = ",".join(COLUMNS)
ROWS = [
    "a,10,resnet50,0,2,0,0,0,4,1,24000,1000",
    "b,5,vgg16,1,2,4,0,16000,4,1,24000,500.5",
    "c,10,bert,0,1,0,0,0,4,1,24000,7",
]


def write(tmp_path: Path, *rows: str, header: str = HEADER, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_reads_jobs_sorted_by_submit_time_stably(tmp_path: Path) -> None:
    jobs = read_trace(write(tmp_path, *ROWS))
    assert [j.id for j in jobs] == ["b", "a", "c"]
    b = jobs[0]
    assert b == Job("b", "vgg16", 1, 2, Resources(4, 0, 16_000), Resources(4, 1, 24_000), 500.5,
                    submit_time=5.0)
    assert (b.user, b.batch_size, b.model_size_mb) == ("", None, None)


def test_optional_and_extra_columns(tmp_path: Path) -> None:
    header = HEADER + ",user,batch_size,model_size_mb,comment"
    path = write(tmp_path, ROWS[0] + ",bob,64,102.4,hello", ROWS[2] + ",,,,", header=header)
    a, c = read_trace(path)
    assert (a.user, a.batch_size, a.model_size_mb) == ("bob", 64, 102.4)
    assert (c.user, c.batch_size, c.model_size_mb) == ("", None, None)


def test_whitespace_around_values_is_ignored(tmp_path: Path) -> None:
    (job,) = read_trace(write(tmp_path, " a , 3 , resnet50 ,0, 1 ,0,0,0,4,1,24000, 9 "))
    assert (job.id, job.type, job.submit_time, job.num_workers, job.iterations) == ("a", "resnet50", 3.0,
                                                                                    1, 9.0)


def _replace(row: str, column: str, value: str) -> str:
    cells = row.split(",")
    cells[COLUMNS.index(column)] = value
    return ",".join(cells)


@pytest.mark.parametrize("column, value, words", [
    ("num_workers", "two", "not an integer"),
    ("worker_gpus", "1.5", "not an integer"),
    ("ps_cpus", "-1", "below 0"),
    ("num_workers", "0", "below 1"),
    ("worker_mem_mb", "", "empty"),
    ("job_id", " ", "empty"),
    ("type", "", "empty"),
    ("iterations", "0", "positive"),
    ("iterations", "-3", "positive"),
    ("iterations", "lots", "not a number"),
    ("iterations", "inf", "finite"),
    ("submit_time", "-1", "non-negative"),
    ("submit_time", "nan", "finite"),
])
def test_bad_field_names_file_line_and_column(tmp_path: Path, column: str, value: str, words: str) -> None:
    path = write(tmp_path, ROWS[0], _replace(ROWS[1], column, value), ROWS[2])
    with pytest.raises(InputError) as err:
        read_trace(path)
    message = str(err.value)
    assert str(path) in message
    assert "line 3" in message
    assert f"'{column}'" in message
    assert words in message


@pytest.mark.parametrize("column, value", [("batch_size", "0"), ("batch_size", "x"),
                                           ("model_size_mb", "0"), ("model_size_mb", "big")])
def test_bad_optional_field(tmp_path: Path, column: str, value: str) -> None:
    header = HEADER + ",batch_size,model_size_mb"
    cells = {"batch_size": "32", "model_size_mb": "100", column: value}
    path = write(tmp_path, ROWS[0] + ",32,100", ROWS[2] + f",{cells['batch_size']},{cells['model_size_mb']}",
                 header=header)
    with pytest.raises(InputError, match=rf"line 3: column '{column}'") as err:
        read_trace(path)
    assert str(path) in str(err.value)


def test_short_row_reports_the_first_empty_column(tmp_path: Path) -> None:
    path = write(tmp_path, ROWS[0], "b,5,vgg16,1,2")
    with pytest.raises(InputError, match=r"line 3: column 'ps_cpus' is empty"):
        read_trace(path)


def test_worker_asking_for_nothing_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "z,0,resnet50,0,1,0,0,0,0,0,0,10")
    with pytest.raises(InputError) as err:
        read_trace(path)
    assert str(path) in str(err.value) and "line 2" in str(err.value) and "'worker_cpus'" in str(err.value)


def test_missing_columns_are_listed(tmp_path: Path) -> None:
    header = HEADER.replace(",iterations", "").replace("num_ps,", "")
    path = write(tmp_path, "a,0,resnet50,1,0,0,0,4,1,24000", header=header)
    with pytest.raises(InputError) as err:
        read_trace(path)
    message = str(err.value)
    assert str(path) in message and "line 1" in message
    assert "num_ps" in message and "iterations" in message


def test_duplicate_job_id_names_the_second_line(tmp_path: Path) -> None:
    path = write(tmp_path, ROWS[0], ROWS[1], _replace(ROWS[2], "job_id", "a"))
    with pytest.raises(InputError) as err:
        read_trace(path)
    message = str(err.value)
    assert str(path) in message and "line 4" in message and "'job_id'" in message and "'a'" in message


def test_empty_trace_and_empty_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no jobs"):
        read_trace(write(tmp_path, name="header-only.csv"))
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="missing column") as err:
        read_trace(empty)
    assert str(empty) in str(err.value)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read trace") as err:
        read_trace(tmp_path / "none.csv")
    assert "none.csv" in str(err.value)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00\x81garbage")
    with pytest.raises(InputError, match="bin.csv"):
        read_trace(binary)


def test_a_bad_last_row_loads_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, *ROWS, _replace(ROWS[0], "job_id", "d").replace(",1000", ",x"))
    with pytest.raises(InputError, match="line 5"):
        read_trace(path)


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    jobs = [
        Job("p1", "vgg16", 2, 8, Resources(4, 0, 16_000), Resources(4, 1, 24_000), 642_352.123456789,
            submit_time=1_814_467.5, user="vc1", model_size_mb=553.6, batch_size=32),
        Job("p2", "custom", 0, 1, Resources(), Resources(8, 2, 1000), 3.0, submit_time=1_814_467.75),
        Job("p3", "ncf", 0, 4, Resources(), Resources(4, 1, 24_000), 1e-3, submit_time=2e7 + 0.125),
    ]
    path = tmp_path / "out.csv"
    assert write_trace(path, jobs) == 3
    assert read_trace(path) == jobs


def test_written_integers_look_like_integers(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    write_trace(path, [Job("a", "x", 0, 1, Resources(), Resources(1, 0, 0), 5.0, submit_time=3.0)])
    assert path.read_text().splitlines()[1] == "a,3,x,0,1,0,0,0,1,0,0,5,,,,"


def test_a_utf8_byte_order_mark_is_read_fine(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + ("\n".join([HEADER, *ROWS]) + "\n").encode())
    assert [j.id for j in read_trace(path)] == ["b", "a", "c"]


@pytest.mark.parametrize("column, value, words", [
    ("model_size_mb", "1e308", f"at most {MAX_MODEL_SIZE_MB:g}"),
    ("model_size_mb", "20000000", f"at most {MAX_MODEL_SIZE_MB:g}"),
    ("time_limit_s", "0", "positive"),
    ("time_limit_s", "-60", "positive"),
    ("time_limit_s", "inf", "finite"),
    ("time_limit_s", "1h", "not a number"),
])
def test_out_of_range_optional_fields_are_refused(tmp_path: Path, column: str, value: str, words: str) -> None:
    header = HEADER + f",{column}"
    path = write(tmp_path, ROWS[0] + ",100", ROWS[2] + f",{value}", header=header)
    with pytest.raises(InputError, match=rf"line 3: column '{column}'") as err:
        read_trace(path)
    assert str(path) in str(err.value) and words in str(err.value)


@pytest.mark.parametrize("column, value", [("iterations", "1e13"), ("iterations", "1e308"),
                                           ("submit_time", "1e11"), ("submit_time", "1e308")])
def test_absurdly_large_numbers_are_refused(tmp_path: Path, column: str, value: str) -> None:
    path = write(tmp_path, ROWS[0], _replace(ROWS[1], column, value))
    with pytest.raises(InputError, match=rf"line 3: column '{column}': .*at most") as err:
        read_trace(path)
    assert str(path) in str(err.value)


def test_time_limit_is_read_and_written(tmp_path: Path) -> None:
    path = write(tmp_path, ROWS[0] + ",7200", ROWS[2] + ",", header=HEADER + ",time_limit_s")
    a, c = read_trace(path)
    assert (a.time_limit_s, c.time_limit_s) == (7200.0, None)
    out = tmp_path / "out.csv"
    write_trace(out, [a, c])
    assert read_trace(out) == [a, c]
    assert out.read_text().splitlines()[0].split(",")[-1] == "time_limit_s"
    assert out.read_text().splitlines()[1].endswith(",7200")


def test_a_field_over_csvs_limit_is_one_error_naming_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, ROWS[0], _replace(ROWS[1], "type", "x" * 140_000))
    with pytest.raises(InputError, match=r"line 3: a field is longer than 131072 characters"):
        read_trace(path)


@pytest.mark.parametrize("column, value", [("worker_mem_mb", "1" + "0" * 23), ("ps_cpus", "9" * 5000),
                                           ("worker_gpus", "100000"), ("num_workers", "1000000"),
                                           ("num_ps", "200000")])
def test_integers_beyond_any_cluster_are_refused_naming_the_bound(tmp_path: Path, column: str, value: str) -> None:
    """worker_mem_mb = 10^23 reached numpy and ended in an OverflowError."""
    path = write(tmp_path, ROWS[0], _replace(ROWS[1], column, value))
    with pytest.raises(InputError, match=rf"line 3: column '{column}': .*(at most|digits)") as err:
        read_trace(path)
    assert str(path) in str(err.value)


def test_a_trace_file_over_the_size_bound_is_refused_before_reading(tmp_path: Path, monkeypatch) -> None:
    from slurm_advisor.sim import trace
    path = write(tmp_path, *ROWS)
    size = path.stat().st_size
    monkeypatch.setattr(trace, "MAX_TRACE_BYTES", size - 1)
    with pytest.raises(InputError, match=rf"{path}: {size:,} bytes; a trace file may hold at most {size - 1:,}"):
        read_trace(path)
    monkeypatch.setattr(trace, "MAX_TRACE_BYTES", path.stat().st_size)
    monkeypatch.setattr(trace, "MAX_TRACE_JOBS", 2)
    with pytest.raises(InputError, match=rf"{path}: line 4: more than 2 jobs"):
        read_trace(path)
