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
    (b'{"v": 1, "op": "health", "x": ' + b"9" * 5000 + b"}", "integer of 5000 characters"),
    (b'{"v": 1, "op": "health", "x": -' + b"9" * 21 + b"}", "at most 20 digits"),
])
def test_bad_requests_get_one_line_naming_the_problem(line, message):
    with pytest.raises(ProtocolError, match=message):
        protocol.decode_request(line)


def test_encode_refuses_nan():
    with pytest.raises(ValueError):
        protocol.encode({"x": float("nan")})


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
