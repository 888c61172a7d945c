"""recaudit: simulation and privacy audits for private recommender systems.

One import package; its subpackages are ``recaudit.mechanisms``, ``recaudit.simulator``,
``recaudit.attacks``, ``recaudit.audits`` and ``recaudit.studies`` (imports flow in that order),
with ``recaudit.core`` (errors, registries) beneath them all.
"""
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("recaudit")
except _metadata.PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"
