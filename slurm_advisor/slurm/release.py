"""Which Slurm release the advisor models, and where its releases place differently. Pure.

The daemon reads the release once at start (``sinfo --version``: "slurm 22.05.8", or
"slurm-wlm 24.11.5" from Debian's packages) and hands it to the parts of ``slurm/`` that follow
Slurm's behaviour; the simulator and the tests name one. Each difference is one property here,
named after what Slurm does, with the tag it was read from:

- :attr:`Release.spreads_job_gpus` (24.05+, commit 038bd99e11 "Modify _set_max_gres to be aware of
  rem_nodes and rem_sockets", first in slurm-24-05-0-1; read at slurm-24-11-5-1): a GPU job's
  GPUs in all (``gres_per_job``) are counted out node by node: a required node may take at most
  what is still wanted less one GPU for each required node after it
  (``topology/common/gres_filter.c:_set_max_gres``), which cuts its tasks too. 22.05 let every
  node take all its free GPUs.
- :attr:`Release.keeps_gpu_weights` (before 23.11, SchedMD 55b5c8ca3a, first in
  slurm-23-11-0-0rc1): backfill's will-run places a job without GPUs by the node weights the
  last GPU job evaluated left (``slurm/left_weights.py``); from 23.11 cons_tres sets every
  weight afresh (``_set_sched_weight`` in job_test.c, read at slurm-24-11-5-1 and slurm-26.05).
- :attr:`Release.will_run_windows` (24.11+; SchedMD 3d8d6cb4e9, 4107be4f80, d5e0c8e664, first in
  slurm-24-11-0-0rc1): backfill hands will-run the try's start_res and later_start. A try after
  now is not tested on the nodes as they are: the jobs ending before start_res are removed
  first, and then no job ending after later_start; when no record within the job's window
  frees nodes, later_start is the end of the record after the first one past it.
- :attr:`Release.gone_at_start_res` (25.05+; SchedMD 324f83551b "Fix boundary condition in
  _build_cr_job_list()", first in slurm-25-05-0-0rc1): that later try also removes the jobs
  ending exactly at its start_res (``<=``, read at slurm-26.05; 24.11 has ``<``).
- :attr:`Release.starts_at_last_relevant_job` (25.11+; SchedMD 977bb2ee4f "Prevent jobs running
  on unneeded nodes delay backfill jobs", first in slurm-25-11-0-0rc1): a will-run that fits after
  a batch of ending jobs plans the start at the end of the latest of them on the nodes it chose,
  not of the last one removed.
- :attr:`Release.first_fit_single_node` (26.05): a one-node job goes on the first usable node
  that holds it in node order, not the best-fitting one (measured on the 26.05.5 testbed).
- :attr:`Release.hook_sets_segment_size` (26.05, commit ae5a0d6d77 "job_submit/lua - add
  segment_size to job_desc"; read at slurm-26-05-3-1): the job submit hook can set
  ``segment_size``, so under topology/block a pin across blocks can go as segments
  (``slurm/blocks.py``). 24.11's job_submit_lua.c has no such field.
- :attr:`Release.allocates_arbitrary` (23.11+, commit 0edc1f2673 "Fix how arbitrary distribution
  allocates cpus", first in slurm-23-11-0-1; read at slurm-24-11-5-1): a job submitted with
  ``-m arbitrary`` whose ``req_nodes`` repeats a node once per task (``n1,n3,n3,n3``) with
  ``min_nodes`` = the distinct count is allocated exactly those tasks per node
  (``common/job_record.c:job_record_calc_arbitrary_tpn`` -> ``details->arbitrary_tpn``, which
  ``topology/common/eval_nodes.c`` and ``cons_tres/dist_tasks.c`` follow). 22.05 has no
  ``arbitrary_tpn``: sbatch removes the repeats, cons_tres lays the job out as any other, and a
  hook that writes repeats is refused at submission (``job_mgr.c:validate_job_create_req``
  counts them as nodes: "Node count specification invalid"; all three measured on the testbed).
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Release:
    """A Slurm release, compared by (major, minor, micro)."""

    major: int
    minor: int
    micro: int = 0

    @classmethod
    def parse(cls, text: str) -> Release:
        """The release in ``sinfo --version``'s answer, or in a plain "24.11" / "24.11.5";
        ValueError when there is none."""
        match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
        if match is None:
            raise ValueError(f"no Slurm release in {text.strip()!r}")
        return cls(int(match[1]), int(match[2]), int(match[3] or 0))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.micro}"

    @property
    def spreads_job_gpus(self) -> bool:
        return (self.major, self.minor) >= (24, 5)

    @property
    def allocates_arbitrary(self) -> bool:
        return (self.major, self.minor) >= (23, 11)

    @property
    def keeps_gpu_weights(self) -> bool:
        return (self.major, self.minor) < (23, 11)

    @property
    def will_run_windows(self) -> bool:
        return (self.major, self.minor) >= (24, 11)

    @property
    def gone_at_start_res(self) -> bool:
        return (self.major, self.minor) >= (25, 5)

    @property
    def starts_at_last_relevant_job(self) -> bool:
        return (self.major, self.minor) >= (25, 11)

    @property
    def first_fit_single_node(self) -> bool:
        return (self.major, self.minor) >= (26, 5)

    @property
    def hook_sets_segment_size(self) -> bool:
        return (self.major, self.minor) >= (26, 5)


#: The release the advisor models when it is told none: the testbed's and CI's host Slurm.
DEFAULT = Release(22, 5, 8)
