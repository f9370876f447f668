"""Fuzz of the pure protocol module and the readers behind it: whatever bytes or JSON a peer sends,
the answer is a checked value or one ProtocolError — never another exception, never a value
outside the bounds (issue 39: one line of a 4,300-digit integer once ended the daemon).

Hypothesis runs derandomized (the same examples every run), a few hundred examples per property.
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from slurm_advisor.daemon import protocol
from slurm_advisor.daemon.protocol import MAX_DEPTH, MAX_LINE, OPS, ProtocolError
from slurm_advisor.daemon.service import submission
from slurm_advisor.plausible_speeds import MAX_SPEED, MIN_SPEED
from slurm_advisor.slurm.marker import MAX_TASKS

FUZZ = settings(derandomize=True, max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=30)


def _text(value) -> str:
    """JSON as a hostile peer may write it: NaN and Infinity included, surrogates left raw."""
    return json.dumps(value, allow_nan=True, ensure_ascii=False)


def _decoded_or_refused(line: bytes):
    try:
        request = protocol.decode_request(line)
    except ProtocolError as exc:
        assert str(exc) and "\n" not in str(exc)  # one line, for the reply's error field
        return None
    assert isinstance(request, dict) and request["v"] == 1 and request["op"] in OPS
    return request


@FUZZ
@given(st.binary(max_size=2048))
@example(b"")
@example(b"\xff\xfe")
@example(b'{"v":1,"op":"health","n":' + b"9" * 5000 + b"}")
@example(b'{"v":1,"op":"health","n":1' + b"0" * 400 + b'.0}')
@example(b'{"v":1,"op":"health","n":1e400}')
@example(b'{"v":1,"op":"health","n":-Infinity}')
@example(b'{"v":1,"op":"health","n":' + b"[" * 100_000 + b"]" * 100_000 + b"}")
@example(b'{"v":1,"op":"health","s":"\\ud800"}')
@example(b'{"v":1,"op":"health"}' * 2)
def test_any_bytes_decode_to_a_checked_request_or_one_protocol_error(line):
    _decoded_or_refused(line)


@FUZZ
@given(st.dictionaries(st.sampled_from(["v", "op", "job", "job_id", "x"]), json_values, max_size=5))
def test_any_json_object_decodes_or_is_refused(obj):
    request = _decoded_or_refused(_text(obj).encode("utf-8", "surrogatepass"))
    if request is not None:
        assert request["op"] == obj["op"]


@FUZZ
@given(st.integers(min_value=0, max_value=3 * MAX_DEPTH))
def test_nesting_beyond_the_bound_is_refused_and_within_it_kept(depth):
    value: object = 1
    for _ in range(depth):
        value = [value]
    line = json.dumps({"v": 1, "op": "health", "x": value}).encode()
    if depth + 1 > MAX_DEPTH:
        with pytest.raises(ProtocolError, match="deeper than"):
            protocol.decode_request(line)
    else:
        assert protocol.decode_request(line)["x"] == value


def test_a_line_over_the_bound_is_refused_before_it_is_read():
    with pytest.raises(ProtocolError, match="longer than"):
        protocol.decode_request(b'{"v":1,"op":"health","pad":"' + b"x" * MAX_LINE + b'"}')


@FUZZ
@given(st.dictionaries(st.sampled_from(["job_id", "iterations", "seconds", "x"]), json_values, max_size=4)
       | st.fixed_dictionaries({"job_id": st.integers(0, 10**25) | st.text(max_size=24),
                                "iterations": st.floats() | st.integers(),
                                "seconds": st.floats() | st.integers()}))
@example({"job_id": "7", "iterations": 1e-300, "seconds": 1e300})
def test_a_report_is_finite_positive_and_bounded_or_refused(fields):
    try:
        report = protocol.parse_report({"v": 1, "op": "report", **fields})
    except ProtocolError:
        return
    assert report.job_id.isdigit() and len(report.job_id) <= 20
    for value in (report.iterations, report.seconds):
        assert math.isfinite(value) and value > 0
    assert MIN_SPEED <= report.iterations / report.seconds <= MAX_SPEED


@FUZZ
@given(st.text(max_size=200) | st.from_regex(r"(ps|worker|x)=[a-z0-9,]{0,12}(;(ps|worker)=[a-z0-9,]{0,12}){0,3}"))
def test_a_layout_parses_to_roles_and_nodes_or_is_refused(text):
    try:
        layout = protocol.parse_layout(text)
    except ProtocolError:
        return
    assert "worker" in layout and set(layout) <= {"ps", "worker"}
    assert all(nodes and all(isinstance(n, str) for n in nodes) for nodes in layout.values())


comments = st.text(max_size=60) | st.builds(
    "slurm-advisor: type={} ps={} workers={}{}".format,
    st.sampled_from(["resnet50", "x", "", "a" * 70]),
    st.integers(-2, 10**12).map(str) | st.sampled_from(["1e9", "nan", "inf", "0x10"]),
    st.integers(-2, 10**12).map(str) | st.sampled_from(["1e9", "nan", "inf", ""]),
    st.sampled_from(["", " model_mb=1e308", " batch=-1", " iters=inf", " bogus=1"]))
fields = st.fixed_dictionaries(
    {"comment": comments},
    optional={"num_tasks": json_values | st.integers(-1, 2**32), "min_nodes": json_values,
              "max_nodes": json_values, "ntasks_per_node": json_values, "tres_per_task": json_values,
              "tres_per_node": json_values, "req_nodes": json_values, "exc_nodes": json_values,
              "partition": json_values, "features": json_values, "bitflags": json_values,
              "pn_min_memory": json_values, "cpus_per_task": json_values, "shared": json_values})


@FUZZ
@given(fields | st.dictionaries(st.text(max_size=12), json_values, max_size=6))
@example({"comment": "slurm-advisor: type=x ps=0 workers=1000000000"})
@example({"comment": f"slurm-advisor: type=x ps=1 workers={MAX_TASKS}"})
def test_a_job_descriptor_reads_to_a_bounded_job_or_one_protocol_error(job):
    try:
        sub = submission(job)
    except ProtocolError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert 1 <= sub.num_tasks <= MAX_TASKS  # no comment makes a per-task structure beyond it
    request = sub.request
    assert request.min_nodes >= 1 and (request.max_nodes is None or request.max_nodes >= request.min_nodes)
