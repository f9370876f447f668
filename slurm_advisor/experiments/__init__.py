"""Orchestration beside the CLI: record speeds and train in the simulator (``experiment``), the
demo (``demo``), its plots (``plots``), training from a site's store (``service``)."""
