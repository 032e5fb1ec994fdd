"""The error hierarchy. Every error the library raises on purpose derives from
:class:`AccelmapError`, so a caller (and the CLI) can tell user errors from bugs."""

from __future__ import annotations

__all__ = [
    "AccelmapError",
    "SpecError",
    "UnknownPluginError",
    "InfeasibleSpaceError",
    "SpaceTooLargeError",
]


class AccelmapError(Exception):
    """Root of every error accelmap raises on purpose."""


class SpecError(AccelmapError, ValueError):
    """A workload, architecture, mapping or constraint spec is malformed.

    Messages say what is wrong, where (file and key path), what was received and what
    was expected, e.g. ``arch.yaml: levels[1].capacity_words = 0; expected an int >= 1``.
    """


class UnknownPluginError(AccelmapError, LookupError):
    """A plugin, preset or zoo name is not registered."""


class InfeasibleSpaceError(AccelmapError):
    """No legal mapping exists or none was found; the message carries the violation histogram."""


class SpaceTooLargeError(AccelmapError):
    """A mapping space is too large for the requested operation (e.g. enumeration)."""
