"""Stored samples training cannot use (issue 39, Why 6): three speeds of 0.0 among a site's samples
made every later retrain end in a traceback. Each such sample is skipped, counted and named."""
from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import replace

import pytest
from click.testing import CliRunner
from retrain_helpers import TINY, make_site

from slurm_advisor.cli import main
from slurm_advisor.errors import InputError
from slurm_advisor.retrain.retrain import RetrainExit
from slurm_advisor.store import Store

if "retrain" not in main.cli.commands:
    main._register()


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory):
    """A small site whose store also holds 3 samples of speed 0.0, one NaN, one 1e9 it/s and one
    row that no longer decodes."""
    directory = tmp_path_factory.mktemp("site")
    db, cluster = make_site(directory, jobs=12)
    with Store.open(db) as store:
        good = store.load_samples()
        store.record_samples([replace(s, speed=0.0) for s in good[:3]] + [good[3], replace(good[4], speed=1e9)])
    with sqlite3.connect(db) as conn:  # what no writer of ours stores, but a database may hold
        (text,) = conn.execute("SELECT sample FROM speed_samples WHERE id = ?", (len(good) + 4,)).fetchone()
        conn.execute("UPDATE speed_samples SET sample = ? WHERE id = ?",
                     (json.dumps({**json.loads(text), "speed": math.nan}), len(good) + 4))
        conn.execute("UPDATE speed_samples SET sample = ? WHERE id = ?", (json.dumps({"time": 1.0}), len(good)))
    return db, cluster, len(good)


@pytest.mark.slow
def test_a_retrain_skips_and_names_the_samples_it_cannot_use(poisoned, tmp_path):
    db, cluster, stored = poisoned
    result = CliRunner().invoke(main.cli, ["retrain", "--db", db, "--cluster", str(cluster), "--models-dir",
                                           str(tmp_path / "models"), "--json", "--margin", "0", *TINY])
    assert result.exit_code in (RetrainExit.PROMOTED, RetrainExit.KEPT), result.output
    summary = json.loads(result.stdout)
    assert summary["data"]["skipped_samples"] == {"non-positive speed": 3, "non-finite speed": 1,
                                                  "speed outside 1e-06 to 1e+06 it/s": 1, "unreadable": 1}
    used = summary["data"]["train"]["samples"] + summary["data"]["holdout"]["samples"]
    assert used == stored - 1  # every good sample but the one whose row was damaged
    assert "skipped 6 samples training cannot use: 3 non-positive speed" in result.stderr


def test_the_store_raises_on_an_unreadable_row_unless_asked_to_count_it(poisoned):
    db, _, stored = poisoned
    with Store.open(db, create=False) as store:
        with pytest.raises(InputError, match="speed sample"):
            store.load_samples()
        skipped = {}
        assert len(store.load_samples(skipped=skipped)) == stored + 5 - 1 and skipped == {"unreadable": 1}
