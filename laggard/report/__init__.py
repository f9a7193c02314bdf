"""What a run of laggard tells a person: live progress, terminal tables, JSON documents, HTML with plots.

``progress`` drives the in-process pipeline with a live line on stderr; ``documents`` turns deltas,
rankings and counts into JSON-ready dicts; ``terminal`` prints them as tables; ``history`` records each
ranking of a run for the plots; ``plots`` draws PNGs with matplotlib (Agg); ``html`` writes the demo's
``index.html``. The statistics themselves come from ``streams.core``; nothing here computes them.
"""
