"""User speed-model plug-ins: plain data in, checked speeds out, every mistake one InputError."""
import json
import textwrap
from pathlib import Path

import pytest

from slurm_advisor.domain import Job, Node, Placement, Resources, RunningJob
from slurm_advisor.errors import InputError
from slurm_advisor.speedmodels import BUILTIN, load_speed_model
from slurm_advisor.speedmodels.contention import ContentionSpeedModel
from slurm_advisor.speedmodels.plugin import PluginSpeedModel, parse_plugin_spec

NODES = [Node("n1", 32, 8, 256_000, "s1", frozenset({"v100"})), Node("n2", 16, 4, 128_000)]
PS_JOB = Job("p", "vgg16", 1, 2, Resources(4, 0, 16_000), Resources(4, 1, 24_000), 100.0, user="u",
             model_size_mb=500.0, batch_size=32)
AR_JOB = Job("r", "mystery", 0, 1, Resources(), Resources(2, 2, 8_000), 5.0)
RUNNING = [RunningJob(PS_JOB, Placement.of(PS_JOB, ["n2", "n1", "n2"]), 3.0),
           RunningJob(AR_JOB, Placement.of(AR_JOB, ["n1"]))]

RECORDING = '''
import json


class Recorder:
    def __init__(self, log, speed=1.5):
        self.log, self.speed = log, speed

    def speeds(self, nodes, jobs):
        with open(self.log, "a") as f:
            f.write(json.dumps({"nodes": nodes, "jobs": jobs}) + "\\n")
        return {j["id"]: self.speed for j in jobs}
'''


