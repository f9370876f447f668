"""Training, end to end: speed model on recorded samples -> warm start -> distilling the search
(DAgger, ``distill.py``) -> actor-critic RL -> patience (when to hold a job) -> promotion gate.

The RL simulator runs on the *fitted* speed model, never on the ground truth: the policy is
judged only by what was learned from logged speeds. Model selection replays the training trace
under the same fitted model, the gate also under a judge: a second speed model, fitted on
speeds logged apart from the training samples (``judge_samples``: other jobs, other runs), so
that its errors are not the fitted model's. The test trace is never seen here.

Every choice that moves away from Slurm's own rule (the teacher, the deployed candidate) must
win on the training trace as logged *and* with its arrivals sped up (``Hyper.stress_rate``): a
rule that wins only at the load it was measured at is a gamble. Spreading and holding pay while
the cluster has room and lose when it fills; the busier replay is where that shows.
"""
from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import Job, Node, SpeedSample
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.learned.speed.fit import SiteSpeedModel, fit_site_model
from slurm_advisor.policies import make_policy
from slurm_advisor.policies.base import Policy
from slurm_advisor.policies.isolated import IsolatedSpeeds
from slurm_advisor.policies.learned.agent import Decision, LearnedPolicy
from slurm_advisor.policies.lif import InterferenceProfile, fit_profile
from slurm_advisor.policies.patience import PATIENCE_LEVELS, PatientPolicy
from slurm_advisor.policies.search import search_over
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.training.distill import DaggerRollIn
from slurm_advisor.training.judge import TRAINING_SEED_OFFSET, fitted
from slurm_advisor.training.rl import (
    Replay,
    actor_critic_step,
    discounted_returns,
    imitation_step,
    jobs_in_system_returns,
)

TEACHERS = ("slurm-default", "pack", "spread", "tetris")


@dataclass
class Ablation:
    replay: bool = True
    exploration: bool = True
    warm_start: bool = True
    distill: bool = True   # distil the search into the network (DAgger) before RL
    rl: bool = True        # actor-critic after the warm start and the distillation
    holding: bool = True   # may hold jobs for a better placement (patience > 0)
    network: bool = True   # train the RL network (False: only the teacher heuristic, maybe holding)


@dataclass
class TrainReport:
    policy: PolicyNet
    speed: SiteSpeedModel  # the fitted speed model (the RL simulator's)
    schema: FeatureSchema
    speed_metrics: dict
    teacher: str
    teacher_scores: dict[str, tuple[float, ...]]  # heuristic -> avg JCT on each validation trace
    curve: list[dict] = field(default_factory=list)
    best_validation_jct: float = float("inf")
    seconds: float = 0.0
    deploy: str = "network"  # or the teacher's name when the network did not beat it
    patience: float = 0.0    # hold jobs whose predicted speed is below this share of alone (0: never)
    # what `learned-fast` deploys: the same gate over every candidate but the search, whose
    # decisions do not fit the daemon's 2 ms budget (equal to deploy/patience when that is not the search)
    fast: tuple[str, float] = ("network", 0.0)
    # (proposer, patience) -> avg JCT on each validation trace under the fitted model;
    # proposer = network or teacher
    candidates: dict[tuple[str, float], tuple[float, ...]] = field(default_factory=dict)
    judge_scores: dict[str, tuple[float, ...]] = field(default_factory=dict)  # chosen, teacher under the judge
    judge: str = ""  # what the judge was fitted on
    # the `lif` baseline's pairwise interference, fitted on the same samples (saved beside the model)
    lif_profile: InterferenceProfile = field(default_factory=InterferenceProfile)

    @property
    def chosen(self) -> tuple[str, float]:
        """The candidate with the best worst-case ratio to the plain teacher; on a tie the
        teacher (the simpler, explainable rule) and then the lower patience (fewer jobs held)."""
        return self.best_of(self.candidates)

    @property
    def chosen_without_search(self) -> tuple[str, float]:
        """``chosen`` among the candidates that decide within the daemon's budget (all but the
        search): what ``learned-fast`` deploys when the search is chosen."""
        return self.best_of({c: v for c, v in self.candidates.items() if c[0] != "search"})

    def best_of(self, candidates: dict[tuple[str, float], tuple[float, ...]]) -> tuple[str, float]:
        ref = self.teacher_scores[self.teacher]
        return min(candidates, key=lambda c: (worst_ratio(self.candidates[c], ref), c[0] != self.teacher, c[1]))

    def promotion(self, margin: float, candidate: tuple[str, float] | None = None,
                  judge_scores: dict[str, tuple[float, ...]] | None = None) -> tuple[str, float]:
        """Deploy the best candidate (or ``candidate``, judged by ``judge_scores``) only if it
        beats the plain teacher by ``margin`` on every validation trace under the fitted model
        *and* under the independently fitted judge: RL learns to please the model it trains
        against, errors included; a second model with other errors is far harder to fool.
        Otherwise the plain teacher, which never holds a job."""
        candidate = candidate or self.chosen
        judged = self.judge_scores if judge_scores is None else judge_scores
        wins = worst_ratio(self.candidates[candidate], self.teacher_scores[self.teacher]) < 1 - margin
        if judged:
            wins = wins and worst_ratio(judged["chosen"], judged["teacher"]) < 1 - margin
        return candidate if wins else (self.teacher, 0.0)

    def deployment_meta(self) -> dict:
        """What the checkpoint's meta.json must say for the policy to load as it was judged."""
        return {"teacher": self.teacher, "validation_traces": list(VALIDATION_TRACES),
                "teacher_validation_jct": {k: list(v) for k, v in self.teacher_scores.items()},
                "deploy": self.deploy, "patience": self.patience,
                "fast_deploy": {"deploy": self.fast[0], "patience": self.fast[1]},
                "best_validation_jct": self.best_validation_jct,
                "candidates_validation_jct": [{"proposer": p, "patience": k, "avg_jct": list(v)}
                                              for (p, k), v in self.candidates.items()],
                "judge_validation_jct": self.judge_scores, "judge_fitted_on": self.judge,
                "train_seconds": round(self.seconds, 1)}


