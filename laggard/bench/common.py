"""What every stage of the bench shares: sizes, trace paths, timing, memory readings and progress on stderr."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from streams.settings import Settings

console = Console(stderr=True, highlight=False)
GOOGLE_EVENTS_DIR = "google2011-task-events"
GOOGLE_USAGE_DIR = "google2011-nurd-timeseries/timeseriesspecsixtotal"


@dataclass(frozen=True)
class Sizes:
    """How much work each stage does; ``quick`` is the CI smoke size, ``tiny`` the unit test's."""

    name: str
    decode_records: int  # records in the decode loops (Google events; usage checkpoints are all of them)
    avro_reference_records: int  # the reference avro package is slow: a prefix of the same records
    repeats: int  # best of this many passes for each decode loop
    inprocess_events: int | None  # Google events through the statistics path (None: the whole trace)
    nurd_batch_jobs: tuple[str, ...]  # usage-series jobs for the per-checkpoint cost (the smallest ones)
    kafka_events: int  # events pre-loaded to task-events/job-events
    kafka_window_s: float  # longest time a throughput scenario is watched
    live_seconds: float  # wall time of the live synthetic cluster (latency)
    live_speed: float  # its replay speed (event seconds per wall second)
    live_spec: str  # the synthetic cluster
    scale_nodes: tuple[int, ...] = (10_000, 100_000)  # synthetic cluster sizes for the ranking's cost per period
    scale_running_nodes: tuple[int, ...] = (10_000,)  # ... under the running policy (it keeps every task: slower)


SYNTHETIC_LIVE = "synthetic:nodes=40,slow=3,jobs=600,tasks=10-30,slowdown=2.5,seed=7"
SMALL_JOBS = ("6343048076", "6308689702")  # 819 and 1857 checkpoints; the others have 5213 and 13002

SIZES: dict[str, Sizes] = {
    "full": Sizes("full", 200_000, 20_000, 3, None, SMALL_JOBS, 500_000, 150.0, 90.0, 100.0, SYNTHETIC_LIVE),
    "quick": Sizes("quick", 20_000, 2_000, 2, 100_000, SMALL_JOBS[:1], 12_000, 12.0, 15.0, 200.0, SYNTHETIC_LIVE,
                   (10_000,), (1_000,)),
    # The Kafka events must span a few ranking periods: workers commit offsets only at their checkpoints.
    "tiny": Sizes("tiny", 2_000, 200, 1, 5_000, SMALL_JOBS[:1], 12_000, 10.0, 15.0, 200.0, SYNTHETIC_LIVE, (1_000,),
                  (300,)),
}


def sizes_document(sizes: Sizes) -> dict[str, Any]:
    return asdict(sizes)


def sizes_from(document: dict[str, Any]) -> Sizes:
    values = dict(document)
    values["nurd_batch_jobs"] = tuple(values["nurd_batch_jobs"])
    values["scale_nodes"] = tuple(values.get("scale_nodes", ()))
    values["scale_running_nodes"] = tuple(values.get("scale_running_nodes", ()))
    return Sizes(**values)


def traces_dir(settings: Settings) -> Path:
    """The traces directory of the settings, resolved against the working directory."""
    return settings.traces_dir.expanduser().resolve()


def google_events_spec(settings: Settings) -> str:
    return f"google2011-events:{traces_dir(settings) / GOOGLE_EVENTS_DIR}"


def google_usage_spec(settings: Settings) -> str:
    return f"google2011-usage:{traces_dir(settings) / GOOGLE_USAGE_DIR}"


def missing_traces(settings: Settings) -> list[Path]:
    """The trace folders the bench needs that are not there."""
    root = traces_dir(settings)
    return [root / sub for sub in (GOOGLE_EVENTS_DIR, GOOGLE_USAGE_DIR) if not (root / sub).is_dir()]


def say(message: str) -> None:
    """One progress line on stderr."""
    console.print(f"[dim]bench[/dim] {message}")


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def best_rate(loop: Callable[[], int], repeats: int) -> float:
    """Items per second of the fastest of ``repeats`` runs of ``loop`` (which returns how many it did).

    The fastest run is the one least disturbed by the other work on a shared machine, as ``timeit`` advises.
    """
    best = 0.0
    for _ in range(max(1, repeats)):
        started = time.perf_counter()
        count = loop()
        best = max(best, rate(count, time.perf_counter() - started))
    return best


def self_peak_mb() -> float:
    """Peak resident memory of this process so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def vm_hwm_mb(pid: int) -> float | None:
    """Peak resident memory (VmHWM) of a running process, None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a running process has used, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
