"""Slurm as the oracle (issue #38): random sbatch lines with and without the advisor, on the testbed.

Each case is submitted on a partly busy cluster once with the hook's kill switch on (Slurm's own
verdict) and once through the hook to a daemon in enforce mode whose policy (``spread`` unless
``--policy``) advises otherwise than Slurm, so that pins really happen
(``tests/integration/differential.py`` does the work; the test of the same name runs fewer
cases). Prints a table and writes JSON:

- submissions Slurm accepts alone that it accepts advised too (target 100 %);
- advised jobs whose pin and allocation honour the request as written (target 100 %);
- what the advisor did with the marked jobs Slurm accepted: pinned, capped, Slurm's own choice
  (stamped only), left to Slurm for an unmodelled option (by option) or for another reason (by
  reason, node names folded).

Runs against the testbed that SLURM_CONF names, whose slurmctld runs hooks/job_submit.lua with
its socket and kill switch in SLURM_ADVISOR_TESTBED_DIR (``.ci/slurm-testbed.sh start`` with
SLURM_ADVISOR_TESTBED_HOOK=hooks/job_submit.lua); it must be idle, and nothing else may use it
meanwhile. The daemon listens on SLURM_ADVISOR_TESTBED_SOCKET (default: the testbed's advisor.sock).
About 3 s a case on a 2-core machine.

    python benchmarks/request_differential.py [--seed 1] [--cases 300] [--no-verbatim] [--only s1-17,issue-...]
                                              [--policy spread] [--refresh-s 0.5] [--out PATH] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
from differential import FOUND, VERBATIM, generate, random_case, session
from differential_check import Case, Cluster, Result, Submitted
from slurmctl import Slurm

from slurm_advisor.daemon.service import SLURMS_CHOICE

TESTBED_DIR = Path(os.environ.get("SLURM_ADVISOR_TESTBED_DIR", "/tmp/slurm-advisor-testbed"))
PINNED, CAPPED, OWN, LEFT, REJECTED = "pinned", "capped", "slurm's own choice", "left to Slurm", "rejected"


def cases(args: argparse.Namespace, cluster: Cluster) -> list[Case]:
    fixed = (*VERBATIM, *FOUND) if args.verbatim else ()
    if args.only:
        by_name = {c.name: c for c in (*VERBATIM, *FOUND)}
        return [by_name.get(name) or random_case(cluster, *map(int, name.removeprefix("s").split("-")))
                for name in args.only.split(",")]
    return [*fixed, *generate(cluster, args.seed, args.cases)]


def classify(sub: Submitted, decisions: dict[str, dict]) -> tuple[str, str]:
    """(what the advisor did with the job, the detail): pinned, capped, Slurm's own choice,
    ``unmodelled: <option>``, left to Slurm (detail: the reason), rejected, no stamp."""
    stamp = sub.stamp
    if stamp is None:  # a rejected job: slurmctld's log names the decision the hook applied
        stamp = next(filter(None, (re.search(r"slurm-advisor: (d-[0-9a-f]+):", line) for line in sub.log)), None)
    decision = decisions.get(stamp.group(1)) if stamp else None
    if not sub.accepted:
        return REJECTED, decision["reason"] if decision else sub.message
    if decision is None:
        return ("no stamp", "") if stamp is None else ("not recorded", stamp.group(0))
    action, reason = decision["action"], decision["reason"] or ""
    if action in ("place", "cap"):
        return (PINNED if action == "place" else CAPPED), ""
    if SLURMS_CHOICE in reason:
        return OWN, ""
    unmodelled = re.search(r"unmodelled option: ([^;(]+)", reason)
    if unmodelled:
        return f"unmodelled: {unmodelled.group(1).strip()}", reason
    return LEFT, reason.removeprefix("left to Slurm as submitted: ")


def fold(reason: str) -> str:
    """A reason with its node names and counts folded, so that reasons of one kind count together."""
    reason = re.sub(r"\b\d+ nodes, outside the requested \S+", "a node count outside the requested -N", reason)
    return re.sub(r"\bn(?:\[[\d,-]+\]|\d+)(?:,n(?:\[[\d,-]+\]|\d+))*", "<nodes>", reason.split(";")[0])[:100]


def tally(results: list[Result], decisions: dict[str, dict], cluster: Cluster) -> dict:
    """(a) acceptance as without the advisor, (b) advised jobs honouring the request, (c) what the
    advisor did with the marked jobs."""
    accepted = [r for r in results if r.plain.accepted]
    checked = [r for r in results if r.hooked.accepted and (r.hooked.allocation or r.hooked.advised)]
    failures = {r.case.name: r.failures(cluster) for r in results}
    kinds, left = Counter(), Counter()
    for r in results:
        kind, detail = classify(r.hooked, decisions)
        kinds[kind] += 1
        if kind == LEFT:
            left[fold(detail)] += 1
    return {"cases": len(results), "accepted_without": len(accepted),
            "accepted_with": sum(r.hooked.accepted for r in results),
            "accepted_as_without": sum(r.hooked.accepted for r in accepted),
            "accepted_only_with": sum(r.hooked.accepted and not r.plain.accepted for r in results),
            "checked": len(checked),
            "honoured": sum(not any(f.startswith("(b)") for f in failures[r.case.name]) for r in checked),
            "plain_violations": [r.case.name for r in results if r.violations_alone(cluster)],
            "waits_where_slurm_starts": [r.case.name for r in results if r.plain.state == "RUNNING"
                                         and not r.plain.started_late and r.hooked.accepted
                                         and (r.hooked.state != "RUNNING" or r.hooked.started_late)],
            "kinds": dict(kinds.most_common()), "left_reasons": dict(left.most_common()),
            "failures": {name: f for name, f in failures.items() if f}}


def dump(results: list[Result], decisions: dict[str, dict], cluster: Cluster) -> list[dict]:
    def sub(s: Submitted | None) -> dict | None:
        return None if s is None else {
            "accepted": s.accepted, "message": s.message, "job": s.job_id, "state": s.state, "reason": s.reason,
            "allocation": {n: [r.cpus, r.gpus, r.mem_mb] for n, r in s.allocation.items()}, "tasks": s.tasks,
            "layout": s.layout, "req_nodes": s.fields.get("ReqNodeList"), "num_nodes": s.fields.get("NumNodes"),
            "admin_comment": s.fields.get("AdminComment"), "started_late": s.started_late, "waited_s": s.waited_s}
    return [{"case": r.case.name, "line": r.case.line(), "busy": r.case.busy(), "without": sub(r.plain),
             "with": sub(r.hooked), "without_on_idle": sub(r.idle), "advisor": classify(r.hooked, decisions),
             "failures": r.failures(cluster)} for r in results]


def table(f: dict) -> str:
    def share(part: int, whole: int) -> str:
        return f"{part}/{whole} ({100 * part / whole:.1f} %)" if whole else f"{part}/0"
    rows = [("cases", str(f["cases"])),
            ("accepted without the advisor", str(f["accepted_without"])),
            ("accepted with it", str(f["accepted_with"])),
            ("  accepted as without (target 100 %)", share(f["accepted_as_without"], f["accepted_without"])),
            ("  accepted only with it", str(f["accepted_only_with"])),
            ("advised jobs honouring the request (target 100 %)", share(f["honoured"], f["checked"])),
            ("Slurm's own allocations failing the check (must be 0)", str(len(f["plain_violations"]))),
            ("advised jobs waiting where Slurm alone starts them", str(len(f["waits_where_slurm_starts"]))),
            ("accepted marked jobs, by what the advisor did", "")]
    rows += [(f"  {kind}", share(n, f["accepted_with"])) for kind, n in f["kinds"].items() if kind != REJECTED]
    rows += [(f"    {LEFT}: {why}", str(n)) for why, n in f["left_reasons"].items()]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=300, help="random cases (the fixed ones come on top)")
    parser.add_argument("--no-verbatim", dest="verbatim", action="store_false",
                        help="leave out the fixed cases (the issue's lines and the ones found failing)")
    parser.add_argument("--only", help="run only these cases (comma-separated names a report printed: s<seed>-<i>, issue-...)")
    parser.add_argument("--policy", default="spread", help="the daemon's policy (one that advises otherwise than Slurm)")
    parser.add_argument("--refresh-s", type=float, default=0.5, help="the daemon's snapshot refresh period")
    parser.add_argument("--out", type=Path, help="JSON output (default /tmp/request_differential-<time>.json)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object, no table")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.gettempdir()) / f"request_differential-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    socket = Path(os.environ.get("SLURM_ADVISOR_TESTBED_SOCKET", TESTBED_DIR / "advisor.sock"))
    slurm = Slurm()
    todo = cases(args, Cluster.read(slurm))
    started = time.monotonic()
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="request-differential-") as tmp:
        with session(slurm, TESTBED_DIR, socket, Path(tmp), policy=args.policy, refresh_s=args.refresh_s) as diff:
            for case in tqdm(todo, desc="cases", disable=args.json or not sys.stderr.isatty(), file=sys.stderr):
                results.append(diff.run(case))
                if results[-1].failures(diff.cluster):
                    tqdm.write(results[-1].report(diff.cluster), file=sys.stderr)
        decisions = diff.daemon.decisions()
        figures = tally(results, decisions, diff.cluster)
    figures.update(seconds=round(time.monotonic() - started, 1), seed=args.seed, policy=args.policy,
                   refresh_s=args.refresh_s, slurm_conf=os.environ.get("SLURM_CONF"))
    out.write_text(json.dumps({"figures": figures, "cases": dump(results, decisions, diff.cluster)}, indent=1))
    if args.json:
        print(json.dumps(figures))
    else:
        print(table(figures))
        print(f"{figures['seconds']:.0f} s, {figures['seconds'] / max(len(results), 1):.2f} s a case; JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