# What each entry of a validation score is: the training trace as logged, then sped up.
VALIDATION_TRACES = ("as logged", "arrivals stress_rate x faster")


def worst_ratio(jcts: Sequence[float], reference: Sequence[float]) -> float:
    """The largest ratio of avg JCTs over the validation traces (below 1: better on every one)."""
    return max(a / b for a, b in zip(jcts, reference, strict=True))


def validation_traces(jobs: Sequence[Job], stress_rate: float) -> list[list[Job]]:
    """The training trace as logged and with arrivals ``stress_rate`` times faster."""
    return [list(jobs), [replace(j, submit_time=j.submit_time / stress_rate) for j in jobs]]


def window(jobs: Sequence[Job], start: int, n: int) -> list[Job]:
    """n consecutive jobs with submit times shifted to start at 0: one episode."""
    part = list(jobs[start:start + n])
    t0 = part[0].submit_time if part else 0.0
    return [replace(j, submit_time=j.submit_time - t0) for j in part]


def simulate(nodes, jobs, policy: Policy, truth, seed: int, log_progress: bool = False,
             isolated: IsolatedSpeeds | None = None):
    advisor = Advisor(policy, fallback=SlurmDefaultPolicy())
    return Simulation(nodes, jobs, advisor, truth, seed=seed, log_progress=log_progress, isolated=isolated).run()


class Replays:
    """The simulations of one training run on its cluster. Training replays its traces ~30 times
    a round under one fitted model, each simulation asking that model for every job's speed
    alone (the time limits' reference): the answers, the same every time for a model that no
    longer changes, are kept here for each model the run replays under (the fitted model, the
    judge: a few), and go with the run."""

    def __init__(self, nodes: Sequence[Node]):
        self.nodes = tuple(nodes)
        self._isolated: list[IsolatedSpeeds] = []

    def run(self, jobs, policy: Policy, truth, seed: int, log_progress: bool = False):
        return simulate(self.nodes, jobs, policy, truth, seed, log_progress, self._isolated_under(truth))

    def avg_jcts(self, traces: Sequence[list[Job]], make: Callable[[], Policy], truth, seed: int
                 ) -> tuple[float, ...]:
        """Avg JCT of a fresh policy from ``make`` on each trace under ``truth``."""
        return tuple(avg_jct(self.run(jobs, make(), truth, seed)) for jobs in traces)

    def _isolated_under(self, truth) -> IsolatedSpeeds:
        kept = next((i for i in self._isolated if i.model is truth), None)
        if kept is None:
            kept = IsolatedSpeeds(truth, self.nodes)
            self._isolated.append(kept)
        return kept


