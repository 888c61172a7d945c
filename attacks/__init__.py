"""Adversaries against mechanisms. A new attack is one module plus one line in ``ATTACKS``."""
from .base import Attack
from .covariance_projection import CovarianceProjectionAttack
from .learned import OUTPUT_ATTACKS, BoostedAttack, HistogramAttack, LogisticAttack, OutputAttack
from .differencing import DifferencingAttack, NoiseAwareDifferencingAttack
from .dinur_nissim import DinurNissimAttack
from .laplace_posterior import LaplacePosteriorAttack
from .likelihood_ratio import LikelihoodRatioAttack
from .pmc_sign import PmcSignAttack
from .pmd_coordinate import PmdCoordinateAttack
from .pmd_pairwise import PmdPairwiseAttack
from .sigma_tilt import SigmaTiltAttack
from .sketch_agreement import SketchAgreementAttack
from .sp2_server_view import SP2ServerViewAttack
from .subspace_alignment import SubspaceAlignmentAttack, UnpublishedDirectionAttack

ATTACKS: dict[str, type[Attack]] = {
    "likelihood_ratio": LikelihoodRatioAttack,
    "differencing": DifferencingAttack,
    "differencing_noise_aware": NoiseAwareDifferencingAttack,
    "sketch_agreement": SketchAgreementAttack,
    "subspace_alignment": SubspaceAlignmentAttack,
    "covariance_projection": CovarianceProjectionAttack,
    "unpublished_direction": UnpublishedDirectionAttack,
    "pmc_sign": PmcSignAttack,
    "pmd_pairwise": PmdPairwiseAttack,
    "pmd_coordinate": PmdCoordinateAttack,
    "laplace_posterior": LaplacePosteriorAttack,
    "dinur_nissim": DinurNissimAttack,
    "sigma_tilt": SigmaTiltAttack,
    "sp2_server_view": SP2ServerViewAttack,
    **OUTPUT_ATTACKS,
}


def get_attack(kind: str) -> type[Attack]:
    """The attack class registered as ``kind``; the error lists valid names."""
    try:
        return ATTACKS[kind]
    except KeyError:
        raise KeyError(f"unknown attack {kind!r}; registered: {', '.join(sorted(ATTACKS))}") from None


__all__ = ["ATTACKS", "OUTPUT_ATTACKS", "Attack", "BoostedAttack", "CovarianceProjectionAttack", "DifferencingAttack", "NoiseAwareDifferencingAttack", "HistogramAttack", "LikelihoodRatioAttack",
           "LogisticAttack", "OutputAttack", "get_attack"]
