"""How much a task's own progress-rate change says about a 2x onset (docs/scenarios.md, session 7).

Usage: PYTHONPATH=. python scripts/progress_information.py NOISE (e.g. 0.2, the default noise, or 0.05). cpu-2x,
tuning seeds 101-105, 4 reports per mean task: per task with 3+ reports, the log of its last report interval's
rate over its first one's, for healthy tasks and for 2x tasks running at the onset; their Gaussian KL.
"""

import math
import sys
from collections import defaultdict

import numpy as np

from producers.scenario_suite import SCENARIOS
from producers.scenarios import ClusterSim
from streams.core.events import TaskCheckpoint, TaskStart

MIN = 60_000_000
healthy, straddle, after = [], [], []
for seed in range(101, 106):
    sim = ClusterSim(SCENARIOS["cpu-2x"].scaled(checkpoints=4, progress_noise=float(sys.argv[1])), seed)
    spans = sim.ground_truth["slow_spans"]
    reps: dict = defaultdict(list)
    start: dict = {}
    for e in sim:
        if isinstance(e, TaskStart):
            start[(e.job_id, e.task_id)] = (e.node_id, e.ts_us)
        elif isinstance(e, TaskCheckpoint):
            reps[(e.job_id, e.task_id)].append((e.ts_us, e.elapsed_us, e.features["progress"]))
    for key, r in reps.items():
        if len(r) < 3:
            continue
        node, s = start[key]
        # rate over the first report interval (from the start) vs over the last interval
        (t1, e1, p1), (t2, e2, p2), (t3, e3, p3) = r[0], r[-2], r[-1]
        if p3 <= p2 or p1 <= 0:
            continue
        lr = math.log(((p3 - p2) / (e3 - e2)) / (p1 / e1))
        if node in spans:
            onset, rec = spans[node][0]
            if s < onset < t2 and t3 < rec:
                straddle.append(lr)
            elif s >= onset and t3 < rec:
                after.append(lr)
        elif s > 60 * MIN:
            healthy.append(lr)
h, st = np.array(healthy), np.array(straddle)
print(f"healthy tasks {len(h)}: log(last rate / first rate) mean {h.mean():+.3f} sd {h.std():.3f}")
print(f"2x tasks running at the onset {len(st)}: mean {st.mean():+.3f} sd {st.std():.3f}; "
      f"after {len(after)}: mean {np.mean(after):+.3f}")
kl = (st.mean() - h.mean())**2 / (2 * h.var())
print(f"Gaussian KL per task running at the onset: {kl:.2f} nats (durations: 0.90)")
