"""Trainers of real libraries audited through their adapters (``recaudit.mechanisms.trainer_libraries``):
``implicit``'s ALS and ``scikit-surprise``'s SVD, each non-private and claiming ε = 1, violated in one training
run with isolated canaries (their power: fixed seeds, deterministic). Marker ``libs``; each test skips with
the reason when its library is not installed (``pip install 'recaudit[trainers]'``)."""
from __future__ import annotations

import pytest

from recaudit.audits.trainer_audit import audit_trainer

pytestmark = pytest.mark.libs

STARS = [[[0.1, 0.1, 0.2, 0.3, 0.3], [0.3, 0.3, 0.2, 0.1, 0.1]], [[0.2, 0.2, 0.2, 0.2, 0.2], [0.5, 0.2, 0.1, 0.1, 0.1]]]


def _audit(fit: str, options: dict, attacks: list[str]) -> object:
    return audit_trainer(fit, {
        "seed": 3,
        "population": {"kind": "sbm_stars", "n_items": 200, "ratings_per_user": 20, "star_probability": STARS,
                       "user_cluster_weights": [0.5, 0.5], "item_cluster_weights": [0.5, 0.5], "held_out": 2},
        "panel": {"n_users": 400},
        "mechanism": {"claim": {"epsilon": 1.0, "delta": 1e-5}, "options": options},
        "attack": [{"kind": a} for a in attacks],
        "audit": {"canaries": 300},
    })


def test_implicit_als_claiming_one_is_violated():
    pytest.importorskip("implicit", reason="implicit is not installed (pip install 'recaudit[trainers]')")
    result = _audit("recaudit.mechanisms.trainer_libraries:implicit_als", {"factors": 16, "iterations": 5},
                    ["fold_in", "recommendation_list"])
    assert result.verdict == "violated"
    assert result.trainer["attacks"]["fold_in"]["auc"] > 0.9


def test_surprise_svd_claiming_one_is_violated():
    pytest.importorskip("surprise", reason="scikit-surprise is not installed (pip install 'recaudit[trainers]')")
    result = _audit("recaudit.mechanisms.trainer_libraries:surprise_svd", {"factors": 16, "epochs": 10},
                    ["fold_in"])
    assert result.verdict == "violated"
    assert result.utility["rmse"] is not None