def avg_jct(result) -> float:
    return result.summary().get("avg_jct", float("inf"))


def train(samples: Sequence[SpeedSample], nodes: Sequence[Node], jobs: Sequence[Job], hp: Hyper,
          ablation: Ablation | None = None, log: Callable[[str], None] = print, bar=None,
          judge_samples: Sequence[SpeedSample] | None = None, init_policy: PolicyNet | None = None) -> TrainReport:
    """``judge_samples``: speeds logged apart from ``samples`` (other jobs, other runs) on which
    the promotion gate's judge is fitted. Without them the judge is refitted on ``samples`` with
    another seed and held-out split: it shares the fitted model's data, so it shares more of its
    errors (``TrainReport.judge`` says which judge decided). ``init_policy``: fine-tune this
    network (same schema and width; ``retrain`` passes the active model's) instead of imitating
    the teacher from random weights; its weights are copied, not changed."""
    ablation = ablation or Ablation()
    started = time.time()
    # Small networks and minibatches: extra threads only add overhead (and set once, here, at
    # the entry point, not as a side effect of importing the package).
    torch.set_num_threads(1)
    torch.manual_seed(hp.seed)
    rng = np.random.default_rng(hp.seed)
    schema = FeatureSchema()
    fitted, speed_metrics = fit_site_model(samples, hp)
    log(f"speed model: {len(samples)} samples, {len(speed_metrics['vocabulary'])} job types of their own, "
        f"held-out-job MAPE {speed_metrics['holdout_mape']:.3f}")
    # Model selection runs the whole training trace (under the fitted model): one short window
    # is too noisy a judge, and a window of a few short jobs cannot tell policies apart.
    validation = validation_traces(jobs, hp.stress_rate)
    replays = Replays(nodes)
    scores = {t: replays.avg_jcts(validation, lambda t=t: make_policy(t), fitted, hp.seed) for t in TEACHERS}
    teacher = pick_teacher(scores)
    log(f"teacher (best heuristic under the fitted model, on every validation trace): {teacher} "
        + ", ".join(f"{k}={'/'.join(f'{x:.0f}' for x in v)}" for k, v in scores.items()))
    net = PolicyNet(schema.node_dim, schema.global_dim, hp.hidden)
    if init_policy is not None:
        net.load_state_dict(init_policy.state_dict())
        log("warm start: fine-tuning the given policy (no imitation)")
    report = TrainReport(net, fitted, schema, speed_metrics, teacher, scores)
    report.lif_profile = fit_profile(samples)
    episodes = _Episodes(replays, jobs, fitted, schema, hp, rng)
    if ablation.network:
        _train_network(net, episodes, validation, report, ablation, hp, log, bar, imitate=init_policy is None)
    report.candidates = _with_patience(net, teacher, report, fitted, replays, validation, schema, hp,
                                       proposers=("network", teacher) if ablation.network else (teacher,),
                                       levels=PATIENCE_LEVELS if ablation.holding else (0.0,))
    _gate(report, samples, judge_samples, replays, validation, hp)
    log(_summary(report))
    report.seconds = time.time() - started
    return report


def _train_network(net: PolicyNet, episodes: _Episodes, validation: list[list[Job]], report: TrainReport,
                   ablation: Ablation, hp: Hyper, log: Callable[[str], None], bar, imitate: bool) -> None:
    """Warm start by imitating the teacher (unless fine-tuning a given network), distil the
    search, then actor-critic: each as the ablation allows."""
    teacher = report.teacher
    anchor = _warm_start(net, episodes, make_policy(teacher), hp, log) if imitate and ablation.warm_start else []
    if ablation.distill and hp.dagger_rounds:
        anchor = _distill(net, episodes, report.lif_profile, hp, log)
    if ablation.rl:
        _reinforce(net, episodes, validation[0], teacher, ablation, report, bar, anchor)
    else:
        report.best_validation_jct = _validate(net, episodes, validation[0])
        report.curve.append({"episode": 0, "validation_jct": report.best_validation_jct, "episode_jct": None})


