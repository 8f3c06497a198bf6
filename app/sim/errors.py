"""Errors of ``koord sim``."""

from __future__ import annotations


class SimInputError(ValueError):
    """A trace file is unusable; the message names the file, the line (1-based, header = 1) and the field.

    Example: ``pods.csv:12: field gpu_milli: must be a non-negative integer, got '-5'``.
    The CLI prints it and exits with status 2.
    """
