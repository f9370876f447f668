"""Every command and every option says what it is for: `--help` is the reference a site reads."""
from __future__ import annotations

import click
from click.testing import CliRunner

from slurm_advisor.cli import main

if "demo" not in main.cli.commands:
    main._register()


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        yield (*path, name), command


def test_every_command_and_option_has_help():
    missing = [f"{' '.join(path)}: the command" for path, command in _commands(main.cli) if not command.help]
    missing += [f"{' '.join(path)} {'/'.join(p.opts)}" for path, command in _commands(main.cli)
                for p in command.params if isinstance(p, click.Option) and not p.hidden and not p.help]
    assert missing == []


def test_every_help_page_prints():
    for path, _ in _commands(main.cli):
        result = CliRunner().invoke(main.cli, [*path, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output, (path, result.output)