def _gate(report: TrainReport, samples: Sequence[SpeedSample], judge_samples: Sequence[SpeedSample] | None,
          replays: Replays, validation: list[list[Job]], hp: Hyper) -> None:
    """Judge the chosen candidate and the teacher under an independently fitted model, and
    decide what the model deploys (and, where that is the search, what learned-fast deploys)."""
    report.judge = _judge_source(samples, judge_samples)
    judge = fitted(judge_samples or samples, hp, TRAINING_SEED_OFFSET).model
    judged = functools.partial(_judged, report.policy, report.speed, judge, replays, validation, report.schema, hp,
                               report.lif_profile)
    report.judge_scores = {"chosen": judged(report.chosen),
                           "teacher": replays.avg_jcts(validation, lambda: make_policy(report.teacher), judge,
                                                       hp.seed)}
    report.deploy, report.patience = report.promotion(hp.promote_margin)
    report.fast = (report.deploy, report.patience)
    if report.deploy == "search":  # the cheaper path, judged as the deployed one was
        alternative = report.chosen_without_search
        report.fast = report.promotion(hp.promote_margin, alternative,
                                       {**report.judge_scores, "chosen": judged(alternative)})


def _summary(report: TrainReport) -> str:
    scores, teacher = report.teacher_scores, report.teacher
    curve = " ".join(f"{c['validation_jct'] / 3600:.1f}" for c in report.curve if c["validation_jct"] is not None)
    proposer, patience = report.chosen
    return (f"validation avg JCT (h) by episode: {curve}; kept {report.best_validation_jct / 3600:.1f} "
            f"(teacher {scores[teacher][0] / 3600:.1f}); best candidate: {proposer} at patience {patience}, "
            f"{_hours(report.candidates[report.chosen])} vs teacher {_hours(scores[teacher])}; independent judge: "
            f"that {_hours(report.judge_scores['chosen'])}, teacher {_hours(report.judge_scores['teacher'])}; "
            f"deploys: {report.deploy} at patience {report.patience}"
            + (f" (learned-fast: {report.fast[0]} at patience {report.fast[1]})" if report.deploy == "search" else ""))


def _hours(jcts: Sequence[float]) -> str:
    return "/".join(f"{x / 3600:.1f}" for x in jcts) + " h"


def deployable(net: PolicyNet, schema: FeatureSchema, proposer: str, patience: float, speed,
               lif_profile: InterferenceProfile | None = None) -> Policy:
    """The policy as it would be deployed: the network or a heuristic, holding jobs per
    ``patience``; or the search over the network and the baselines, which holds by itself."""
    if proposer == "search":
        return search_over(LearnedPolicy(net, schema, mode="greedy"), speed, lif_profile)
    inner = LearnedPolicy(net, schema, mode="greedy") if proposer == "network" else make_policy(proposer)
    return PatientPolicy(inner, speed, patience) if patience > 0 else inner


def _with_patience(net, teacher: str, report: TrainReport, fitted, replays: Replays, validation: list[list[Job]],
                   schema: FeatureSchema, hp: Hyper, proposers: tuple[str, ...],
                   levels: tuple[float, ...]) -> dict[tuple[str, float], tuple[float, ...]]:
    """Replay the validation traces under the fitted model for each proposer at every patience
    level (the plain teacher was already replayed when it was chosen); with the network and
    holding, also the search over them (``search.py``: holding is one of its candidates)."""
    out = {}
    for proposer in proposers:
        for patience in levels:
            if (proposer, patience) == (teacher, 0.0):
                out[(proposer, patience)] = report.teacher_scores[teacher]
            else:
                out[(proposer, patience)] = replays.avg_jcts(
                    validation, lambda p=proposer, k=patience: deployable(net, schema, p, k, fitted),
                    fitted, hp.seed)
    if "network" in proposers and any(levels):
        out[("search", 0.0)] = replays.avg_jcts(
            validation, lambda: deployable(net, schema, "search", 0.0, fitted, report.lif_profile),
            fitted, hp.seed)
    return out


def _judge_source(samples: Sequence[SpeedSample], judge_samples: Sequence[SpeedSample] | None) -> str:
    if judge_samples:
        return f"separate samples ({len(judge_samples)})"
    return f"the training samples ({len(samples)}), other seed and split"


def _judged(net: PolicyNet, fitted, judge, replays: Replays, validation: list[list[Job]], schema: FeatureSchema, hp: Hyper,
            lif_profile: InterferenceProfile | None, candidate: tuple[str, float]) -> tuple[float, ...]:
    """A candidate's avg JCTs on the validation traces under the ``judge`` model. It still holds
    jobs by the *fitted* model's predictions, as deployed."""
    return replays.avg_jcts(validation, lambda: deployable(net, schema, *candidate, fitted, lif_profile), judge,
                            hp.seed)


