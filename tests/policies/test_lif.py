"""`lif`: the interference profile fitted from samples, and the placements it leads to."""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources, RunningJob, SpeedSample
from slurm_advisor.errors import InputError
from slurm_advisor.policies import PolicyContext, make_policy
from slurm_advisor.policies.lif import PROFILE_FILE, InterferenceProfile, LifPolicy, fit_profile

PS = Resources(2, 0, 8_000)
WORKER = Resources(2, 1, 8_000)
NODES = tuple(Node(f"n{i}", 32, 8, 256_000) for i in range(1, 5))
# A known law: "a" loses 0.3 of log speed per "b" task beside each of its tasks, 0.05 per "c"
# task; "b" loses 0.1 per "a" task; "c" is never a victim.
LAW = {("a", "b"): 0.3, ("a", "c"): 0.05, ("b", "a"): 0.1}


def running(job_id: str, job_type: str, nodes: list[str], start: float = 0.0, num_ps: int = 0) -> RunningJob:
    job = Job(job_id, job_type, num_ps, len(nodes) - num_ps, PS, WORKER, 100.0)
    return RunningJob(job, Placement.of(job, nodes), start)


def law_samples(seed: int = 0, runs: int = 40) -> list[SpeedSample]:
    """Runs of "a" and "b" jobs, each sampled as neighbours come and go. A run's solo speed falls
    with the exposure it usually has (big jobs are slow and crowded): a fit that compared runs
    with each other instead of each run with itself would blame that on interference."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(runs):
        victim, aggressors = ("a", ("b", "c")) if r % 2 == 0 else ("b", ("a", "c"))
        crowded = r % 4 >= 2
        solo = 1.0 if crowded else 4.0
        two_nodes = r % 3 == 0
        subject = running(f"{victim}{r}", victim, ["n1", "n2"] if two_nodes else ["n1"], start=float(r))
        for t in range(6):
            counts = {g: int(rng.integers(0, 3)) + (2 if crowded else 0) for g in aggressors}
            neighbours = tuple(running(f"{g}{r}-{t}", g, ["n1"] * k) for g, k in counts.items() if k)
            # with two nodes, half of the subject's tasks see the neighbours on n1
            exposure = {g: k / (2 if two_nodes else 1) for g, k in counts.items()}
            loss = sum(LAW.get((victim, g), 0.0) * e for g, e in exposure.items())
            speed = solo * math.exp(-loss + rng.normal(0.0, 0.01))
            out.append(SpeedSample(float(t), subject, neighbours, NODES[:2], speed))
    return out


def test_the_fit_recovers_a_known_pairwise_slowdown() -> None:
    profile = fit_profile(law_samples())
    for (victim, aggressor), cost in LAW.items():
        assert profile.cost(victim, aggressor) == pytest.approx(cost, abs=0.02), (victim, aggressor)
    assert profile.slowdown("a", "b") == pytest.approx(1 - math.exp(-0.3), abs=0.02)
    assert profile.cost("b", "c") == pytest.approx(0.0, abs=0.02)
    assert profile.samples == 240


def test_types_never_seen_fall_back_to_type_independent_averages() -> None:
    profile = fit_profile(law_samples())
    fitted = [profile.cost(v, a) for v, a in LAW]
    assert min(fitted) < profile.overall < max(fitted)
    # a site's own type as victim: how much the aggressor slows anyone; as aggressor: the victim's
    # sensitivity to anyone; both unseen: the overall average
    assert profile.cost("ctr-ranker-v3", "b") == profile.aggressor["b"] > 0
    assert profile.cost("a", "ctr-ranker-v3") == profile.victim["a"] > profile.victim["b"]
    assert profile.cost("ctr-ranker-v3", "feed-embed") == profile.overall
    assert "c" not in profile.victim  # never sampled as a victim


def test_no_samples_give_a_neutral_profile() -> None:
    profile = fit_profile([])
    assert profile.is_neutral and profile.samples == 0
    assert profile.cost("a", "b") == 0.0
    assert not fit_profile(law_samples()).is_neutral


def busy(order: tuple[str, ...] = ("n1", "n2", "n3", "n4")) -> ClusterSnapshot:
    """n1 holds one "b" task (the emptiest node), n2 four "c" tasks, n3 six "c" tasks, n4 full."""
    nodes = tuple(next(n for n in NODES if n.name == name) for name in order)
    snap = ClusterSnapshot.empty(nodes)
    for rj in (running("b1", "b", ["n1"]), running("c2", "c", ["n2"] * 4), running("c3", "c", ["n3"] * 6),
               running("x4", "c", ["n4"] * 8)):
        snap = snap.with_job(rj.job, rj.placement)
    return snap


A_B = InterferenceProfile(pair={("a", "b"): 0.5, ("b", "a"): 0.2})  # "c" costs nothing


def nodes_of(placement: Placement | None) -> list[str] | None:
    return None if placement is None else [t.node for t in placement.tasks]


def test_lif_avoids_the_node_with_the_interfering_type_when_a_clean_node_exists() -> None:
    snap = busy()
    one = Job("j", "a", 0, 1, PS, WORKER, 100.0)
    assert nodes_of(make_policy("spread").place(snap, one)) == ["n1"]  # the least loaded
    assert nodes_of(LifPolicy(A_B).place(snap, one)) == ["n2"]         # the least loaded *clean* one
    ps_job = Job("p", "a", 1, 3, PS, WORKER, 100.0)
    assert "n1" not in nodes_of(LifPolicy(A_B).place(snap, ps_job))
    scores = LifPolicy(A_B).score_nodes(snap, one)
    assert scores["n1"] == pytest.approx(-0.7) and scores["n2"] == scores["n3"] == 0.0
    # a type the profile does not name interferes as little as the profile says of anyone: nothing
    other = Job("o", "ctr-ranker-v3", 0, 1, PS, WORKER, 100.0)
    assert nodes_of(LifPolicy(A_B).place(snap, other)) == ["n1"]


def test_lif_still_places_where_only_the_interfering_node_has_room() -> None:
    snap = busy()
    wide = Job("w", "a", 0, 1, PS, Resources(2, 7, 8_000), 100.0)  # only n1 has 7 free GPUs
    assert nodes_of(LifPolicy(A_B).place(snap, wide)) == ["n1"]
    assert LifPolicy(A_B).place(snap, Job("t", "a", 0, 1, PS, Resources(2, 8, 8_000), 100.0)) is None


def test_the_interference_a_task_causes_counts_as_well_as_what_it_suffers() -> None:
    snap = busy()
    one = Job("j", "a", 0, 1, PS, WORKER, 100.0)
    causes_only = InterferenceProfile(pair={("b", "a"): 0.4})
    assert nodes_of(LifPolicy(causes_only).place(snap, one)) == ["n2"]


def test_ties_go_to_the_least_loaded_node_then_to_slurms_order() -> None:
    snap = ClusterSnapshot.empty(NODES[:2])
    one = Job("j", "a", 0, 1, PS, WORKER, 100.0)
    assert nodes_of(LifPolicy(A_B).place(snap, one)) == ["n1"]
    flipped = ClusterSnapshot.empty((NODES[1], NODES[0]))
    assert nodes_of(LifPolicy(A_B).place(flipped, one)) == ["n2"]
    # n3 and n2 hold only harmless "c" tasks: the emptier n2 wins whatever the order
    for order in (("n1", "n2", "n3", "n4"), ("n4", "n3", "n2", "n1")):
        assert nodes_of(LifPolicy(A_B).place(busy(order), one)) == ["n2"]


def test_lif_is_deterministic() -> None:
    profile = fit_profile(law_samples())
    snap = busy()
    job = Job("p", "a", 2, 6, PS, WORKER, 100.0)
    first = LifPolicy(profile).place(snap, job, np.random.default_rng(1))
    assert first is not None
    for seed in range(3):
        assert LifPolicy(fit_profile(law_samples())).place(snap, job, np.random.default_rng(seed)) == first


def test_a_neutral_profile_places_as_spread() -> None:
    snaps = [busy(), busy(("n4", "n3", "n2", "n1")), ClusterSnapshot.empty(NODES)]
    jobs = [Job("a", "a", 0, 1, PS, WORKER, 100.0), Job("b", "b", 2, 6, PS, WORKER, 100.0),
            Job("c", "c", 1, 9, PS, Resources(3, 2, 20_000), 100.0)]
    for snap in snaps:
        for job in jobs:
            expected = make_policy("spread").place(snap, job)
            assert make_policy("lif").place(snap, job) == expected
            assert LifPolicy(fit_profile([])).place(snap, job) == expected


def test_the_profile_round_trips_through_json(tmp_path: Path) -> None:
    profile = fit_profile(law_samples())
    path = profile.save(tmp_path / PROFILE_FILE)
    assert InterferenceProfile.load(path) == profile
    data = json.loads(path.read_text())
    assert data["pair"]["a"]["b"] == pytest.approx(0.3, abs=0.02)
    assert InterferenceProfile.load(InterferenceProfile().save(tmp_path / "n.json")).is_neutral


@pytest.mark.parametrize(("content", "names"), [
    (b"{not json", "not valid JSON"),
    (b"\xff\xfe", "not UTF-8"),
    (b"[1, 2]", "must be a JSON object"),
    (b'{"format": "slurm-advisor lif profile", "version": 9, "overall": 0}', "version 9"),
    (b'{"format": "slurm-advisor lif profile", "version": 1, "overall": -0.1}', "field 'overall'"),
    (b'{"format": "slurm-advisor lif profile", "version": 1, "overall": 0, "victim": {"a": "x"}}',
     "field 'victim'.a"),
    (b'{"format": "slurm-advisor lif profile", "version": 1, "overall": 0, "pair": {"a": {"b": -1}}}',
     "field 'pair.a'.b"),
    (b'{"format": "slurm-advisor lif profile", "version": 1, "overall": 0, "pair": [1]}', "field 'pair'"),
    (b'{"format": "slurm-advisor lif profile", "version": 1, "overall": 0, "samples": true}', "field 'samples'"),
])
def test_a_bad_profile_file_is_an_input_error_naming_it(tmp_path: Path, content: bytes, names: str) -> None:
    path = tmp_path / PROFILE_FILE
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        InterferenceProfile.load(path)
    assert str(path) in str(err.value) and names in str(err.value)
    with pytest.raises(InputError, match="lif_profile.json"):
        make_policy("lif", PolicyContext(model_dir=tmp_path))


def test_a_missing_profile_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nothing\.json: cannot read"):
        InterferenceProfile.load(tmp_path / "nothing.json")


def test_the_registry_finds_the_profile_beside_a_model(tmp_path: Path) -> None:
    one = Job("j", "a", 0, 1, PS, WORKER, 100.0)
    A_B.save(tmp_path / PROFILE_FILE)
    assert nodes_of(make_policy("lif", PolicyContext(model_dir=tmp_path)).place(busy(), one)) == ["n2"]
    # no profile beside the model (trained before profiles were saved), or no model: neutral
    assert make_policy("lif", PolicyContext(model_dir=tmp_path / "old")).profile.is_neutral
    assert make_policy("lif").profile.is_neutral


def test_the_experiment_runs_lif_with_the_profile_beside_the_learned_model(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from slurm_advisor.experiments.experiment import evaluate
    from slurm_advisor.learned.policy.features import FeatureSchema
    from slurm_advisor.learned.policy.net import PolicyNet
    from slurm_advisor.speedmodels.contention import ContentionSpeedModel
    from slurm_advisor.traces.synthetic import synthetic_jobs
    from slurm_advisor.training import checkpoint

    torch.manual_seed(0)
    shipped = checkpoint.load()  # its site speed ensemble
    schema, hp = FeatureSchema(), replace(shipped.hyper, hidden=8)
    nodes = tuple(Node(f"n{i}", 32, 8, 256_000, f"s{i // 4}") for i in range(8))
    jobs = synthetic_jobs(30, seed=3, mix="large")
    model = checkpoint.save(tmp_path / "learned", PolicyNet(schema.node_dim, schema.global_dim, hp.hidden),
                            shipped.speed_model, schema, hp, {"deploy": "spread"},
                            lif_profile=InterferenceProfile(overall=0.2))
    assert (model / PROFILE_FILE).exists()
    truth = ContentionSpeedModel()
    with_profile = evaluate(nodes, jobs, truth, ["spread", "lif"], {"learned": model}, seed=0)
    assert with_profile["lif"].summary() != with_profile["spread"].summary()
    without = evaluate(nodes, jobs, truth, ["spread", "lif"], {}, seed=0)
    assert without["lif"].summary() == without["spread"].summary()
    assert list(with_profile) == ["spread", "lif", "learned"]
