"""Synthetic workload generators (Lynch's (1999) Feitelson-model generator)."""

from scheduler.lab.workloads.lynch import (
    HeteroJob,
    generate,
    hyperexp_interarrivals,
    job_size_pmf,
    mean_interarrival,
    runtime_sample,
    size_sample,
)

__all__ = [
    "HeteroJob",
    "generate",
    "hyperexp_interarrivals",
    "job_size_pmf",
    "mean_interarrival",
    "runtime_sample",
    "size_sample",
]
