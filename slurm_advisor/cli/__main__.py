"""`python -m slurm_advisor.cli`: the same as the `slurm-advisor` command."""
from slurm_advisor.cli.main import main

main()
