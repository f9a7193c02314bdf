"""Hawkeye's held-out measurement: is hawkeye-adaptive better than the best fixed Spark pair chosen on other jobs?

    python scripts/hawkeye_heldout.py --trace google2011-usage:DIR                  # leave-one-job-out
    python scripts/hawkeye_heldout.py --trace synthetic:...,seed=3 \\
        --train synthetic:...,seed=1 --train synthetic:...,seed=2                   # train seeds, test seed

Every job is replayed once, causally, with every (quantile, multiplier) arm of Hawkeye and of Spark's rule in
the shadow, then simulated in speculate mode (``--spares``: spare machines, ``unlimited`` for Algorithm 2).
Prints per-job rows and means; ``--json`` prints one JSON document instead. The logic is
``streams.core.prediction.hawkeye.heldout``; this is the thin shell that reads traces.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from producers.registry import open_trace
from streams.core.prediction.hawkeye.adaptive import RewardModel
from streams.core.prediction.hawkeye.heldout import leave_one_out, means, replay, split

LABELS = ("hawkeye-adaptive", "spark-best-on-train", "hawkeye", "spark-q0.75-m1.5", "spark-q0.9-m3")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", required=True, help="FORMAT:PATH of the jobs to report on")
    parser.add_argument("--train", action="append", default=[], help="traces to train on (else leave-one-job-out)")
    parser.add_argument("--spares", default="0", help="spare machines, or 'unlimited' (default 0)")
    parser.add_argument("--repeats", type=int, default=3, help="seeded draws per arm and job (default 3)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    try:
        spares = None if args.spares == "unlimited" else int(args.spares)
        rewards = RewardModel(spares=spares, repeats=args.repeats)
        print(f"replaying {args.trace} ...", file=sys.stderr)
        test = replay(open_trace(args.trace), rewards)
        train = []
        for spec in args.train:
            print(f"replaying {spec} ...", file=sys.stderr)
            train += replay(open_trace(spec), rewards)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows = split(train, test) if train else leave_one_out(test)
    protocol = "train/test split" if train else "leave-one-job-out"
    document: dict[str, Any] = {"trace": args.trace, "train": args.train, "protocol": protocol,
                                "spares": args.spares, "rows": rows, "means": means(rows)}  # fmt: skip
    if args.json:
        print(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
    else:
        _print(document)
    return 0


def _cell(entry: dict[str, Any] | None) -> str:
    return "-" if entry is None else f"{100 * entry['cut']:6.1f}% {entry['wasted_s'] / 3600:6.2f}h"


def _print(document: dict[str, Any]) -> None:
    print(f"{document['protocol']} on {document['trace']} (speculate mode, spares {document['spares']})")
    print("JCT cut and wasted machine hours per job; arms chosen on other jobs only")
    print(f"{'job':>12} {'tasks':>5} " + " ".join(f"{label:>20}" for label in LABELS) + "  adaptive / spark arm")
    rows = document["rows"]
    for row in rows if len(rows) <= 40 else rows[:20]:
        cells = " ".join(f"{_cell(row[label]):>20}" for label in LABELS)
        print(f"{row['job_id']:>12} {row['n_tasks']:>5} {cells}  {row['adaptive_arm']} / {row['spark_arm']}")
    if len(rows) > 40:
        print(f"... {len(rows) - 20} more rows (--json for all)")
    for label, summary in document["means"].items():
        print(f"{label:>20}: mean JCT cut {100 * summary['mean_cut']:5.1f}%, "
              f"wasted {summary['wasted_s_per_job'] / 3600:.2f} machine h/job over {summary['jobs']} jobs")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
