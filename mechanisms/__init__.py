"""Privacy mechanisms and their claims. Pure numpy/scipy, no I/O.

A new mechanism is one module here: ``class X(Mechanism, kind="x")`` registers it in ``MECHANISMS``;
every module of this package is imported below, so nothing else needs a line.
"""
import importlib
import pkgutil

from .base import (MECHANISMS, BitRandomizer, GaussianNoise, LaplaceNoise, LocalMechanism, Mechanism, ParameterError,
                   PrivacyClaim, UserBatch, WorldInfo)
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

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["BitRandomizer", "GaussianNoise", "LaplaceNoise", "Mechanism", "LocalMechanism", "ParameterError",
           "PrivacyClaim", "UserBatch", "WorldInfo", "MECHANISMS",
           "MaxSense", "MaxSenseBroken", "PairwisePreference", "PairwisePreferenceBroken", "MultiMaxSense",
           "MultiMaxSenseBroken", "AdaptiveMaxSense", "AdaptiveMaxSenseBroken", "PrivateFrankWolfe", "FrankWolfe",
           "PrivateFrankWolfeNoNoise", "PrivateFrankWolfeNoProjection", "PrivateFrankWolfeLeakyOutputs",
           "PrivateProjectedGradient", "XinJaakkola", "XinJaakkolaLaplace", "SP2", "SP2LeakyDownload",
           "NaiveContinualCovariance", "TreeContinualCovariance", "McSherryMironov", "McSherryMironovPerUserClaim"]
