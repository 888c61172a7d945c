"""Research studies built on recaudit's public API (top layer: may import every package, nothing imports it).

Each module is runnable: ``python -m studies.xin_jaakkola``, ``python -m studies.sp2``,
``python -m studies.mcsherry_mironov_per_user`` (``--help`` lists the arguments).
"""
