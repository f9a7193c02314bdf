"""Chance listings when laggard starts watching a healthy cluster mid-stream (issue 21, session 17): the healthy-dense
day's events from hour 2 on only, so the tasks running then are seen finishing without their start. Tuning seeds
101-120, the shipped running policy; prints the healthy nodes each seed lists.

    PYTHONPATH=. python scripts/running_warmup_midstream.py
"""
from producers.scenario_suite import SCENARIOS
from producers.scenarios import ClusterSim
from streams.local import LocalPipeline
from streams.settings import Settings

START_US = 2 * 3600 * 10**6
listed = 0
for seed in range(101, 121):
    sim = ClusterSim(SCENARIOS["healthy-dense-24h"].scaled(hours=5), seed=seed)
    events = [e for e in sim if e.ts_us >= START_US]
    pipeline = LocalPipeline(Settings(policy="running"))
    nodes = {e.node_id for d in pipeline.run(iter(events)) for e in d.added}
    listed += len(nodes)
    print(seed, sorted(nodes), flush=True)
print("healthy nodes listed:", listed)
