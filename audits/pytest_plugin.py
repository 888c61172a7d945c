"""pytest plugin ``recaudit``: the ``dp_audit`` fixture and the ``dp`` marker.

Registered through the ``pytest11`` entry point (``recaudit = "recaudit.audits.pytest_plugin"``),
or explicitly with ``-p recaudit.audits.pytest_plugin``. ``dp_audit`` wraps
:func:`recaudit.audits.harness.assert_dp` / :func:`recaudit.audits.harness.assert_not_dp` with a
seed derived from the test's node id (SHA-256, so stable across runs,
machines and ``PYTHONHASHSEED``): each test gets its own fixed seed and a
failure reproduces exactly.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pytest

from . import harness

__all__ = ["DPAudit", "seed_from_node_id", "dp_audit", "pytest_configure"]


def seed_from_node_id(node_id: str) -> int:
    """A 64-bit seed that is a fixed function of the test's node id."""
    return int.from_bytes(hashlib.sha256(node_id.encode("utf-8")).digest()[:8], "little")


@dataclass(frozen=True)
class DPAudit:
    """``assert_dp``/``assert_not_dp`` with this test's seed filled in (overridable)."""

    seed: int
    node_id: str = ""

    def assert_dp(self, mechanism, **kwargs):
        kwargs.setdefault("seed", self.seed)
        return harness.assert_dp(mechanism, **kwargs)

    def assert_not_dp(self, mechanism, **kwargs):
        kwargs.setdefault("seed", self.seed)
        return harness.assert_not_dp(mechanism, **kwargs)

    def search_neighbours(self, mechanism, candidates=None, **kwargs) -> harness.NeighbourSearch:
        """Every candidate pair audited as one Holm family (see :func:`recaudit.audits.harness.search_neighbours`)."""
        kwargs.setdefault("seed", self.seed)
        return harness.search_neighbours(mechanism, candidates, **kwargs)

    def run(self, mechanism, **kwargs) -> harness.AuditRun:
        """The audit without a verdict (see :func:`recaudit.audits.harness.run_audit`)."""
        kwargs.setdefault("seed", self.seed)
        return harness.run_audit(mechanism, **kwargs)


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "dp: statistical differential-privacy audit (recaudit); fixed seed, stated false-failure probability",
    )


@pytest.fixture
def dp_audit(request) -> DPAudit:
    """Audit helper seeded from this test's node id."""
    node_id = request.node.nodeid
    return DPAudit(seed=seed_from_node_id(node_id), node_id=node_id)
