"""The spool: records on disk when append returns, read back in order (a previous run's first),
files deleted once drained, damaged lines skipped and counted, and a spool that cannot be
written never costs a record (the writer keeps it in memory)."""
from __future__ import annotations

import json
import threading

from slurm_advisor.daemon.batches import BatchWriter
from slurm_advisor.daemon.spool import Spool, SpoolChannel, SpoolReader


def line(i: int) -> bytes:
    return json.dumps({"n": i}).encode() + b"\n"


def spool_files(directory) -> list[str]:
    return sorted(p.name for p in directory.glob("*.spool"))


def test_records_come_back_in_order_and_drained_files_go(tmp_path):
    spool = Spool(tmp_path, "thing", rotate_bytes=40)  # a new file every few records
    assert spool.open()
    for i in range(10):
        assert spool.append(line(i))
    reader = SpoolReader(tmp_path, "thing")
    assert [json.loads(x)["n"] for x in reader.read()] == list(range(10))
    assert reader.read() == []  # nothing new
    newest = spool_files(tmp_path)[-1]
    reader.release()
    assert spool_files(tmp_path) == [newest]  # the file still appended to stays
    spool.append(line(10))
    assert [json.loads(x)["n"] for x in reader.read()] == [10]
    spool.close()
    assert reader.read(final=True) == []
    reader.release()
    reader.close()
    assert spool_files(tmp_path) == [] and spool.appended == 11 and reader.damaged == 0


def test_a_restart_replays_what_the_previous_run_left_before_its_own(tmp_path):
    first = Spool(tmp_path, "thing")
    assert first.open()
    first.append(line(1) + line(2))  # one write for two records answered together
    first.close()  # as a kill -9 leaves it: the file stays, nothing drained
    second = Spool(tmp_path, "thing")
    assert second.open()
    second.append(line(3))
    reader = SpoolReader(tmp_path, "thing")
    assert [json.loads(x)["n"] for x in reader.read()] == [1, 2, 3]
    reader.release()
    assert len(spool_files(tmp_path)) == 1  # the previous run's file is drained and gone
    second.close()


def test_a_line_cut_short_and_a_line_that_does_not_decode_are_skipped_and_counted(tmp_path, caplog):
    spool = Spool(tmp_path, "thing")
    spool.open()
    spool.append(line(1) + b'{"n": ?}\n' + line(3))
    path = tmp_path / spool_files(tmp_path)[0]
    with path.open("ab") as out:
        out.write(b'{"n": 4')  # the machine went down mid-write
    spool.close()
    reader = SpoolReader(tmp_path, "thing")
    assert reader.read() == [line(1).strip(), b'{"n": ?}', line(3).strip()]  # a live file's tail may still come
    assert reader.damaged == 0
    reader = SpoolReader(tmp_path, "thing")
    assert [d["n"] for d in reader.take(json.loads, final=True)] == [1, 3]
    assert reader.damaged == 2 and "cut short" in caplog.text
    reader.close()


def test_one_appender_per_directory_and_name(tmp_path):
    first = Spool(tmp_path, "thing")
    assert first.open()
    second = Spool(tmp_path, "thing")
    second.lock_wait_s = 0.0
    assert not second.open() and not second.append(line(1)) and second.failed == 1
    other = Spool(tmp_path, "other")
    assert other.open()
    first.close()
    other.close()


def test_a_spool_that_cannot_be_written_costs_no_record(tmp_path, caplog):
    (tmp_path / "file").write_text("")
    written = []
    writer = BatchWriter(lambda batch: written.extend(batch) or len(batch), what="thing",
                         spool=SpoolChannel(tmp_path / "file" / "spool", "thing", line, json.loads))
    writer.start()
    for i in range(5):
        writer.put(i)
    writer.stop()
    assert written == list(range(5)) and writer.written == 5
    assert (writer.spooled, writer.spool_failed) == (0, 5)
    assert caplog.text.count("not written to disk") == 1  # rate-limited: once per interval


def test_a_full_spool_sends_records_the_memory_way_until_it_drains(tmp_path):
    spool = Spool(tmp_path, "thing", rotate_bytes=10, max_bytes=30)
    spool.open()
    results = [spool.append(line(i)) for i in range(6)]
    assert results[:3] == [True] * 3 and results[-1] is False and spool.failed >= 1
    spool.close()


def test_a_spooled_writer_writes_every_item_and_leaves_no_file(tmp_path):
    written, done = [], threading.Event()

    def write(batch):
        written.extend(batch)
        if len(written) >= 300:
            done.set()
        return len(batch)

    writer = BatchWriter(write, what="thing", spool=SpoolChannel(tmp_path, "thing", line, lambda b: json.loads(b)["n"],
                                                                 rotate_bytes=1000))
    writer.start()
    for i in range(300):
        writer.put(i)
    assert done.wait(20)  # drained while running, not only at the stop
    writer.stop()
    assert written == list(range(300)) and (writer.written, writer.spooled, writer.spool_failed) == (300, 300, 0)
    assert spool_files(tmp_path) == []


def test_a_disk_that_fills_up_mid_run_fails_the_append_not_the_caller(tmp_path, caplog):
    spool = Spool(tmp_path, "thing", rotate_bytes=5)  # a new file after each record
    assert spool.open()
    (tmp_path / "thing-0000000002.spool").symlink_to("/dev/full")  # the next file: every write ENOSPC
    assert spool.append(line(1))  # fills the first file: the spool moves on to the full one
    assert [spool.append(line(i)) for i in range(2, 5)] == [False] * 3
    assert (spool.appended, spool.failed) == (1, 3)
    assert caplog.text.count("not written to disk") == 1 and "No space left" in caplog.text
    spool.close()
