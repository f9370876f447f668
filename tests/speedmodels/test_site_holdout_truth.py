"""The frozen held-out truth (benchmarks/truths/site_holdout.py): it loads as a plug-in, and its
orders of magnitude are those its docstring cites. These tests guard the freeze: a change to a
constant that moves these figures fails here."""
from pathlib import Path

import pytest

from slurm_advisor.domain import Job, Node, Placement, Resources, Role, RunningJob, TaskAssignment
from slurm_advisor.domain.jobtypes import KNOWN_TYPES
from slurm_advisor.speedmodels.plugin import PluginSpeedModel

TRUTH = Path(__file__).resolve().parents[2] / "benchmarks" / "truths" / "site_holdout.py"
NODES = tuple(Node(f"n{i}", 48, 8, 384_000, f"s{i // 8}") for i in range(16))
WORKER, PS = Resources(4, 1, 24_000), Resources(4, 0, 16_000)


@pytest.fixture(scope="module")
def truth():
    return PluginSpeedModel(f"{TRUTH}:SiteHoldoutSpeeds")


def running(job_id, job_type, worker_nodes, ps_nodes=(), worker=WORKER):
    job = Job(job_id, job_type, len(ps_nodes), len(worker_nodes), PS if ps_nodes else Resources(),
              worker, 1000, 0.0)
    tasks = [TaskAssignment(Role.PS, n) for n in ps_nodes] + [TaskAssignment(Role.WORKER, n)
                                                                  for n in worker_nodes]
    return RunningJob(job, Placement(job_id, tuple(tasks)), 0.0)


def speed(truth, jobs, job_id="a"):
    return truth.speeds(NODES, jobs)[job_id]


def test_site_types_are_not_the_projects():
    from importlib.util import module_from_spec, spec_from_file_location
    spec = spec_from_file_location("site_holdout", TRUTH)
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not set(module.SITE_TYPES) & set(KNOWN_TYPES)


def test_node_sharing_costs_about_a_tenth(truth):
    """A 1-GPU job beside seven host-heavy 1-GPU jobs on one node: 3-18 % slower, never multiples."""
    heavy = Resources(6, 1, 24_000)
    for job_type in ("ctr-ranker-v3", "seg-unet-3d", "lm-lora-13b", "some-new-type"):
        alone = speed(truth, [running("a", job_type, ["n0"])])
        crowd = [running("a", job_type, ["n0"])] + [running(f"o{k}", "gnn-sage-prod", ["n0"], worker=heavy)
                                                   for k in range(7)]
        assert 1.03 <= alone / speed(truth, crowd) <= 1.18, job_type


def test_leaving_the_node_costs_communication_heavy_jobs_most(truth):
    def split_cost(job_type):
        one = speed(truth, [running("a", job_type, ["n0"] * 8)])
        return one / speed(truth, [running("a", job_type, ["n0"] * 4 + ["n1"] * 4)])
    assert split_cost("ctr-ranker-v3") > 1.5
    assert split_cost("diffusion-xl") > 1.2
    assert split_cost("lm-lora-13b") < 1.02


def test_uplinks_are_shared_by_every_job_crossing_them(truth):
    """A job crossing switches alone keeps its NIC rate; beside six others crossing the same
    uplinks it slows, though its own nodes are not shared (the global effect)."""
    alone = speed(truth, [running("a", "diffusion-xl", ["n0"] * 4 + ["n8"] * 4)])
    others = [running(f"o{k}", "diffusion-xl", [f"n{1 + k}", f"n{9 + k}"]) for k in range(6)]
    assert alone / speed(truth, [running("a", "diffusion-xl", ["n0"] * 4 + ["n8"] * 4)] + others) > 1.15


def test_a_ps_beside_its_workers_beats_a_remote_one(truth):
    local = speed(truth, [running("a", "ctr-ranker-v3", ["n0"] * 8, ps_nodes=["n0", "n0"])])
    remote = speed(truth, [running("a", "ctr-ranker-v3", ["n0"] * 4 + ["n1"] * 4, ps_nodes=["n2", "n3"])])
    assert local > 1.2 * remote
