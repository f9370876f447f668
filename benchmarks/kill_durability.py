"""kill -9 during bursts: what the daemon acknowledged against what its store holds after a
restart, over many trials (issue 39: 0 acknowledged decisions or reports lost over 20).

Each trial (tests/daemon/kill_trials.py) starts a daemon process over a SQLite store, runs
clients that ask for advice (a connection each, as the hook) and send speed reports, kills the
daemon with SIGKILL after a random number of acknowledged requests (20 to ``--most``), starts a daemon on
the same store and spool and stops it, then looks every acknowledged decision id and report up
in the store. ``--no-spool`` runs the same with the spool unusable (the daemons acknowledge from
memory, as before the spool existed): what the spool saves.

    python benchmarks/kill_durability.py [--trials 20] [--clients 4] [--seed 39] [--most 800] [--no-spool]
                                         [--db postgresql+psycopg://.../bench]

Columns: the kill's moment (acknowledged requests), decisions and reports acknowledged, those lost
(not stored after the restart), reports stored twice, spool files left after the clean stop.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "daemon"))
from kill_trials import run_trial  # a test helper: the path first


def _empty(url: str) -> None:
    """Plain SQL, as tests/store/conftest.py: the store has no delete API."""
    from sqlalchemy import create_engine, text

    from slurm_advisor.store import Store
    Store.open(url).close()  # the schema, on a fresh database
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("TRUNCATE speed_samples, decisions, reports RESTART IDENTITY"))
    engine.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--most", type=int, default=800, help="the kill comes after 20 to this many acknowledged requests")
    ap.add_argument("--no-spool", action="store_true", help="the spool unusable: acknowledged from memory")
    ap.add_argument("--db", help="a PostgreSQL URL (default: a SQLite file per trial); its tables are emptied "
                                 "before each trial: a database for benchmarks only")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    name = "kill_durability" + ("_postgresql" if args.db else "") + ("_no_spool" if args.no_spool else "")
    out = args.out or REPO / "benchmarks" / "results" / f"{name}.json"
    rng = random.Random(args.seed)
    print(f"{'trial':>5} {'kill at':>7} {'dec acked':>9} {'dec lost':>8} {'rep acked':>9} {'rep lost':>8} "
          f"{'rep twice':>9} {'spool left':>10} {'s':>5}")
    trials = []
    with tempfile.TemporaryDirectory(prefix="kill-durability-") as root:
        for n in range(args.trials):
            work = Path(root) / f"trial{n}"
            work.mkdir()
            if args.db:
                _empty(args.db)
            t = run_trial(work, rng, clients=args.clients, most=args.most, spool=not args.no_spool, db=args.db)
            trials.append(t)
            print(f"{n:>5} {t.kill_after:>7} {t.decisions_acked:>9} {t.decisions_lost:>8} {t.reports_acked:>9} "
                  f"{t.reports_lost:>8} {t.reports_doubled:>9} {t.spool_files_left:>10} {t.seconds:>5.1f}", flush=True)
    total = {key: sum(getattr(t, key) for t in trials) for key in
             ("decisions_acked", "decisions_lost", "reports_acked", "reports_lost", "reports_doubled",
              "spool_files_left")}
    print(f"{'all':>5} {'':>7} {total['decisions_acked']:>9} {total['decisions_lost']:>8} "
          f"{total['reports_acked']:>9} {total['reports_lost']:>8} {total['reports_doubled']:>9} "
          f"{total['spool_files_left']:>10}")
    lost = total["decisions_lost"] + total["reports_lost"] + total["reports_doubled"]
    print(f"target: 0 acknowledged decisions or reports lost over {args.trials} trials -> "
          f"{'met' if lost == 0 else f'NOT met ({lost})'}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"spool": not args.no_spool, "store": "postgresql" if args.db else "sqlite",
                               "seed": args.seed, "clients": args.clients, "most": args.most,
                               "totals": total, "trials": [asdict(t) for t in trials]}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
