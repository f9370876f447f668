"""slurm/request.read: the job_submit hook's job_desc fields into a Submission, field by field.

The fields are literal dicts as the job submit hook (``hooks/slurm_advisor.lua``) sends them: Slurm's field names, a value
Slurm holds as unset sent as null, or (the fields the hook passes through as numbers) as Slurm's
own NO_VAL sentinels: NO_VAL = 4294967294, NO_VAL16 = 65534.
"""
import re
from pathlib import Path

import pytest

from slurm_advisor.domain import JobRequest, Resources
from slurm_advisor.slurm.marker import Marker, MarkerError
from slurm_advisor.slurm.request import MODELLED, UNMODELLED, Mismatch, read

NO_VAL, NO_VAL16 = 4294967294, 65534
NOW = 1_700_000_000.0
HOOK = Path(__file__).resolve().parents[2] / "hooks" / "slurm_advisor.lua"  # the hook's module: read_job

#: what sbatch leaves unset, as the hook sends it (slurm_init_job_desc_msg of 22.05; null for the
#: fields the hook maps through unset_as_nil and for unset strings)
UNSET_22_05 = {
    "name": "train.sbatch", "user_id": 1000, "partition": None, "num_tasks": None, "cpus_per_task": None,
    "pn_min_memory": None, "mem_per_cpu": None, "tres_per_task": None, "tres_per_node": None,
    "time_limit": None, "min_nodes": None, "max_nodes": None, "req_nodes": None, "exc_nodes": None,
    "features": None, "tres_per_job": None, "tres_per_socket": None, "cpus_per_tres": None,
    "mem_per_tres": None, "ntasks_per_node": NO_VAL16, "ntasks_per_socket": NO_VAL16,
    "ntasks_per_core": NO_VAL16, "ntasks_per_board": 0, "ntasks_per_tres": 0, "sockets_per_node": NO_VAL16,
    "cores_per_socket": NO_VAL16, "threads_per_core": NO_VAL16, "boards_per_node": 0, "core_spec": NO_VAL16,
    "thread_spec": 0, "pn_min_cpus": NO_VAL16, "pn_min_tmp_disk": NO_VAL, "max_cpus": NO_VAL,
    "shared": NO_VAL16, "contiguous": NO_VAL16, "req_switch": NO_VAL, "wait4switch": NO_VAL,
    "segment_size": None, "reservation": None, "batch_features": None, "priority": NO_VAL,
    "dependency": None, "begin_time": 0, "bitflags": 0,
}


def fields(ps: int = 0, workers: int = 2, **extra) -> dict:
    """``sbatch -n ps+workers --comment <marker>`` and ``extra``, all else unset as 22.05 sends it."""
    return {**UNSET_22_05, "comment": f"slurm-advisor: type=resnet50 ps={ps} workers={workers}",
            "num_tasks": ps + workers, **extra}


def request(**extra) -> JobRequest:
    sub = read(fields(**extra), now=NOW)
    assert sub.unmodelled is None, sub.unmodelled
    return sub.request


# -- what an unmarked or plain job gives ----------------------------------------------------------
def test_a_plain_job_asks_nothing_beyond_its_tasks() -> None:
    sub = read(fields(ps=1, workers=3), now=NOW)
    assert sub.marker == Marker("resnet50", 1, 3)
    assert (sub.num_tasks, sub.task, sub.request) == (4, Resources(1, 0, 0), JobRequest())
    assert (sub.unmodelled, sub.unpinnable, sub.not_now) == (None, None, None)


def test_every_field_unset_as_null_reads_as_unset_too() -> None:
    nulls = {name: None for name in UNSET_22_05}
    sub = read({**nulls, "comment": "slurm-advisor: type=vgg16 ps=0 workers=3"}, now=NOW)
    assert (sub.num_tasks, sub.task, sub.request, sub.unmodelled, sub.not_now) == \
        (3, Resources(1, 0, 0), JobRequest(), None, None)


