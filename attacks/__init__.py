"""Adversaries against mechanisms.

A new attack is one module here: ``class X(Attack, kind="x")`` registers it in ``ATTACKS``; every module of
this package is imported below, so nothing else needs a line.
"""
import importlib
import pkgutil

from .base import ATTACKS, Attack, AttackError
from .covariance_projection import CovarianceProjectionAttack
from .learned import OUTPUT_ATTACKS, BoostedAttack, HistogramAttack, LogisticAttack, OutputAttack
from .differencing import DifferencingAttack, NoiseAwareDifferencingAttack
from .likelihood_ratio import LikelihoodRatioAttack
from .subspace_alignment import SubspaceAlignmentAttack, UnpublishedDirectionAttack

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["ATTACKS", "OUTPUT_ATTACKS", "Attack", "AttackError", "BoostedAttack", "CovarianceProjectionAttack",
           "DifferencingAttack",
           "NoiseAwareDifferencingAttack", "HistogramAttack", "LikelihoodRatioAttack", "LogisticAttack",
           "OutputAttack", "SubspaceAlignmentAttack", "UnpublishedDirectionAttack"]