def plugin(tmp_path: Path, body: str, name: str = "plug.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def answering(tmp_path: Path, answer: str) -> PluginSpeedModel:
    """A plug-in whose speeds() evaluates ``answer`` (with ``jobs`` in scope)."""
    path = plugin(tmp_path, f"class Model:\n    def speeds(self, nodes, jobs):\n        return {answer}\n")
    return PluginSpeedModel(f"{path}:Model")


def test_plugin_receives_exactly_the_documented_plain_data(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    path = plugin(tmp_path, RECORDING)
    model = load_speed_model(f"{path}:Recorder:{json.dumps({'log': str(log)})}")
    assert isinstance(model.inner, PluginSpeedModel)
    assert model.local is False
    assert model.name == "plug.py:Recorder"
    assert model.speeds(NODES, RUNNING) == {"p": 1.5, "r": 1.5}
    received = json.loads(log.read_text())
    assert received["nodes"] == [
        {"name": "n1", "cpus": 32, "gpus": 8, "mem_mb": 256_000, "switch": "s1"},
        {"name": "n2", "cpus": 16, "gpus": 4, "mem_mb": 128_000, "switch": None},
    ]
    assert received["jobs"] == [
        {"id": "p", "type": "vgg16", "num_ps": 1, "num_workers": 2, "tasks": [
            {"role": "ps", "node": "n2", "cpus": 4, "gpus": 0, "mem_mb": 16_000},
            {"role": "worker", "node": "n1", "cpus": 4, "gpus": 1, "mem_mb": 24_000},
            {"role": "worker", "node": "n2", "cpus": 4, "gpus": 1, "mem_mb": 24_000}]},
        {"id": "r", "type": "mystery", "num_ps": 0, "num_workers": 1, "tasks": [
            {"role": "worker", "node": "n1", "cpus": 2, "gpus": 2, "mem_mb": 8_000}]},
    ]


def test_plugin_sees_every_job_even_when_asked_for_some(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    model = PluginSpeedModel(f"{plugin(tmp_path, RECORDING)}:Recorder:{json.dumps({'log': str(log)})}")
    assert model.speeds(NODES, RUNNING, only={"r"}) == {"r": 1.5}
    assert [j["id"] for j in json.loads(log.read_text())["jobs"]] == ["p", "r"]


def test_no_running_jobs_never_calls_the_plugin(tmp_path: Path) -> None:
    assert answering(tmp_path, "1 / 0").speeds(NODES, []) == {}


def test_json_kwargs_reach_the_constructor(tmp_path: Path) -> None:
    path = plugin(tmp_path, '''
        class Scaled:
            def __init__(self, scale=1.0, label=""):
                self.scale, self.label = scale, label

            def speeds(self, nodes, jobs):
                assert self.label == "a:b"
                return {j["id"]: self.scale * len(j["tasks"]) for j in jobs}
        ''')
    model = load_speed_model(f'{path}:Scaled:{{"scale": 2, "label": "a:b"}}')
    assert model.speeds(NODES, RUNNING) == {"p": 6.0, "r": 2.0}
    assert PluginSpeedModel(f"{path}:Scaled:{{\"label\": \"a:b\"}}").speeds(NODES, RUNNING)["p"] == 3.0


def test_parse_plugin_spec() -> None:
    assert parse_plugin_spec("dir/m.py:Cls") == (Path("dir/m.py"), "Cls", {})
    assert parse_plugin_spec('m.py:Cls:{"x": "1:2"}') == (Path("m.py"), "Cls", {"x": "1:2"})


@pytest.mark.parametrize("answer, words", [
    ("{j['id']: 1 / 0 for j in jobs}", ["raised ZeroDivisionError"]),
    ("{'p': 1.0}", ["no speed for job 'r'"]),
    ("{'p': 1.0, 'r': -2.0}", ["job 'r'", "positive and finite", "-2.0"]),
    ("{'p': 0.0, 'r': 1.0}", ["job 'p'", "positive and finite"]),
    ("{'p': float('nan'), 'r': 1.0}", ["job 'p'", "nan"]),
    ("{'p': 1.0, 'r': float('inf')}", ["job 'r'", "inf"]),
    ("{'p': 'fast', 'r': 1.0}", ["job 'p'", "not a number", "'fast'"]),
    ("{'p': None, 'r': 1.0}", ["job 'p'", "not a number"]),
    ("[1.0, 2.0]", ["must return a dict", "list"]),
    ("None", ["must return a dict", "NoneType"]),
])
def test_bad_answers_name_the_plugin_and_the_job(tmp_path: Path, answer: str, words: list[str]) -> None:
    model = answering(tmp_path, answer)
    with pytest.raises(InputError) as err:
        model.speeds(NODES, RUNNING)
    message = str(err.value)
    assert "plug.py:Model" in message
    for word in words:
        assert word in message


def test_answers_for_unasked_jobs_are_not_checked(tmp_path: Path) -> None:
    assert answering(tmp_path, "{'p': -1.0, 'r': 2}").speeds(NODES, RUNNING, only={"r"}) == {"r": 2.0}


@pytest.mark.parametrize("body, spec_tail, words", [
    ("class Model:\n    pass\n", "Model", ["plug.py:Model", "no speeds(nodes, jobs) method"]),
    (("class Model:\n    def __init__(self):\n        raise RuntimeError('no licence')\n"
      "    def speeds(self, nodes, jobs):\n        return {}\n"), "Model",
     ["plug.py:Model", "constructor failed", "RuntimeError", "no licence"]),
    ("class Model:\n    def __init__(self, scale=1):\n        pass\n", 'Model:{"bogus": 1}',
     ["plug.py:Model", "constructor failed", "TypeError", "bogus"]),
    ("class Model:\n    pass\n", "Other", ["plug.py", "no class named 'Other'"]),
    ("Model = 3\n", "Model", ["plug.py", "no class named 'Model'"]),
    ("def broken(:\n", "Model", ["plug.py", "import failed", "SyntaxError"]),
    ("import no_such_module_xyz\n", "Model", ["plug.py", "import failed", "no_such_module_xyz"]),
    ("class Model:\n    pass\n", "Model:{not json}", ["plug.py", "not JSON"]),
    ("class Model:\n    pass\n", "Model:[1, 2]", ["plug.py", "JSON object"]),
])
def test_bad_plugins_fail_to_load_with_one_message(tmp_path: Path, body: str, spec_tail: str,
                                                   words: list[str]) -> None:
    path = plugin(tmp_path, body)
    with pytest.raises(InputError) as err:
        load_speed_model(f"{path}:{spec_tail}")
    for word in words:
        assert word in str(err.value)


def test_missing_plugin_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found") as err:
        load_speed_model(f"{tmp_path}/nowhere.py:Model")
    assert "nowhere.py" in str(err.value)


def test_two_plugins_with_the_same_file_name_stay_apart(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = plugin(tmp_path / "a", "class M:\n    def speeds(self, nodes, jobs):\n"
                                 "        return {j['id']: 1.0 for j in jobs}\n")
    two = plugin(tmp_path / "b", "class M:\n    def speeds(self, nodes, jobs):\n"
                                 "        return {j['id']: 2.0 for j in jobs}\n")
    first, second = PluginSpeedModel(f"{one}:M"), PluginSpeedModel(f"{two}:M")
    assert first.speeds(NODES, RUNNING)["p"] == 1.0
    assert second.speeds(NODES, RUNNING)["p"] == 2.0


def test_builtin_contention() -> None:
    assert isinstance(load_speed_model("contention").inner, ContentionSpeedModel)


@pytest.mark.parametrize("spec", ["nonsense", "contention:x", "gavel", "pollux", "", "model.pyc"])
def test_unknown_builtin_lists_the_valid_ones(spec: str) -> None:
    with pytest.raises(InputError) as err:
        load_speed_model(spec)
    message = str(err.value)
    assert f"'{spec}'" in message
    for name in BUILTIN:
        assert name in message
    assert "file.py:ClassName" in message


@pytest.mark.parametrize("where", ["import", "constructor", "speeds"])
@pytest.mark.parametrize("raise_", ["SystemExit(0)", "SystemExit('bye')", "GeneratorExit()"])
def test_a_plugin_raising_systemexit_or_a_baseexception_is_one_message(tmp_path: Path, where: str,
                                                                       raise_: str) -> None:
    body = {"import": f"raise {raise_}\nclass Model:\n    pass\n",
            "constructor": f"class Model:\n    def __init__(self):\n        raise {raise_}\n"
                           "    def speeds(self, nodes, jobs):\n        return {{}}\n",
            "speeds": f"class Model:\n    def speeds(self, nodes, jobs):\n        raise {raise_}\n"}[where]
    path = plugin(tmp_path, body)
    with pytest.raises(InputError) as err:
        load_speed_model(f"{path}:Model").speeds(NODES, RUNNING)
    assert "plug.py" in str(err.value) and raise_.split("(")[0] in str(err.value)


def test_keyboard_interrupt_in_a_plugin_still_interrupts(tmp_path: Path) -> None:
    path = plugin(tmp_path, "class Model:\n    def speeds(self, nodes, jobs):\n        raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        load_speed_model(f"{path}:Model").speeds(NODES, RUNNING)
