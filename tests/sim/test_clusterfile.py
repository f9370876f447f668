"""The cluster file: groups of identical nodes; every mistake names the file and the key."""
from pathlib import Path

import pytest

from slurm_advisor.domain import Node
from slurm_advisor.errors import InputError
from slurm_advisor.sim.clusterfile import parse_cluster, read_cluster

REPO = Path(__file__).resolve().parents[2]
GROUP = 'prefix = "gpu"\ncount = 2\ncpus = 32\ngpus = 8\nmem_mb = 256000\n'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def test_example_cluster() -> None:
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")
    assert [n.name for n in nodes] == [f"gpu{i:02d}" for i in range(1, 17)]
    assert all((n.cpus, n.gpus, n.mem_mb) == (48, 8, 384_000) for n in nodes)
    assert [n.switch for n in nodes] == ["s1"] * 8 + ["s2"] * 8


def test_group_fields_and_defaults(tmp_path: Path) -> None:
    text = ("[[nodes]]\n" + GROUP + 'switch = "a"\nfeatures = ["v100", "ib"]\n'
            "[[nodes]]\nprefix = \"cpu\"\ncount = 1\ncpus = 64\ngpus = 0\nmem_mb = 512000\n")
    nodes = read_cluster(write(tmp_path, text))
    assert nodes == (Node("gpu01", 32, 8, 256_000, "a", frozenset({"v100", "ib"})),
                     Node("gpu02", 32, 8, 256_000, "a", frozenset({"v100", "ib"})),
                     Node("cpu01", 64, 0, 512_000))


def test_names_are_zero_padded_to_the_last_number() -> None:
    group = {"prefix": "n", "count": 100, "cpus": 1, "gpus": 0, "mem_mb": 1}
    names = [n.name for n in parse_cluster({"nodes": [group]})]
    assert names[0] == "n001" and names[-1] == "n100" and len(names) == 100
    names = [n.name for n in parse_cluster({"nodes": [dict(group, count=3, start=98)]})]
    assert names == ["n098", "n099", "n100"]


@pytest.mark.parametrize("extra, words", [
    ("colour = \"red\"\n", ["colour", "valid keys", "prefix", "mem_mb", "switch", "features", "start"]),
    ("switch = 3\n", ["'switch'"]),
    ("features = \"v100\"\n", ["'features'"]),
    ("features = [1]\n", ["'features'"]),
    ("start = \"one\"\n", ["'start'"]),
    ("start = -1\n", ["'start'"]),
])
def test_bad_optional_keys(tmp_path: Path, extra: str, words: list[str]) -> None:
    path = write(tmp_path, "[[nodes]]\n" + GROUP + extra)
    with pytest.raises(InputError) as err:
        read_cluster(path)
    message = str(err.value)
    assert str(path) in message and "[[nodes]] #1" in message
    for word in words:
        assert word in message


@pytest.mark.parametrize("key, value", [("count", "0"), ("count", "1.5"), ("cpus", "-1"),
                                        ("gpus", "true"), ("mem_mb", "\"lots\""), ("prefix", "\"\""),
                                        ("prefix", "3")])
def test_bad_required_values(tmp_path: Path, key: str, value: str) -> None:
    lines = [f"{key} = {value}" if line.startswith(f"{key} =") else line for line in GROUP.splitlines()]
    path = write(tmp_path, "[[nodes]]\n" + GROUP + "[[nodes]]\n" + "\n".join(lines).replace(
        '"gpu"', '"other"') + "\n")
    with pytest.raises(InputError) as err:
        read_cluster(path)
    message = str(err.value)
    assert str(path) in message and "[[nodes]] #2" in message and f"'{key}'" in message


@pytest.mark.parametrize("key", ["prefix", "count", "cpus", "gpus", "mem_mb"])
def test_missing_key(tmp_path: Path, key: str) -> None:
    text = "\n".join(line for line in GROUP.splitlines() if not line.startswith(f"{key} ="))
    path = write(tmp_path, "[[nodes]]\n" + text + "\n")
    with pytest.raises(InputError, match=f"missing key '{key}'") as err:
        read_cluster(path)
    assert str(path) in str(err.value)


def test_bad_toml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[[nodes]]\n" + GROUP + "cpus = = 3\n")
    with pytest.raises(InputError) as err:
        read_cluster(path)
    message = str(err.value)
    assert str(path) in message and "not valid TOML" in message and "line 7" in message


def test_duplicate_node_names(tmp_path: Path) -> None:
    path = write(tmp_path, "[[nodes]]\n" + GROUP + "[[nodes]]\n" + GROUP.replace("count = 2", "count = 3"))
    with pytest.raises(InputError) as err:
        read_cluster(path)
    message = str(err.value)
    assert str(path) in message and "gpu01" in message and "gpu02" in message and "gpu03" not in message