@pytest.mark.parametrize("name, sentinel", [
    ("num_tasks", NO_VAL), ("cpus_per_task", NO_VAL16), ("min_nodes", NO_VAL), ("max_nodes", NO_VAL),
    ("ntasks_per_node", NO_VAL16), ("shared", NO_VAL16), ("contiguous", NO_VAL16), ("req_switch", NO_VAL),
    ("wait4switch", NO_VAL), ("pn_min_cpus", NO_VAL16), ("priority", NO_VAL), ("max_nodes", 0xFFFFFFFF),
    ("ntasks_per_socket", NO_VAL16), ("threads_per_core", NO_VAL16), ("core_spec", NO_VAL16),
    ("pn_min_tmp_disk", NO_VAL), ("max_cpus", NO_VAL), ("ntasks_per_tres", NO_VAL16), ("segment_size", NO_VAL16),
])
def test_slurms_unset_sentinels_read_as_unset(name, sentinel) -> None:
    sub = read(fields(**{name: sentinel}), now=NOW)
    assert (sub.num_tasks, sub.task, sub.request) == (2, Resources(1, 0, 0), JobRequest())
    assert (sub.unmodelled, sub.unpinnable, sub.not_now) == (None, None, None)


# -- each modelled field --------------------------------------------------------------------------
@pytest.mark.parametrize("min_nodes, max_nodes, expected", [
    (2, 2, (2, 2)),            # -N 2
    (2, 4, (2, 4)),            # -N 2-4
    (3, None, (3, None)),      # -N 3- (no maximum)
    (0, None, (1, None)),      # a zero minimum is Slurm's one node
])
def test_the_node_count_range(min_nodes, max_nodes, expected) -> None:
    r = request(workers=4, min_nodes=min_nodes, max_nodes=max_nodes)
    assert (r.min_nodes, r.max_nodes) == expected


def test_cpus_per_task_shape_every_task() -> None:
    sub = read(fields(ps=1, workers=3, cpus_per_task=4), now=NOW)
    assert sub.task == Resources(4, 0, 0)
    job = sub.job("d-1")
    assert job.ps_demand == job.worker_demand == Resources(4, 0, 0)


def test_ntasks_per_node_is_a_maximum_per_node() -> None:
    assert request(workers=8, ntasks_per_node=4).max_tasks_per_node == 4


def test_n_with_ntasks_per_node_and_no_task_count_makes_the_task_count() -> None:
    # -N 2 --ntasks-per-node=4, marker workers=8: slurmctld makes it 8 tasks
    sub = read(fields(workers=8, num_tasks=None, min_nodes=2, max_nodes=2, ntasks_per_node=4), now=NOW)
    assert sub.num_tasks == 8 and sub.request.max_tasks_per_node == 4


def test_memory_per_cpu_is_each_tasks_cpus_times_it() -> None:
    sub = read(fields(cpus_per_task=2, pn_min_memory=1500, mem_per_cpu=True), now=NOW)
    assert sub.task == Resources(2, 0, 3000)
    assert sub.request.mem_per_node_mb == 0


def test_memory_per_node_must_be_free_on_every_node() -> None:
    # -n 4 --mem=10000: Slurm chooses the tasks per node, so no task claims a share
    sub = read(fields(workers=4, pn_min_memory=10_000, mem_per_cpu=False), now=NOW)
    assert (sub.task, sub.request.mem_per_node_mb) == (Resources(1, 0, 0), 10_000)


def test_memory_per_node_is_shared_by_a_fixed_task_count_per_node() -> None:
    # -N 2 -n 6 --ntasks-per-node=3 --mem=10000: three tasks on each node share 10000 MB
    sub = read(fields(workers=6, min_nodes=2, max_nodes=2, ntasks_per_node=3, pn_min_memory=10_000,
                      mem_per_cpu=False), now=NOW)
    assert (sub.task, sub.request.mem_per_node_mb) == (Resources(1, 0, 3334), 10_000)


@pytest.mark.parametrize("tres", [
    "gres:gpu:2",        # 22.05
    "gres/gpu:2",        # 24.11
    "gres/gpu=2",
    "cpu=3,gres/gpu:2",  # 24.11 repeats -c there
    "gres/gpu:2,cpu=3",
])
def test_gpus_per_task_in_every_releases_spelling(tres) -> None:
    sub = read(fields(cpus_per_task=3, tres_per_task=tres), now=NOW)
    assert sub.task == Resources(3, 2, 0)
    assert sub.request.gpus_per_node == 0


