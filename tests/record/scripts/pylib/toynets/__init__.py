"""A tiny model package that pythonpath_package.py finds through PYTHONPATH (not its own folder)."""

from .blocks import ResidualMLP, rms_norm

__all__ = ["ResidualMLP", "rms_norm"]