@pytest.mark.parametrize("text, words", [
    ("", "at least one [[nodes]]"),
    ("nodes = []\n", "at least one [[nodes]]"),
    ("[nodes]\nprefix = \"a\"\n", "at least one [[nodes]]"),
    ("nodes = [1, 2]\n", "[[nodes]] #1"),
    ("[[node]]\n" + GROUP, "unknown top-level key(s) ['node']"),
])
def test_bad_structure(tmp_path: Path, text: str, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as err:
        read_cluster(path)
    assert str(path) in str(err.value) and words in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read cluster file") as err:
        read_cluster(tmp_path / "none.toml")
    assert "none.toml" in str(err.value)


def test_a_file_that_is_not_utf8_is_one_input_error(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(("[[nodes]]\n" + GROUP + 'switch = "caf\xe9"\n').encode("latin-1"))
    with pytest.raises(InputError) as err:
        read_cluster(path)
    assert str(path) in str(err.value) and "UTF-8" in str(err.value)


@pytest.mark.parametrize("resources", [(0, 0, 0), (0, -1, 0), (-4, 8, 1000)])
def test_nodes_without_resources_are_refused_naming_the_group(tmp_path: Path, resources) -> None:
    cpus, gpus, mem = resources
    other = f'prefix = "empty"\ncount = 3\ncpus = {cpus}\ngpus = {gpus}\nmem_mb = {mem}\n'
    path = write(tmp_path, "[[nodes]]\n" + GROUP + "[[nodes]]\n" + other)
    with pytest.raises(InputError) as err:
        read_cluster(path)
    message = str(err.value)
    assert str(path) in message and "[[nodes]] #2" in message


def test_a_node_with_only_some_resources_is_fine() -> None:
    group = {"prefix": "m", "count": 1, "cpus": 0, "gpus": 0, "mem_mb": 1024}
    assert parse_cluster({"nodes": [group]})[0].mem_mb == 1024


def test_ten_thousand_nodes_parse_in_linear_time(tmp_path: Path) -> None:
    import time

    groups = "".join(f'[[nodes]]\nprefix = "g{i}x"\ncount = 100\ncpus = 32\ngpus = 8\nmem_mb = 1000\n'
                     for i in range(100))
    path = write(tmp_path, groups)
    started = time.perf_counter()
    nodes = read_cluster(path)
    elapsed = time.perf_counter() - started
    assert len(nodes) == 10_000
    assert elapsed < 0.5, f"{elapsed:.2f} s for 10,000 nodes"


@pytest.mark.parametrize("key, value, bound", [("gpus", "100000000000000000000", "1,024"),
                                               ("cpus", "1000000", "65,536"),
                                               ("mem_mb", "10000000000", "1,000,000,000"),
                                               ("count", "100000001", "100,000"), ("start", "10000000000", "1,000,000,000")])
def test_values_beyond_any_cluster_are_refused_naming_the_bound(tmp_path: Path, key: str, value: str,
                                                                bound: str) -> None:
    """gpus = 10^20 ended in numpy's OverflowError; count = 10^8 took simulate to 2.9 GB, silently."""
    lines = [line for line in GROUP.splitlines() if not line.startswith(f"{key} =")]
    path = write(tmp_path, "[[nodes]]\n" + "\n".join(lines) + f"\n{key} = {value}\n")
    with pytest.raises(InputError, match=rf"\[\[nodes\]\] #1: '{key}' must be .*at most {bound}") as err:
        read_cluster(path)
    assert str(path) in str(err.value)


def test_the_node_count_is_bounded_over_all_groups(tmp_path: Path) -> None:
    group = GROUP.replace("count = 2", "count = 60000")
    other = group.replace('"gpu"', '"cpu"')
    path = write(tmp_path, f"[[nodes]]\n{group}[[nodes]]\n{other}")
    with pytest.raises(InputError, match=rf"{path}: 120,000 nodes; a cluster may have at most 100,000"):
        read_cluster(path)


def test_a_cluster_file_over_the_size_bound_is_refused(tmp_path: Path, monkeypatch) -> None:
    from slurm_advisor.sim import clusterfile
    path = write(tmp_path, "[[nodes]]\n" + GROUP)
    monkeypatch.setattr(clusterfile, "MAX_CLUSTER_BYTES", 10)
    with pytest.raises(InputError, match=rf"{path}: more than 10 bytes; a cluster file may hold at most 10"):
        read_cluster(path)
