"""Job by job, the loop against the simulator: the shares of jobs on the same nodes and starting at
the same time (slurm_advisor/loop/agreement.py)."""
from slurm_advisor.loop.agreement import Ran, agreement


def test_agreement_counts_the_jobs_both_ran_and_the_shares_that_match() -> None:
    loop = {"1": Ran(0.0, frozenset({"n1"})), "2": Ran(60.0, frozenset({"n1", "n2"})),
            "3": Ran(5.0, frozenset({"n3"})), "4": Ran(0.0, frozenset({"n4"}))}
    sim = {"1": Ran(0.4, frozenset({"n1"})), "2": Ran(60.0, frozenset({"n2"})),
           "3": Ran(125.0, frozenset({"n3"})), "5": Ran(0.0, frozenset({"n5"}))}
    assert agreement(loop, sim) == {"jobs": 3, "same_nodes": 0.667, "same_start": 0.667}
