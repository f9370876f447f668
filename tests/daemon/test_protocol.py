import json

import pytest

from slurm_advisor.daemon import protocol
from slurm_advisor.daemon.protocol import ProtocolError


def test_round_trip_of_a_request():
    line = protocol.encode({"op": "health"})
    assert line.endswith(b"\n") and protocol.decode_request(line.rstrip()) == {"v": 1, "op": "health"}


@pytest.mark.parametrize(("line", "message"), [
    (b"\xff\xfe{}", "not UTF-8"),
    (b"{not json", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"v": 2, "op": "health"}', "unsupported protocol version 2"),
    (b'{"v": 1, "op": "reboot"}', "unknown op 'reboot'"),
    (b'{"v": 1, "op": "health", "x": NaN}', "NaN"),
    (b"[" * 100_000 + b"]" * 100_000, "longer than"),
    (b"[" * 30_000 + b"]" * 30_000, "too deeply nested"),
])
def test_bad_requests_get_one_line_naming_the_problem(line, message):
    with pytest.raises(ProtocolError, match=message):
        protocol.decode_request(line)


def test_encode_refuses_nan():
    with pytest.raises(ValueError):
        protocol.encode({"x": float("nan")})


def test_marker_is_found_among_other_text():
    marker = protocol.parse_marker("nightly run slurm-advisor: type=resnet50 ps=1 workers=4 model_mb=98 batch=64 (ok)")
    assert marker == protocol.Marker("resnet50", 1, 4, 98.0, 64, None)


def test_no_marker_is_none():
    assert protocol.parse_marker("just a comment") is None
    assert protocol.parse_marker(None) is None


@pytest.mark.parametrize(("comment", "message"), [
    ("slurm-advisor:", "key=value"),
    ("slurm-advisor: type=x ps=1", "lacks workers"),
    ("slurm-advisor: type=x ps=1 workers=two", "not an integer"),
    ("slurm-advisor: type=x ps=0 workers=0", "workers >= 1"),
    ("slurm-advisor: type=x ps=0 workers=1 gpus=3", "unknown marker key 'gpus'"),
    ("slurm-advisor: type=$(reboot) ps=0 workers=1", "letters, digits"),
    ("slurm-advisor: type=x ps=0 workers=1 model_mb=inf", "out of range"),
    ("slurm-advisor: type=x ps=0 workers=1 iters=0", "out of range"),
])
def test_malformed_markers_name_the_key(comment, message):
    with pytest.raises(ProtocolError, match=message):
        protocol.parse_marker(comment)


def test_task_shape_from_slurm_options():
    assert protocol.task_shape({"cpus_per_task": 4, "pn_min_memory": 2000, "mem_per_cpu": True,
                                "tres_per_task": "gres:gpu:2"}) == protocol.TaskShape(4, 2, 8000)
    # --mem is per node: each of the 4 tasks gets its share, rounded up
    assert protocol.task_shape({"num_tasks": 4, "pn_min_memory": 10001}) == protocol.TaskShape(1, 0, 2501)
    assert protocol.task_shape({"tres_per_task": "gres/gpu:a100:1"}).gpus == 1
    assert protocol.task_shape({}) == protocol.TaskShape(1, 0, 0)


@pytest.mark.parametrize("fields", [{"cpus_per_task": "4"}, {"cpus_per_task": 0}, {"num_tasks": True, "pn_min_memory": 100},
                                    {"tres_per_task": 3}])
def test_task_shape_refuses_wrong_types(fields):
    with pytest.raises(ProtocolError, match="job."):
        protocol.task_shape(fields)


def test_layout_string_round_trips():
    text = protocol.format_layout([("ps", "n1"), ("worker", "n1"), ("worker", "n3")])
    assert text == "ps=n1;worker=n1,n3"
    assert protocol.parse_layout(text) == {"ps": ["n1"], "worker": ["n1", "n3"]}


@pytest.mark.parametrize("text", ["ps=n1", "boss=n1;worker=n2", "worker="])
def test_bad_layout_strings_are_refused(text):
    with pytest.raises(ProtocolError, match="SLURM_ADVISOR_LAYOUT"):
        protocol.parse_layout(text)


def test_error_reply_is_protocol():
    assert json.loads(protocol.error_reply("bad")) == {"v": 1, "ok": False, "error": "bad"}
