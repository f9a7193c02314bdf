"""Split py-spy's collapsed stacks (``--format raw --threads``) of a laggard worker or in-process run into parts
(docs/scale.md, session 11).

Each sample goes to the first part whose rule matches its stack, in the order below (metrics and logging first,
wherever they are called from; then the shell's parts; then the core stages); the rest is "other" with its
innermost laggard/streams frame, so nothing is silently dropped. With ``--cpu S`` the shares are turned into CPU
seconds (the process's measured CPU time; py-spy's samples count a thread that waits for a core as running, so on
a loaded machine samples / rate overstates the CPU, while the shares hold).

    python scripts/cpu_parts.py PROFILE.txt [--cpu SECONDS] [--main] [--rate HZ] [--other N]

With ``--main`` only the main thread's samples are split and SECONDS is its CPU (``/proc/PID/task/PID/stat``, as
``profile_google_worker.py`` prints it): the thread-by-thread CPU from /proc is the better split between threads.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Callable

Rule = tuple[str, Callable[[str], bool]]


def has(*needles: str) -> Callable[[str], bool]:
    return lambda stack: any(n in stack for n in needles)


OUT = "send_raw (streams/engine/store.py"
RULES: list[Rule] = [
    ("outputs: producer network threads (kafka-python)", lambda s: "producer" in s.split(";", 1)[0]),
    ("consume: kafka-io thread (fetch IO, heartbeats)", lambda s: "kafka-io-" in s.split(";", 1)[0]),
    ("health-check thread", lambda s: "health-check" in s.split(";", 1)[0]),
    ("metrics (prometheus_client)", has("prometheus_client/")),
    ("logging", has("/logging/__init__.py")),
    ("outputs: encode (codec.encode, key)", lambda s: "send (streams/engine/store.py" in s and has(
        "streams/serde/")(s.split("send (streams/engine/store.py", 1)[1])),
    ("outputs: kafka-python send", has(OUT)),
    ("checkpoints: snapshot + pack", has("pack (streams/agents/envelope.py", "snapshot (streams/")),
    ("checkpoints: queue/advance + commit", has("settle (streams/engine/worker.py", "checkpoint (streams/engine/",
                                                 "commit (streams/engine/worker.py")),
    ("decode (codec.decode + validate)", has("decode (streams/engine/hosts.py")),
    ("note (backlog, progress, highwater)", has("note (streams/engine/worker.py")),
    ("consume: kafka-python poll/fetch/parse", has("poll (kafka/consumer/group.py", "_poll_once (kafka/")),
    ("timers: tick (idle, backlog refresh)", has("tick (streams/engine/worker.py")),
    ("core: normalise (process_batch)", has("process_batch (streams/", "release_job_stream_if_idle")),
    ("core: rank (take, publish without encode)", has("take (streams/engine/hosts.py:2", "RankStage",
                                                       "rank (streams/core/")),
    ("core: normalise host glue (fresh, dead letters)", has("take (streams/engine/hosts.py:1")),
]


def thread_of(stack: str) -> str:
    first = stack.split(";", 1)[0]
    return re.sub(r"0x[0-9A-Fa-f]+", "", first).strip()


def part_of(stack: str) -> str:
    for name, rule in RULES:
        if rule(stack):
            return name
    own = [f for f in stack.split(";") if "streams/" in f or "laggard/" in f or "producers/" in f]
    return "other: " + (own[-1] if own else stack.split(";")[-1])[:90]


def main(argv: list[str]) -> None:
    path = argv[0]
    cpu = float(argv[argv.index("--cpu") + 1]) if "--cpu" in argv else None
    rate = float(argv[argv.index("--rate") + 1]) if "--rate" in argv else 100.0
    others = int(argv[argv.index("--other") + 1]) if "--other" in argv else 12
    main_only = "--main" in argv
    threads: Counter[str] = Counter()
    parts: Counter[str] = Counter()
    with open(path, encoding="utf-8", errors="replace") as lines:
        rows = [line.rstrip("\n").rpartition(" ") for line in lines]
    for stack, _, count in rows:
        if not stack or not count.isdigit():
            continue
        n = int(count)
        threads[thread_of(stack)] += n
        if main_only and "MainThread" not in thread_of(stack):
            continue
        parts[part_of(stack)] += n
    total = sum(parts.values())
    which = " of the main thread" if main_only else ""
    print(f"{total} samples{which} ({total / rate:.1f} s at {rate:.0f} Hz) in {path}")
    for thread, n in threads.most_common():
        print(f"  thread {thread}: {n} ({100 * n / total:.1f} %)")
    print("| part | samples | share | CPU s |\n|---|---:|---:|---:|")
    shown = 0
    for name, n in parts.most_common():
        if name.startswith("other: "):
            shown += 1
            if shown > others:
                continue
        seconds = f"{cpu * n / total:.1f}" if cpu is not None else "-"
        print(f"| {name} | {n} | {100 * n / total:.1f} % | {seconds} |")


if __name__ == "__main__":
    main(sys.argv[1:])
