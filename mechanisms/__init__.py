"""Privacy mechanisms and their claims. Pure numpy/scipy, no I/O.

A new mechanism is one module here plus one line in ``MECHANISMS``.
"""
from .base import BitRandomizer, GaussianNoise, LocalMechanism, ParameterError, PrivacyClaim, Protocol, UserBatch, WorldInfo
from .continual_covariance import NaiveContinualCovariance, TreeContinualCovariance
from .adaptive_maxsense import AdaptiveMaxSense, AdaptiveMaxSenseBroken
from .maxsense import MaxSense, MaxSenseBroken
from .mcsherry_mironov import McSherryMironov, McSherryMironovPerUserClaim
from .multi_maxsense import MultiMaxSense, MultiMaxSenseBroken
from .pairwise_preference import PairwisePreference, PairwisePreferenceBroken
from .frank_wolfe import (FrankWolfe, PrivateFrankWolfe, PrivateFrankWolfeLeakyOutputs, PrivateFrankWolfeNoNoise,
                          PrivateFrankWolfeNoProjection)
from .projected_gradient import PrivateProjectedGradient
from .xin_jaakkola import XinJaakkola, XinJaakkolaLaplace
from .sp2 import SP2, SP2LeakyDownload

MECHANISMS: dict[str, type[Protocol]] = {
    "maxsense": MaxSense,
    "maxsense_broken": MaxSenseBroken,
    "pairwise_preference": PairwisePreference,
    "pairwise_preference_broken": PairwisePreferenceBroken,
    "multi_maxsense": MultiMaxSense,
    "multi_maxsense_broken": MultiMaxSenseBroken,
    "adaptive_maxsense": AdaptiveMaxSense,
    "adaptive_maxsense_broken": AdaptiveMaxSenseBroken,
    "private_frank_wolfe": PrivateFrankWolfe,
    "private_frank_wolfe_no_noise": PrivateFrankWolfeNoNoise,
    "private_frank_wolfe_no_projection": PrivateFrankWolfeNoProjection,
    "private_frank_wolfe_leaky_outputs": PrivateFrankWolfeLeakyOutputs,
    "frank_wolfe": FrankWolfe,
    "private_projected_gradient": PrivateProjectedGradient,
    "mcsherry_mironov": McSherryMironov,
    "mcsherry_mironov_per_user_claim": McSherryMironovPerUserClaim,
    "continual_covariance_naive": NaiveContinualCovariance,
    "continual_covariance_tree": TreeContinualCovariance,
    "xin_jaakkola": XinJaakkola,
    "xin_jaakkola_laplace": XinJaakkolaLaplace,
    "sp2": SP2,
    "sp2_leaky_download": SP2LeakyDownload,
}


def get_mechanism(kind: str) -> type[Protocol]:
    """The mechanism class registered as ``kind``; the error lists valid names."""
    try:
        return MECHANISMS[kind]
    except KeyError:
        raise KeyError(f"unknown mechanism {kind!r}; registered: {', '.join(sorted(MECHANISMS))}") from None


__all__ = ["BitRandomizer", "GaussianNoise", "Protocol", "LocalMechanism", "ParameterError", "PrivacyClaim", "UserBatch", "WorldInfo", "MECHANISMS", "get_mechanism",
           "MaxSense", "MaxSenseBroken", "PairwisePreference", "PairwisePreferenceBroken", "MultiMaxSense",
           "MultiMaxSenseBroken", "AdaptiveMaxSense", "AdaptiveMaxSenseBroken", "PrivateFrankWolfe", "FrankWolfe",
           "PrivateFrankWolfeNoNoise", "PrivateFrankWolfeNoProjection", "PrivateFrankWolfeLeakyOutputs",
           "PrivateProjectedGradient", "XinJaakkola", "XinJaakkolaLaplace", "SP2", "SP2LeakyDownload",
           "NaiveContinualCovariance", "TreeContinualCovariance"]
