"""Workloads as jobs: public traces (Philly, Gavel, Pollux) converted, and synthetic ones. Only the
domain below: the simulator, training, the benchmarks and the policies' probes read them."""
