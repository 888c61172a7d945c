"""McSherry–Mironov's non-private twin: the same pipeline, clipping, weights, cleaning and rank, with no noise.

What the private mechanism's accuracy is read against (issue 33: each private method beside its non-private twin):
every measurement exact (the noise scales 0), so ``MAvg`` is the paper's plain shrinkage by ``β_m`` fictitious
ratings, the covariance is exact and its top factors are the data's. It claims nothing; ``epsilon`` and ``delta``
are ignored (``noise`` still chooses the weights, ``1/c_u`` or ``1/sqrt(c_u)``, so a block differs from the
private one's only in its ``kind``).
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import PrivacyClaim
from .mcsherry_mironov import MEASUREMENTS, McSherryMironov


@dataclass
class McSherryMironovExact(McSherryMironov, kind="mcsherry_mironov_exact"):
    """McSherry–Mironov without noise (the utility baseline of the private one)."""

    def noise_scales(self, theta: float | None = None) -> dict[str, float]:
        return dict.fromkeys(MEASUREMENTS, 0.0)

    def privacy_event(self, answers: int = 1):
        return None  # nothing noised: no event to account

    def claim_for(self, answers: int = 1) -> PrivacyClaim:
        return PrivacyClaim.none()  # a non-private baseline: audits measure its leakage (verdict no_claim)