def test_a_tres_per_task_of_cpus_only_asks_no_gpus() -> None:
    assert read(fields(cpus_per_task=2, tres_per_task="cpu=2"), now=NOW).task == Resources(2, 0, 0)


@pytest.mark.parametrize("tres", ["gres:gpu:4", "gres/gpu:4", "gres/gpu=4"])
def test_gpus_per_node_with_a_fixed_task_count_per_node_split_over_its_tasks(tres) -> None:
    # -N 2 --ntasks-per-node=2 --gpus-per-node=4 (or --gres=gpu:4)
    sub = read(fields(workers=4, min_nodes=2, max_nodes=2, ntasks_per_node=2, tres_per_node=tres), now=NOW)
    assert (sub.task, sub.request.gpus_per_node, sub.unpinnable) == (Resources(1, 2, 0), 4, None)


def test_gpus_per_node_with_one_task_per_node() -> None:
    # -N 3 -n 3 --gpus-per-node=2: Slurm has no choice but one task per node
    sub = read(fields(workers=3, min_nodes=3, max_nodes=3, tres_per_node="gres:gpu:2"), now=NOW)
    assert (sub.task.gpus, sub.request.gpus_per_node, sub.unpinnable) == (2, 2, None)


def test_gpus_per_task_and_per_node_together() -> None:
    sub = read(fields(workers=4, tres_per_task="gres:gpu:1", tres_per_node="gres:gpu:2"), now=NOW)
    assert (sub.task.gpus, sub.request.gpus_per_node, sub.unpinnable) == (1, 2, None)


def test_required_and_excluded_nodes_from_host_lists() -> None:
    r = request(workers=4, req_nodes="n[1-2],gpu07", exc_nodes="n[3-4]")
    assert r.required == {"n1", "n2", "gpu07"}
    assert r.excluded == {"n3", "n4"}


def test_features_joined_by_and() -> None:
    assert request(features="a100").features == {"a100"}
    assert request(features="a100&ib").features == {"a100", "ib"}


def test_one_partition() -> None:
    sub = read(fields(partition="gpu"), now=NOW)
    assert (sub.request.partition, sub.unpinnable) == ("gpu", None)


@pytest.mark.parametrize("shared, exclusive", [(0, True), (1, False), (NO_VAL16, False), (None, False)])
def test_exclusive_and_oversubscribe(shared, exclusive) -> None:
    # --exclusive: shared=0; --oversubscribe: shared=1
    r = request(workers=2, min_nodes=2, max_nodes=2, shared=shared)
    assert r.exclusive is exclusive


def test_contiguous() -> None:
    assert request(contiguous=1).contiguous
    assert not request(contiguous=0).contiguous


def test_switches_and_their_wait() -> None:
    assert request(req_switch=1, wait4switch=300).max_switches == 1
    assert request(req_switch=0, wait4switch=300).max_switches is None


def test_the_whole_canonical_data_parallel_line() -> None:
    # sbatch -N 2 --ntasks-per-node=4 --gpus-per-node=4 -c 2 --mem-per-cpu=2000 -p gpu -C a100
    #        -x n3 --exclusive --contiguous --switches=1@5:00, marker ps=0 workers=8
    sub = read(fields(workers=8, num_tasks=None, min_nodes=2, max_nodes=2, ntasks_per_node=4,
                      tres_per_node="gres:gpu:4", cpus_per_task=2, pn_min_memory=2000, mem_per_cpu=True,
                      partition="gpu", features="a100", exc_nodes="n3", shared=0, contiguous=1,
                      req_switch=1, wait4switch=300), now=NOW)
    assert (sub.num_tasks, sub.task, sub.unmodelled, sub.unpinnable, sub.not_now) == \
        (8, Resources(2, 1, 4000), None, None, None)
    assert sub.request == JobRequest(min_nodes=2, max_nodes=2, max_tasks_per_node=4, gpus_per_node=4,
                                     excluded=frozenset({"n3"}), features=frozenset({"a100"}), partition="gpu",
                                     exclusive=True, contiguous=True, max_switches=1)
    job = sub.job("d-1", user="1000", time_limit_s=600.0)
    assert (job.id, job.num_ps, job.num_workers, job.request, job.time_limit_s) == \
        ("d-1", 0, 8, sub.request, 600.0)


