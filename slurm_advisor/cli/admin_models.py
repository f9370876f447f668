"""The admin commands that change what serves: `models list|promote|rollback|history` (the registry
and the ``active`` pointer; what they do: retrain/promotion.py) and `mode` (the running daemon's
mode, which it keeps across restarts until `mode --reset`)."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from slurm_advisor.cli import admin_views as views
from slurm_advisor.cli.admin import _common, _config, _emit, _store, mode_source_text
from slurm_advisor.daemon.protocol import MODES
from slurm_advisor.errors import InputError


@click.group()
def models() -> None:
    """The model registry: list, promote a version, roll back to the one active before."""


@models.command("list")
@_common
def list_models(db, config_file, as_json) -> None:
    """Every registered model, newest first, with the gate's verdict; last, the daemon's default
    model (its config's `model`, the packaged one unless set), active when none is promoted."""
    from slurm_advisor.models.meta import DEFAULT_MODEL_DIR
    from slurm_advisor.models.versions import DEFAULT
    from slurm_advisor.retrain.promotion import gate_verdict

    config = _config(config_file, db=db)
    with _store(config) as store:
        found = store.list_models()
    rows = [{**asdict(m), "gate": gate_verdict(m).label} for m in found]
    serving = not any(m.status == "active" for m in found)
    rows.append({"version": DEFAULT, "status": "active" if serving else "standby", "gate": None,
                 "directory": str(config.model or DEFAULT_MODEL_DIR), "created_at": None, "promoted_at": None,
                 "retired_at": None, "samples": None, "live_samples": None, "metrics": {}})
    _emit(as_json, rows, lambda: views.table(
        ("version", "status", "gate", "created", "promoted", "retired", "samples", "live", "metrics"),
        [(r["version"], r["status"], r["gate"], views.epoch(r["created_at"]), views.epoch(r["promoted_at"]),
          views.epoch(r["retired_at"]), r["samples"], r["live_samples"],
          json.dumps(r["metrics"], sort_keys=True)[:60] if r["metrics"] else r["directory"]) for r in rows]))


@models.command()
@click.argument("version")
@click.option("--force", is_flag=True, help="Promote a model the gate rejected or never judged.")
@_common
def promote(version, force, db, config_file, as_json) -> None:
    """Make VERSION the active model (the active one is retired in the same transaction). A model
    the retrain's gate rejected, or one no gate judged, needs --force; the refusal says why."""
    from slurm_advisor.retrain.promotion import promote as run

    config = _config(config_file, db=db)
    with _store(config) as store:
        switch = run(store, config.models_dir, version, force=force)
    if switch.forced:
        click.echo(f"warning: promoted {version} over the gate ({switch.verdict}); recorded as forced "
                   "in `models history`", err=True)
    _report(switch, as_json)


@models.command()
@_common
def rollback(db, config_file, as_json) -> None:
    """Make the model active before the current one active again; past the first promotion, the
    daemon's default model (`models history` lists the changes)."""
    from slurm_advisor.retrain.promotion import rollback as run

    config = _config(config_file, db=db)
    with _store(config) as store:
        _report(run(store, config.models_dir), as_json)


@models.command()
@_common
def history(db, config_file, as_json) -> None:
    """Every change of the active model, oldest first: how (retrain, promote, rollback), forced or not."""
    with _store(_config(config_file, db=db)) as store:
        changes = store.model_history()
    rows = [{**asdict(c), "version": c.version or "default", "previous": c.previous or "default"} for c in changes]
    _emit(as_json, rows, lambda: views.table(
        ("time", "version", "previous", "action", "forced", "note"),
        [(views.epoch(r["time"]), r["version"], r["previous"], r["action"], "FORCED" if r["forced"] else "",
          r["note"]) for r in rows]))


@models.command("export")
@click.argument("directories", nargs=-1, required=True, type=click.Path(path_type=Path))
def export_weights(directories) -> None:
    """Write weights.npz into each model DIRECTORY (made before serving went torch-free): the
    weights the daemon serves without torch. Needs torch (pip install 'slurm-advisor[train]')."""
    try:
        from slurm_advisor.training import checkpoint
    except ImportError as exc:
        raise InputError(f"models export reads the .pt files with torch, which is not installed ({exc}); "
                         "install it: pip install 'slurm-advisor[train]'") from None
    for directory in directories:
        click.echo(f"wrote {checkpoint.export(directory)}")


def _report(switch, as_json: bool) -> None:
    if switch.warning:
        click.echo(f"warning: {switch.warning}", err=True)
    data = {"active": switch.active or "default", "was": switch.was or "default", "directory": switch.directory,
            "forced": switch.forced}
    _emit(as_json, data, lambda: f"active model: {data['active']} (was {data['was']})")


@click.command()
@click.argument("new_mode", metavar="[observe|advise|enforce]", type=click.Choice(MODES), required=False)
@click.option("--reset", is_flag=True, help="Return to the config's mode (forget the one set at run time).")
@click.option("--socket", "socket_path", type=click.Path(path_type=Path), help="The daemon's Unix socket.")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="TOML config file.")
@click.option("--json", "as_json", is_flag=True, help="Print the daemon's reply as JSON.")
def mode(new_mode, reset, socket_path, config_file, as_json) -> None:
    """Switch the running daemon's mode (as `ctl mode`; root or the Slurm user). The daemon keeps
    it across restarts, over its config's mode, until `mode --reset`."""
    from slurm_advisor.daemon.client import DaemonUnavailable, call

    if (new_mode is None) == (not reset):
        raise InputError("give a mode (observe, advise, enforce) or --reset, not both")
    path = _config(config_file, socket=socket_path).socket
    try:
        reply = call(path, "mode", **({"reset": True} if reset else {"mode": new_mode}))
    except DaemonUnavailable as exc:
        raise InputError(f"daemon at {path}: {exc}") from None
    if not reply.get("ok"):
        raise InputError(f"daemon at {path}: {reply.get('error')}")
    if reply.get("warning"):
        click.echo(f"warning: {reply['warning']}", err=True)
    _emit(as_json, reply, lambda: f"mode: {reply.get('was')} -> {reply['mode']} ({mode_source_text(reply)})")
