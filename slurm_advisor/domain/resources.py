"""A vector of the three resources Slurm tracks per node: CPUs, GPUs and memory."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resources:
    cpus: int = 0
    gpus: int = 0
    mem_mb: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpus + other.cpus, self.gpus + other.gpus, self.mem_mb + other.mem_mb)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpus - other.cpus, self.gpus - other.gpus, self.mem_mb - other.mem_mb)

    def times(self, k: int) -> Resources:
        return Resources(self.cpus * k, self.gpus * k, self.mem_mb * k)

    def fits_in(self, available: Resources) -> bool:
        return (self.cpus <= available.cpus and self.gpus <= available.gpus
                and self.mem_mb <= available.mem_mb)

    def fraction_of(self, capacity: Resources) -> tuple[float, float, float]:
        """Each resource as a share of `capacity` (0 where the capacity is 0)."""
        return (_share(self.cpus, capacity.cpus), _share(self.gpus, capacity.gpus),
                _share(self.mem_mb, capacity.mem_mb))

    def is_zero(self) -> bool:
        return self.cpus == 0 and self.gpus == 0 and self.mem_mb == 0


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0