def test_counts_sent_as_whole_floats_are_read() -> None:
    sub = read(fields(num_tasks=2.0, cpus_per_task=2.0, min_nodes=2.0, max_nodes=2.0), now=NOW)
    assert (sub.task.cpus, sub.request.min_nodes, sub.unmodelled) == (2, 2, None)


# -- what is not modelled leaves the job to Slurm, naming the option ------------------------------
_TEXT = {"tres_per_job": "gres:gpu:4", "tres_per_socket": "gres:gpu:1", "cpus_per_tres": "gres:gpu:4",
         "mem_per_tres": "gres:gpu:8000", "reservation": "maint", "batch_features": "bigmem"}


@pytest.mark.parametrize("field, option", sorted(UNMODELLED.items()))
def test_each_unmodelled_field_names_its_option(field, option) -> None:
    sub = read(fields(ps=1, workers=1, cpus_per_task=2, **{field: _TEXT.get(field, 2)}), now=NOW)
    assert sub.unmodelled == f"unmodelled option: {option} ({field})"
    assert (sub.num_tasks, sub.task.cpus) == (2, 2)
    assert sub.job("d-1").request is None  # a job left to Slurm carries no request


@pytest.mark.parametrize("extra, option, detail", [
    ({"tres_per_node": "gres:gpu:a100:2"}, "tres_per_node", "typed GPUs gpu:a100"),
    ({"tres_per_node": "gres/gpu:a100:2"}, "tres_per_node", "typed GPUs gpu:a100"),
    ({"tres_per_task": "gres:gpu:tesla:1"}, "tres_per_task", "typed GPUs gpu:tesla"),
    ({"tres_per_node": "gres:mps:100"}, "tres_per_node", "GRES mps"),
    ({"tres_per_node": "gres/shard:2"}, "tres_per_node", "GRES shard"),
    ({"tres_per_node": "gres:gpu:2,gres:nic:1"}, "tres_per_node", "GRES nic"),
    ({"tres_per_node": "cpu=2"}, "tres_per_node", "GRES cpu"),
    ({"tres_per_task": "gres:gpu"}, "tres_per_task", "cannot read 'gres:gpu'"),
    ({"tres_per_task": "gres:gpu:two"}, "tres_per_task", "cannot read"),
    ({"tres_per_task": 2}, "tres_per_task", "not a string"),
    ({"features": "a100|v100"}, "-C/--constraint", "only features joined by & are modelled"),
    ({"features": "[rack1*2&rack2*4]"}, "-C/--constraint", "only features joined by & are modelled"),
    ({"partition": "gpu;rm"}, "-p/--partition", "a name of letters, digits and ._-"),
    ({"shared": 2}, "--exclusive=user/mcs/topo", "shared"),
    ({"req_nodes": "n[1-"}, "req_nodes", "unclosed"),
    ({"exc_nodes": "$(reboot)"}, "exc_nodes", "bad node name"),
    ({"min_nodes": 3, "max_nodes": 2}, "-N/--nodes", "range 3-2"),
    ({"cpus_per_task": -1}, "cpus_per_task", "not a count: -1"),
    ({"cpus_per_task": 1.5}, "cpus_per_task", "not a count: 1.5"),
    ({"cpus_per_task": True}, "cpus_per_task", "not a count: True"),
    ({"cpus_per_task": "2"}, "cpus_per_task", "not a count: '2'"),
    ({"min_nodes": 2**31}, "min_nodes", "out of range"),
    ({"pn_min_cpus": 8}, "--mincpus", "pn_min_cpus"),
])
def test_what_cannot_be_read_is_unmodelled(extra, option, detail) -> None:
    sub = read(fields(**extra), now=NOW)
    assert sub.unmodelled is not None
    assert sub.unmodelled.startswith(f"unmodelled option: {option} (")
    assert detail in sub.unmodelled


