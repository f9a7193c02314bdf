"""Trace readers: pure functions from trace files to laggard's events, in event-time order.

One module per format; ``producers.registry.open_trace`` is the entry point that picks one. No reader
imports Kafka: the one sink is ``producers.sink``.
"""
