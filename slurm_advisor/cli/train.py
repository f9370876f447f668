import click


@click.command()
def train():
    """Fit the speed model on recorded samples and train the placement policy."""
    raise click.ClickException("not yet")