def test_mincpus_within_what_the_tasks_take_is_modelled() -> None:
    # --mincpus=4 with -N 2 --ntasks-per-node=2 -c 2: every node gets 4 CPUs anyway
    sub = read(fields(workers=4, min_nodes=2, max_nodes=2, ntasks_per_node=2, cpus_per_task=2, pn_min_cpus=4),
               now=NOW)
    assert sub.unmodelled is None


@pytest.mark.parametrize("extra, option, detail", [
    # sbatch -w n[1-2] -x n2: Slurm rejects it itself; the advisor records why and leaves it be
    ({"req_nodes": "n[1-2]", "exc_nodes": "n2"}, "-w/-x", "a node both required and excluded"),
    ({"ntasks_per_node": 0}, "--ntasks-per-node", "ntasks_per_node=0"),
    # sbatch -N 2 without -n, the marker's one task: Slurm would run it on two nodes
    ({"workers": 1, "num_tasks": None, "min_nodes": 2, "max_nodes": 2}, "-N/--nodes", "2 nodes for the marker's 1 tasks"),
])
def test_a_request_that_contradicts_itself_or_the_marker_is_unmodelled(extra, option, detail) -> None:
    sub = read(fields(**extra), now=NOW)
    assert sub.unmodelled == f"unmodelled option: {option} ({detail})"


@pytest.mark.parametrize("flags, option", [
    (1 << 4, "--gres-flags=enforce-binding"), (1 << 8, "--spread-job"), ((1 << 8) | 1, "--spread-job"),
    (-1, "bitflags"), (True, "bitflags"), ("16", "bitflags"),
])
def test_bitflags_that_constrain_placement_are_unmodelled(flags, option) -> None:
    sub = read(fields(bitflags=flags), now=NOW)
    assert sub.unmodelled is not None and sub.unmodelled.startswith(f"unmodelled option: {option} (")


@pytest.mark.parametrize("flags", [None, 0, 1, 1 << 2, (1 << 4) - 1])
def test_other_bitflags_change_nothing(flags) -> None:
    sub = read(fields(bitflags=flags), now=NOW)
    assert (sub.unmodelled, sub.request) == (None, JobRequest())


def test_every_field_the_hook_sends_is_read_or_refused() -> None:
    text = HOOK.read_text()
    body = text[text.index("local function read_job"):]
    sent = set(re.findall(r'\{ "(\w+)", ', body[:body.index("\nend\n")]))
    modelled = set(re.findall(r"[a-z][a-z0-9_]+", " ".join(MODELLED.values())))
    informational = {"comment", "name", "user_id", "time_limit"}
    # the hook sends min_mem_per_cpu/_node as pn_min_memory and a flag; --mincpus is read where it
    # asks no more than the tasks take; bitflags bit by bit
    read_apart = {"pn_min_memory", "mem_per_cpu", "pn_min_cpus", "bitflags"}
    assert sent, "read_job's field list was not found in the hook"
    assert sent - modelled - set(UNMODELLED) - informational - read_apart == set()


# -- the marker against the job's own task count --------------------------------------------------
@pytest.mark.parametrize("extra, message", [
    ({"num_tasks": 3}, "job.num_tasks is 3 but the marker says ps=0 workers=2"),
    # -N 2 --ntasks-per-node=2: slurmctld makes it 4 tasks
    ({"num_tasks": None, "min_nodes": 2, "max_nodes": 2, "ntasks_per_node": 2}, "job.num_tasks is 4"),
    ({"comment": "nightly run"}, "carries no 'slurm-advisor:' marker"),
    ({"comment": None}, "carries no 'slurm-advisor:' marker"),
    ({"comment": 7}, "job.comment must be a string"),
])
def test_a_marker_that_disagrees_or_is_missing_is_a_mismatch(extra, message) -> None:
    with pytest.raises(Mismatch, match=re.escape(message)):
        read(fields(**extra), now=NOW)


def test_a_task_count_with_an_unmodelled_option_still_must_match() -> None:
    with pytest.raises(Mismatch, match="job.num_tasks is 5"):
        read(fields(num_tasks=5, reservation="maint"), now=NOW)


