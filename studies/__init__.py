"""Research studies built on recaudit's public API (top layer: may import every package, nothing imports it).

Each study is a scenario kind (``study: {kind: ...}``, run by ``recaudit run``; ``recaudit.audits.language.studies``);
each module is also runnable: ``python -m recaudit.studies.xin_jaakkola``, ``python -m recaudit.studies.sp2``,
``python -m recaudit.studies.mcsherry_mironov_per_user`` (``--help`` lists the arguments).
"""
from . import matrix_completion, mcsherry_mironov_per_user, sp2, xin_jaakkola  # noqa: F401  (each registers its kind)
