"""The in-process statistics + ranking path of two source trees side by side, against the codec decode floor.

    python scripts/inprocess_speed.py --base /work/main --tree . [--events 300000] [--rounds 2]

The Google 2011 task events are read once (``LAGGARD_TRACES_DIR``) and pickled to a temporary file; then, for
each round, a subprocess per tree (its own ``PYTHONPATH``, alternating so that machine load hits both alike)
measures, on the same events, the Avro codec decode floor exactly as ``laggard bench`` does (its first 200,000
records, best of 3) and ``LocalPipeline.run`` over them as ``laggard bench``'s in-process stage does
(``laggard.bench.inprocess.statistics_path``), and both again in the process's CPU time (the machine is shared:
its load moves wall-clock rates, the decode floor most of all). One JSON document on stdout: every round of
every tree, and a digest of each tree's rankings and deltas, which must be equal.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import hashlib, json, pickle, sys, time
from laggard.bench.common import best_rate
from laggard.bench.floors import _loop
from laggard.bench.inprocess import statistics_path
from streams.serde import codec
from streams.settings import Settings
from streams.local import LocalPipeline
events = pickle.load(open(sys.argv[1], "rb"))
as_avro = [codec.encode(r) for r in events[:200_000]]
floor = best_rate(_loop(codec.decode, as_avro), 3)
decode, cpu_floor = _loop(codec.decode, as_avro), 0.0
for _ in range(3):  # the same floor in CPU time: the machine's load moves it less
    started = time.process_time()
    cpu_floor = max(cpu_floor, decode() / (time.process_time() - started))
del as_avro
cpu = time.process_time()
figures = statistics_path(Settings(), events)
cpu = time.process_time() - cpu
digest = hashlib.sha256()
pipeline = LocalPipeline(Settings(), on_ranking=lambda r: digest.update(repr(r).encode()))
deltas = list(pipeline.run(events)) if sys.argv[2] == "digest" else []
import streams
print(json.dumps({"source": streams.__file__, "codec_decode_per_s": floor, **figures,
                  "pipeline_cpu_per_s": len(events) / cpu,
                  "ratio_to_codec_floor": figures["pipeline_per_s"] / floor, "codec_decode_cpu_per_s": cpu_floor,
                  "cpu_ratio_to_codec_floor": len(events) / cpu / cpu_floor,
                  "rankings_sha256": digest.hexdigest() if deltas else None,
                  "deltas_sha256": hashlib.sha256(repr(deltas).encode()).hexdigest() if deltas else None}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="/work/main", help="the tree to compare with")
    parser.add_argument("--tree", default=".", help="the tree measured")
    parser.add_argument("--events", type=int, default=None, help="the first N events (default: all)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    trees = {"base": str(Path(args.base).resolve()), "tree": str(Path(args.tree).resolve())}
    env = dict(os.environ, PYTHONPATH=trees["tree"])
    with tempfile.TemporaryDirectory() as scratch:
        events_file = Path(scratch) / "events.pkl"
        reader = ("import itertools, pickle, sys; from producers.registry import open_trace; "
                  "from laggard.bench.common import google_events_spec; from streams.settings import Settings; "
                  "t = open_trace(google_events_spec(Settings())); "
                  "n = None if sys.argv[2] == 'all' else int(sys.argv[2]); "
                  "pickle.dump(list(itertools.islice(t, n)), open(sys.argv[1], 'wb'))")  # fmt: skip
        print("reading the events", file=sys.stderr)
        subprocess.run([args.python, "-c", reader, str(events_file), str(args.events or "all")], env=env,
                       cwd=trees["tree"], check=True)
        with events_file.open("rb") as handle:
            count = len(pickle.load(handle))
        rounds: dict[str, list[dict[str, object]]] = {name: [] for name in trees}
        for round_ in range(args.rounds):
            for name, path in trees.items():
                print(f"round {round_ + 1}: {name} ({path})", file=sys.stderr)
                mode = "digest" if round_ == 0 else "rate"
                # cwd=path as well: ``python -c`` puts the working directory before PYTHONPATH on sys.path
                out = subprocess.run([args.python, "-c", CHILD, str(events_file), mode], capture_output=True,
                                     text=True, env=dict(os.environ, PYTHONPATH=path), cwd=path, check=True).stdout
                rounds[name].append(json.loads(out))
                last = rounds[name][-1]
                print(f"  {last['pipeline_per_s']:.0f} ev/s, {last['ratio_to_codec_floor']:.1%} of the codec floor; "
                      f"CPU time: {last['pipeline_cpu_per_s']:.0f} ev/s, {last['cpu_ratio_to_codec_floor']:.1%}",
                      file=sys.stderr)
    same = all(rounds["base"][0][k] == rounds["tree"][0][k] for k in ("rankings_sha256", "deltas_sha256"))
    print(json.dumps({"events": count, "trees": trees, "rounds": rounds, "identical_results": same}, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