def pick_teacher(scores: dict[str, Sequence[float]], margin: float = 0.02) -> str:
    """Slurm's own rule unless another heuristic beats it by ``margin`` on every validation trace
    (then the one with the best worst case): smaller wins are noise, and imitating the site's
    current behaviour is the safe start."""
    ref = scores["slurm-default"]
    best = min(scores, key=lambda t: worst_ratio(scores[t], ref))
    return best if worst_ratio(scores[best], ref) < 1 - margin else "slurm-default"


class _Episodes:
    """Runs training episodes on random windows of the trace under the fitted speed model."""

    def __init__(self, replays: Replays, jobs, fitted, schema, hp: Hyper, rng: np.random.Generator):
        self.replays, self.jobs, self.fitted, self.schema, self.hp, self.rng = replays, jobs, fitted, schema, hp, rng
        self.n = min(hp.episode_jobs, len(jobs))
        self.return_scale: float | None = None

    def run(self, net: PolicyNet, explorers: tuple[Policy, ...], explore_prob: float,
            reference: Policy | None = None) -> tuple[list[Decision], np.ndarray, float]:
        policy = LearnedPolicy(net, self.schema, mode="sample", explorers=explorers, explore_prob=explore_prob)
        returns, jct = self.play(policy, lambda: policy.decisions, reference)
        return policy.decisions, returns, jct

    def play(self, policy: Policy, decisions: Callable[[], list[Decision]], reference: Policy | None = None
             ) -> tuple[np.ndarray, float]:
        """One episode of ``policy`` on a random window of the trace, its arrivals sped up by a
        rate drawn from ``Hyper.episode_rates``: the returns at the times of ``decisions()`` (read
        after the episode) and the episode's avg JCT. With a ``reference`` policy the returns are
        relative: minus the reference's return at the same times on the same window and seed
        (a teacher-relative, input-dependent baseline: how much better than the teacher this
        episode went, not how lucky its arrivals were)."""
        last_start = max(0, len(self.jobs) - self.n)
        start = int(self.rng.integers(last_start + 1))
        rates = self.hp.episode_rates
        rate = float(rates[int(self.rng.integers(len(rates)))]) if len(rates) > 1 else float(rates[0])
        jobs = [replace(j, submit_time=j.submit_time / rate) for j in window(self.jobs, start, self.n)]
        seed = int(self.rng.integers(1 << 30))
        result = self.replays.run(jobs, policy, self.fitted, seed, log_progress=True)
        times = np.array([d.time for d in decisions()])
        returns = self._returns(times, result)
        if self.return_scale is None:  # fixed once so that returns stay comparable across episodes
            self.return_scale = float(np.mean(np.abs(returns))) or 1.0
        if reference is not None:
            returns = returns - self._returns(times, self.replays.run(jobs, reference, self.fitted, seed,
                                                                      log_progress=True))
        return returns / self.return_scale, avg_jct(result)

    def _returns(self, times: np.ndarray, result) -> np.ndarray:
        if self.hp.reward == "jobs-in-system":
            spans = [(r.submit, r.end) for r in result.records]
            return jobs_in_system_returns(times, spans, self.hp.gamma, self.hp.reward_interval_s)
        return discounted_returns(times, result.progress, self.hp.gamma, self.hp.reward_interval_s)


