"""The decision layer (SPEC 3): detector evidence -> blacklist verdicts (``policy``) -> versioned deltas
(``book``); ``registry.POLICIES`` names every policy. Nothing is imported here, so that
``ranking_config`` can read the registry without an import cycle."""
