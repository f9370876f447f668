"""The admin guide's list of what the advisor honours names every option slurm/request.py models or refuses."""
from __future__ import annotations

from pathlib import Path

from slurm_advisor.slurm.request import _FLAGS, MODELLED, UNMODELLED

README = (Path(__file__).resolve().parents[2] / "docs" / "admin-guide.md").read_text()  


def test_every_modelled_option_is_in_the_readme() -> None:
    missing = [option for option in MODELLED if f"`{option}`" not in README]
    assert not missing, f"README's 'What the advisor honours' lacks {missing}"


def test_every_unmodelled_option_is_in_the_readme() -> None:
    options = [o for o in (*UNMODELLED.values(), *_FLAGS.values()) if o.startswith("-")]
    missing = [option for option in options if f"`{option}`" not in README]
    assert not missing, f"README's list of unmodelled options lacks {missing}"
