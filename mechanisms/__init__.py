"""Privacy mechanisms and their claims. Pure numpy/scipy, no I/O.

A new mechanism is one module here plus one line in ``MECHANISMS``.
"""
from .base import LocalMechanism, ParameterError, PrivacyClaim, UserBatch, WorldInfo
from .maxsense import MaxSense, MaxSenseBroken

MECHANISMS: dict[str, type[LocalMechanism]] = {
    "maxsense": MaxSense,
    "maxsense_broken": MaxSenseBroken,
}


def get_mechanism(kind: str) -> type[LocalMechanism]:
    """The mechanism class registered as ``kind``; the error lists valid names."""
    try:
        return MECHANISMS[kind]
    except KeyError:
        raise KeyError(f"unknown mechanism {kind!r}; registered: {', '.join(sorted(MECHANISMS))}") from None


__all__ = ["LocalMechanism", "ParameterError", "PrivacyClaim", "UserBatch", "WorldInfo", "MECHANISMS", "get_mechanism",
           "MaxSense", "MaxSenseBroken"]