def test_not_a_dict_is_a_mismatch() -> None:
    with pytest.raises(Mismatch, match="must be an object"):
        read(["comment", "slurm-advisor: type=x ps=0 workers=1"], now=NOW)


def test_a_malformed_marker_is_a_marker_error() -> None:
    with pytest.raises(MarkerError, match="unknown marker key"):
        read(fields(comment="slurm-advisor: type=x ps=0 workers=1 gpus=2"), now=NOW)


def test_no_task_count_takes_the_markers() -> None:
    sub = read(fields(ps=2, workers=6, num_tasks=None, min_nodes=2, max_nodes=4), now=NOW)
    assert (sub.num_tasks, sub.request.min_nodes, sub.request.max_nodes) == (8, 2, 4)


# -- modelled, but not pinned ---------------------------------------------------------------------
@pytest.mark.parametrize("extra, why", [
    # -N 2-4 -n 8 --gpus-per-node=4: Slurm chooses how many tasks each node gets
    ({"workers": 8, "min_nodes": 2, "max_nodes": 4, "tres_per_node": "gres:gpu:4"}, "--gpus-per-node"),
    ({"workers": 8, "tres_per_node": "gres/gpu:4"}, "--gpus-per-node"),
    ({"workers": 6, "min_nodes": 2, "max_nodes": 2, "tres_per_node": "gres:gpu:4"}, "--gpus-per-node"),
    # 3 tasks on each of 2 nodes cannot split 4 GPUs evenly
    ({"workers": 6, "min_nodes": 2, "max_nodes": 2, "ntasks_per_node": 3, "tres_per_node": "gres:gpu:4"},
     "--gpus-per-node"),
    ({"workers": 4, "shared": 0}, "--exclusive"),
    ({"workers": 4, "min_nodes": 2, "max_nodes": 3, "shared": 0}, "--exclusive"),
    ({"workers": 2, "partition": "batch,gpu"}, "several partitions"),
])
def test_what_slurm_lays_out_itself_is_not_pinned(extra, why) -> None:
    sub = read(fields(**extra), now=NOW)
    assert sub.unmodelled is None
    assert sub.unpinnable is not None and why in sub.unpinnable


def test_several_partitions_name_none_in_the_request() -> None:
    assert read(fields(partition="batch,gpu"), now=NOW).request.partition is None


@pytest.mark.parametrize("extra", [
    {"workers": 4, "min_nodes": 2, "max_nodes": 2, "ntasks_per_node": 2, "shared": 0},
    {"workers": 3, "min_nodes": 3, "max_nodes": 3, "shared": 0},
    {"workers": 4, "min_nodes": 2, "max_nodes": 2, "ntasks_per_node": 2, "tres_per_node": "gres:gpu:4"},
])
def test_a_fixed_task_count_per_node_is_pinned(extra) -> None:
    assert read(fields(**extra), now=NOW).unpinnable is None


# -- jobs that cannot start now whatever their nodes ----------------------------------------------
@pytest.mark.parametrize("extra, why", [
    ({"priority": 0}, "held (--hold)"),
    ({"dependency": "afterok:123"}, "waits on a dependency"),
    ({"begin_time": int(NOW) + 3600}, "has a later begin time"),
])
def test_a_job_that_cannot_start_now_says_why(extra, why) -> None:
    sub = read(fields(**extra), now=NOW)
    assert sub.not_now is not None and why in sub.not_now
    assert sub.unmodelled is None


@pytest.mark.parametrize("extra", [
    {"priority": NO_VAL}, {"priority": 1000}, {"dependency": ""}, {"begin_time": 0},
    {"begin_time": int(NOW) - 60}, {"begin_time": int(NOW) + 1},
])
def test_a_job_that_can_start_now(extra) -> None:
    assert read(fields(**extra), now=NOW).not_now is None


def test_not_now_is_kept_for_a_job_left_to_slurm() -> None:
    sub = read(fields(priority=0, reservation="maint"), now=NOW)
    assert sub.unmodelled is not None and sub.not_now is not None
