"""Slurm as the resource manager (docs/slurm.md)."""