def _warm_start(net: PolicyNet, episodes: _Episodes, teacher: Policy, hp: Hyper, log) -> list[Decision]:
    decisions: list[Decision] = []
    returns: list[np.ndarray] = []
    for _ in range(hp.warm_episodes):
        d, g, _ = episodes.run(net, (teacher,), 1.0)
        decisions.extend(d)
        returns.append(g)
    all_returns = np.concatenate(returns)
    opt = torch.optim.Adam(net.parameters(), lr=hp.warm_lr)
    losses = _imitate(net, opt, decisions, all_returns, hp.warm_epochs, hp, episodes.rng)
    log(f"warm start: imitated {len(decisions)} decisions of {teacher.name}, loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    return decisions


def _imitate(net: PolicyNet, opt, decisions: list[Decision], returns: np.ndarray, epochs: int, hp: Hyper,
             rng: np.random.Generator) -> list[float]:
    """``epochs`` shuffled passes of supervised steps over ``decisions``: the losses."""
    losses = []
    for _ in range(epochs):
        order = rng.permutation(len(decisions))
        for chunk in np.array_split(order, max(1, len(order) // hp.minibatch)):
            losses.append(imitation_step(net, opt, [decisions[i] for i in chunk], returns[chunk], hp.value_weight))
    return losses


def _distill(net: PolicyNet, episodes: _Episodes, lif_profile: InterferenceProfile, hp: Hyper, log
             ) -> list[Decision]:
    """DAgger rounds (``distill.py``): roll in with the network, label with the search over it,
    train on every label so far. Returns the labels: RL's anchor (its teacher's decisions)."""
    decisions: list[Decision] = []
    returns: list[np.ndarray] = []
    opt = torch.optim.Adam(net.parameters(), lr=hp.warm_lr)
    losses = []
    for r in range(1, hp.dagger_rounds + 1):
        search = search_over(LearnedPolicy(net, episodes.schema, mode="greedy"), episodes.fitted, lif_profile)
        roll_in = DaggerRollIn(net, episodes.schema, search, hp.dagger_beta ** r)
        g, _ = episodes.play(roll_in, lambda r=roll_in: r.decisions)
        decisions.extend(roll_in.decisions)
        returns.append(g)
        if not decisions:
            continue
        losses += _imitate(net, opt, decisions, np.concatenate(returns), hp.dagger_epochs, hp, episodes.rng)
    if losses:
        log(f"distilled the search: {len(decisions)} labels over {hp.dagger_rounds} DAgger rounds, "
            f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    return decisions


def _reinforce(net: PolicyNet, episodes: _Episodes, validation: list[Job], teacher: str, ablation: Ablation,
               report: TrainReport, bar, anchor: list[Decision]) -> None:
    hp = episodes.hp
    opt = torch.optim.Adam(net.parameters(), lr=hp.rl_lr)
    replay = Replay(hp.replay_size if ablation.replay else 1)
    explorers = tuple(make_policy(t) for t in dict.fromkeys((teacher, "pack", "spread")))
    explore = hp.explore_prob if ablation.exploration else 0.0
    best_state, best = copy.deepcopy(net.state_dict()), _validate(net, episodes, validation)
    report.curve.append({"episode": 0, "validation_jct": best, "episode_jct": None})
    for ep in range(1, hp.rl_episodes + 1):
        reference = make_policy(teacher) if hp.advantage == "teacher" else None
        decisions, returns, jct = episodes.run(net, explorers, explore, reference)
        stats = _update(net, opt, replay, decisions, returns, hp, episodes.rng, ablation.replay, anchor)
        explore *= hp.explore_decay
        val = _validate(net, episodes, validation) if ep % hp.validate_every == 0 or ep == hp.rl_episodes else None
        report.curve.append({"episode": ep, "validation_jct": val, "episode_jct": jct, **stats})
        if val is not None and val < best:
            best, best_state = val, copy.deepcopy(net.state_dict())
        if bar is not None:
            bar.update(1)
            bar.set_postfix(best_val_jct_h=f"{best / 3600:.1f}")
    net.load_state_dict(best_state)
    report.best_validation_jct = best


def _update(net, opt, replay: Replay, decisions, returns, hp: Hyper, rng, use_replay: bool,
            anchor: list[Decision]) -> dict:
    if not use_replay:  # on-policy: learn from this episode only
        replay = Replay(len(decisions) or 1)
    replay.add(decisions, returns)
    stats: dict = {}
    for _ in range(hp.updates_per_episode):
        if len(replay):
            teacher_batch = [anchor[i] for i in rng.choice(len(anchor), min(hp.minibatch, len(anchor)),
                                                           replace=False)] if anchor else []
            stats = actor_critic_step(net, opt, replay.sample(hp.minibatch, rng), hp.entropy_weight,
                                      hp.value_weight, teacher_batch, hp.anchor_weight)
    return stats


def _validate(net: PolicyNet, episodes: _Episodes, validation: list[Job]) -> float:
    policy = LearnedPolicy(net, episodes.schema, mode="greedy")
    return avg_jct(episodes.replays.run(validation, policy, episodes.fitted, episodes.hp.seed))
