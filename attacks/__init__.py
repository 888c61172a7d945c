"""Adversaries against mechanisms. A new attack is one module plus one line in ``ATTACKS``."""
from .base import DistinguishingAttack
from .likelihood_ratio import LikelihoodRatioAttack

ATTACKS: dict[str, type[DistinguishingAttack]] = {
    "likelihood_ratio": LikelihoodRatioAttack,
}


def get_attack(kind: str) -> type[DistinguishingAttack]:
    """The attack class registered as ``kind``; the error lists valid names."""
    try:
        return ATTACKS[kind]
    except KeyError:
        raise KeyError(f"unknown attack {kind!r}; registered: {', '.join(sorted(ATTACKS))}") from None


__all__ = ["ATTACKS", "DistinguishingAttack", "LikelihoodRatioAttack", "get_attack"]
