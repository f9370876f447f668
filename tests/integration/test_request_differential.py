"""Slurm as the oracle (#38): every sbatch line Slurm accepts alone it accepts through the advisor
(and starts), and every job the advisor pinned or capped honours the request as the user wrote it.

Each case (the issue's lines, the lines earlier runs found failing, and seeded random ones from
``differential.py``) is submitted on a partly busy cluster once with the hook's kill switch on and
once through the hook to a daemon in enforce mode with ``spread``, whose advice differs from
Slurm's, so that pins really happen. A case costs about 3 s on the 2-core CI machine (three job
starts, each waiting for a scheduling pass of up to a second: the blockers, the job without and
with the advisor; two daemon refreshes between; more where a job stays pending), so
:data:`RANDOM_CASES` = 50 with the 20 fixed cases keeps the module under 4 minutes (70 cases in
218 s; 75 took 229-235 s). The larger run is ``benchmarks/request_differential.py``.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from differential import FOUND, VERBATIM, Differential, generate, session
from differential_check import TESTBED, Case
from slurmctl import Slurm, run

from slurm_advisor.slurm.release import Release

pytestmark = pytest.mark.slurm

ROOT = Path(os.environ.get("SLURM_ADVISOR_TESTBED_DIR", "/tmp/slurm-advisor-testbed"))
SOCKET = Path(os.environ.get("SLURM_ADVISOR_TESTBED_SOCKET", ROOT / "advisor.sock"))
SEED = 38
#: Slurm 26.05 starts a ``--gpus=G`` job on nodes that hold fewer than G GPUs and allocates what
#: they hold (26.05.5 testbed: ``-n 4 -N 1 --gpus=8`` runs on one node with gpu:4, TresPerJob
#: gres/gpu:8; case s38-17). The request is then Slurm's own to break: such a case must honour
#: everything else, alone and advised, and is reported as an expected failure.
SHORT_GPUS = "GPUs in all, not the --gpus="
SHORTS_GPUS_FROM = Release(26, 5)
RANDOM_CASES = 50
CASES = (*VERBATIM, *FOUND, *generate(TESTBED, SEED, RANDOM_CASES))


@pytest.fixture(scope="module")
def differential(slurm_reachable: None, tmp_path_factory) -> Iterator[Differential]:
    if not re.search(r"^JobSubmitPlugins\s*=\s*\S*lua", run(["scontrol", "show", "config"]), re.MULTILINE):
        pytest.skip("the testbed runs without the job submit hook: start it with "
                    "SLURM_ADVISOR_TESTBED_HOOK=hooks/job_submit.lua (tests/run.sh does)")
    with session(Slurm(), ROOT, SOCKET, tmp_path_factory.mktemp("differential")) as diff:
        yield diff


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_slurm_accepts_the_advised_job_and_it_honours_the_request(case: Case, differential: Differential,
                                                                   slurm: Slurm):
    result = differential.run(case)
    cluster = differential.cluster
    alone = result.violations_alone(cluster)
    short = [v for v in alone if SHORT_GPUS in v]
    slurms_own = bool(alone) and short == alone and slurm.release() >= SHORTS_GPUS_FROM
    if alone and not slurms_own:
        pytest.fail(f"the check fails Slurm's own allocation: the check is wrong\n{result.report(cluster)}",
                    pytrace=False)
    if [f for f in result.failures(cluster) if not (slurms_own and SHORT_GPUS in f)]:
        pytest.fail(result.report(cluster), pytrace=False)
    if slurms_own:  # all else honoured; shown as xfail, not hidden
        pytest.xfail(f"Slurm {slurm.release()} itself gives fewer GPUs than --gpus: {'; '.join(short)}")
