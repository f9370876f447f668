"""Storage behind one module: only :class:`Store` opens SQLAlchemy sessions; callers use plain methods."""
from slurm_advisor.store.store import Store

__all__ = ["Store"]
