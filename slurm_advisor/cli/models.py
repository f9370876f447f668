"""`slurm-advisor models`: the model registry (list, promote, rollback) and `models export`, which
writes a model directory's weights for serving without torch."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from slurm_advisor.cli import admin_views as views
from slurm_advisor.cli.admin import _common, _config, _emit, _store
from slurm_advisor.errors import InputError


@click.group()
def models() -> None:
    """The model registry: list, promote a version, roll back to the previous active one."""


@models.command("list")
@_common
def list_models(db, config_file, as_json) -> None:
    """Every registered model, newest first."""
    with _store(_config(config_file, db=db)) as store:
        found = store.list_models()
    _emit(as_json, [asdict(m) for m in found], lambda: views.table(
        ("version", "status", "created", "promoted", "retired", "samples", "live", "metrics"),
        [(m.version, m.status, views.epoch(m.created_at), views.epoch(m.promoted_at), views.epoch(m.retired_at),
          m.samples, m.live_samples, json.dumps(m.metrics, sort_keys=True)[:60]) for m in found]))


@models.command()
@click.argument("version")
@_common
def promote(version, db, config_file, as_json) -> None:
    """Make VERSION the active model (the active one is retired in the same transaction)."""
    config = _config(config_file, db=db)
    with _store(config) as store:
        _switch(store, version, as_json, config.models_dir)


@models.command()
@_common
def rollback(db, config_file, as_json) -> None:
    """Make the previous active model active again (the last retired one that had been promoted)."""
    config = _config(config_file, db=db)
    with _store(config) as store:
        active = store.active_model()
        earlier = [m for m in store.list_models() if m.status == "retired" and m.promoted_at is not None
                   and (active is None or m.version != active.version)]
        if not earlier:
            raise InputError("no previous active model to roll back to")
        _switch(store, max(earlier, key=lambda m: (m.retired_at or 0.0, m.promoted_at)).version, as_json,
                config.models_dir)


def _switch(store, version: str, as_json: bool, models_dir: Path) -> None:
    """The registry first (the source of truth), then the ``active`` pointer the daemon follows."""
    from slurm_advisor.retrain.modelsdir import point_active

    before = store.active_model()
    after = store.set_model_status(version, "active")
    try:
        point_active(models_dir, version)
    except FileNotFoundError:
        click.echo(f"warning: {models_dir / version} is missing: the daemon keeps its model until "
                   "the next retrain repairs the pointer", err=True)
    data = {"active": after.version, "was": before.version if before else None, "directory": after.directory}
    _emit(as_json, data, lambda: f"active model: {after.version} (was {data['was'] or 'none'})")


@models.command("export")
@click.argument("directories", nargs=-1, required=True, type=click.Path(path_type=Path))
def export_weights(directories) -> None:
    """Write weights.npz into each model DIRECTORY (made before serving went torch-free): the
    weights the daemon serves without torch. Needs torch (pip install 'slurm-advisor[train]')."""
    try:
        from slurm_advisor.learned import checkpoint
    except ImportError as exc:
        raise InputError(f"models export reads the .pt files with torch, which is not installed ({exc}); "
                         "install it: pip install 'slurm-advisor[train]'") from None
    for directory in directories:
        click.echo(f"wrote {checkpoint.export(directory)}")
