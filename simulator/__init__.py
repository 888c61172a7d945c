"""The world: populations, the churn clock, the engine's round loop, transcripts and ratings files."""
from . import fitted  # noqa: F401 -- registers the population kind 'fitted' (it builds on populations' panels)
