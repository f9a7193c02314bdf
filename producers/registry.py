"""The one entry point to every trace: ``open_trace("FORMAT:PATH")`` or ``open_trace("synthetic:k=v,...")``.

A ``Trace`` is iterable over events in event-time order (streaming; each iteration reads the trace afresh
and resets the counters) and keeps count while it is iterated: ``events``, ``tasks`` (task attempts started),
``jobs`` (distinct job ids seen), ``finished`` (task finishes per status), ``skipped`` (events the trace holds
but that cannot be placed, e.g. they began before the trace), ``bad_rows`` with the first few as
``bad_examples`` (file, line, reason). A synthetic trace also has ``ground_truth``.

A bad spec raises ``ValueError``, a missing path ``FileNotFoundError``, both with a message fit for one line.
A format of the shared public traces may name no path (``google2011-events`` alone): it is then read from its
place under ``traces_dir`` (the caller's setting; ``SHARED_PATHS``).

>>> trace = open_trace("synthetic:nodes=6,slow=1,jobs=2,tasks=3,seed=4")
>>> [type(e).__name__ for e in trace][:2]
['JobStart', 'TaskStart']
>>> trace.events, trace.tasks, trace.jobs, trace.bad_rows
(16, 6, 2, 0)
>>> sorted(FORMATS) == sorted(_READERS)
True
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from producers.readers.common import ReadStats
from streams.core.events import Event, TaskFinish, TaskStart

FORMATS: dict[str, str] = {
    "google2011-events": "DIR with task_events/ and job_events/ part files of Google clusterdata-2011-2 (without "
                         "job_events/, no job ends: jobs are final once idle)",
    "google2011-usage": "DIR of per-task usage series (Nurd's Google 2011 extract) with causal checkpoints",
    "alibaba2018": "FILE: batch_instance.csv of Alibaba cluster-trace-v2018 (14 columns; instance = task)",
    "alibaba2017": "FILE: batch_instance.csv of Alibaba cluster-trace-v2017 (12 columns; instance = task)",
    "alibaba2017-tasks": "FILE: batch_task.csv of Alibaba v2017 (job-level: JobStart/JobFinish per task)",
    "csv": "FILE with header job_id,task_id,node_id,start_us,end_us,status[,attempt,task_type,speculative]",
    "synthetic": "key=value,... generated cluster with known slow nodes; keys nodes, slow, jobs, tasks (N or LO-HI), "
    "seed, slowdown, onset (s), shape, scale (s), contention (cpu|memory), interarrival (s), checkpoints, fail, load, "
    "hetero (slowest tier's stretch, 1 = equal nodes), tiers",
    "scenario": "NAME[,seed=N,nodes=N,hours=H,rate=R] a fault scenario of `laggard scenarios --list` (open loop)",
    "drifting": "key=value,... generated cluster over many days whose weak nodes drift (ML-NA); keys nodes, days, "
    "day (s), load, tasks, seed, persistent, episodic, intermittent, slowdown (LO-HI), episode (days), burst (h)",
}

# Where each format's share of the public traces lives under the traces folder (setting ``traces_dir``,
# LAGGARD_TRACES_DIR, default ../shared/traces), so that ``--trace google2011-events`` alone reads it.
SHARED_PATHS: dict[str, str] = {
    "google2011-events": "google2011-task-events",
    "google2011-usage": "google2011-nurd-timeseries/timeseriesspecsixtotal",
    "alibaba2017-tasks": "alibaba2017-batch-task/batch_task.csv",
}

# format -> (module, function); the function takes (path, ReadStats) and returns an event iterator.
_READERS: dict[str, tuple[str, str]] = {
    "google2011-events": ("producers.readers.google2011", "read_google_events"),
    "google2011-usage": ("producers.readers.google_usage", "read_usage"),
    "alibaba2018": ("producers.readers.alibaba", "read_alibaba2018"),
    "alibaba2017": ("producers.readers.alibaba", "read_alibaba2017"),
    "alibaba2017-tasks": ("producers.readers.alibaba", "read_alibaba2017_tasks"),
    "csv": ("producers.readers.csv_tasks", "read_csv_tasks"),
    "synthetic": ("producers.synthetic", ""),
    "scenario": ("producers.scenario_spec", ""),
    "drifting": ("producers.drifting", ""),
}


def formats_help() -> str:
    """One line per format, for ``--help`` texts."""
    return "\n".join(f"{name}: {text}" for name, text in FORMATS.items())


def open_trace(spec: str, traces_dir: Path | None = None) -> Trace:
    """The trace named by ``spec``; raises ValueError (bad spec) or FileNotFoundError (missing path). A spec
    without a path reads the format's share of the public traces under ``traces_dir`` (``SHARED_PATHS``)."""
    name, _, rest = spec.partition(":")
    name = name.strip()
    if name not in _READERS:
        known = ", ".join(FORMATS)
        hint = f" (a CSV file? write csv:{spec})" if spec.lower().endswith(".csv") and ":" not in spec else ""
        raise ValueError(f"unknown trace format {name!r} in {spec!r}{hint}: expected FORMAT:PATH, "
                         f"FORMAT one of {known}")
    if name == "synthetic":
        from producers.synthetic import SyntheticCluster, parse_config

        cluster = SyntheticCluster(parse_config(rest))
        return Trace(spec, name, lambda stats: iter(cluster), ground_truth=cluster.ground_truth)
    if name == "scenario":
        from producers.scenario_spec import open_scenario

        sim = open_scenario(rest)
        return Trace(spec, name, lambda stats: iter(sim), ground_truth=sim.ground_truth)
    if name == "drifting":
        from producers.drifting import DriftingCluster
        from producers.drifting import parse_config as parse_drifting

        drifting = DriftingCluster(parse_drifting(rest))
        return Trace(spec, name, lambda stats: iter(drifting), ground_truth=drifting.ground_truth)
    path = _path_of(spec, name, rest, traces_dir)
    reader = _load_reader(name)
    reader(path, ReadStats())  # readers check their input eagerly (header, layout) and read lazily
    job_ends = None
    if name == "google2011-events":
        from producers.readers.google2011 import has_job_events

        job_ends = has_job_events(path)
    return Trace(spec, name, lambda stats: reader(path, stats), job_ends=job_ends)


def _path_of(spec: str, name: str, rest: str, traces_dir: Path | None) -> Path:
    """The path a spec names, or the shared traces' place for its format when it names none."""
    if rest.strip():
        path = Path(rest.strip()).expanduser()
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return path
    if name not in SHARED_PATHS or traces_dir is None:
        raise ValueError(f"trace {spec!r} names no path: expected {name}:PATH")
    path = traces_dir.expanduser() / SHARED_PATHS[name]
    if not path.exists():
        raise FileNotFoundError(2, f"{name} names no path and the shared traces are not in {traces_dir} "
                                f"(set LAGGARD_TRACES_DIR, or give {name}:PATH)", str(path))
    return path


def _load_reader(name: str) -> Callable[[Path, ReadStats], Iterator[Event]]:
    module_name, function = _READERS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise ValueError(f"trace format {name!r} is not available in this installation ({module_name})") from None
    read = getattr(module, function)
    if name == "google2011-usage":
        return _usage_reader(read)
    return read  # type: ignore[no-any-return]


def _usage_reader(read_usage: Callable[[Path], Any]) -> Callable[[Path, ReadStats], Iterator[Event]]:
    """Adapt ``read_usage(path)``, which keeps its own ``bad_rows`` list, to the ReadStats protocol."""

    def read(path: Path, stats: ReadStats) -> Iterator[Event]:
        events = read_usage(path)

        def generate() -> Iterator[Event]:
            yield from events
            for bad in getattr(events, "bad_rows", ()):
                stats.bad(bad.file, bad.line, bad.reason)

        return generate()

    return read


# Formats whose events never end a job (no JobFinish): their jobs are final only once idle.
WITHOUT_JOB_ENDS = frozenset({"csv", "alibaba2018", "alibaba2017"})


class Trace:
    """Events of one trace in event-time order, with the counters of the latest iteration."""

    def __init__(
        self,
        spec: str,
        format: str,
        open_events: Callable[[ReadStats], Iterator[Event]],
        ground_truth: dict[str, Any] | None = None,
        job_ends: bool | None = None,
    ) -> None:
        self.spec = spec
        self._job_ends = job_ends  # None: as the format says (``WITHOUT_JOB_ENDS``)
        self.format = format
        self.ground_truth = ground_truth
        self._open = open_events
        self._reset()

    @property
    def has_job_ends(self) -> bool:
        """Whether the trace publishes JobFinish (its format does, unless this trace lacks the files that carry
        them); without, a job is final only after the job idle timeout."""
        return self.format not in WITHOUT_JOB_ENDS if self._job_ends is None else self._job_ends

    @property
    def no_job_ends(self) -> str:
        """Why the trace has no job ends, in words for a note ('' when it has them): its format's, or this copy's."""
        if self.has_job_ends:
            return ""
        if self.format in WITHOUT_JOB_ENDS:
            return f"{self.format} traces carry no job ends"
        return f"{self.spec} has no job events (no job_events/ rows), so no job ends"

    def _reset(self) -> None:
        self.stats = ReadStats()
        self.events = 0
        self.tasks = 0
        self.finished: Counter[str] = Counter()
        self._jobs: set[str] = set()
        self._first_of_job = False  # whether the last event read was its job's first

    @property
    def jobs(self) -> int:
        return len(self._jobs)

    @property
    def skipped(self) -> int:
        return self.stats.skipped

    @property
    def bad_rows(self) -> int:
        return self.stats.bad_rows

    @property
    def bad_examples(self) -> list[dict[str, Any]]:
        return [{"file": b.file, "line": b.line, "reason": b.reason} for b in self.stats.bad_examples]

    def __iter__(self) -> Iterator[Event]:
        self._reset()
        jobs = self._jobs
        for event in self._open(self.stats):
            self.events += 1
            if isinstance(event, TaskStart):
                self.tasks += 1
            elif isinstance(event, TaskFinish):
                self.finished[event.status.value] += 1
            self._first_of_job = event.job_id not in jobs
            jobs.add(event.job_id)
            yield event

    def uncount(self, event: Event) -> None:
        """Take back the counts of ``event``, the last one read, which its reader did not use (a replay
        interrupted between reading an event and sending it): the summary counts what was sent."""
        self.events -= 1
        if isinstance(event, TaskStart):
            self.tasks -= 1
        elif isinstance(event, TaskFinish):
            self.finished[event.status.value] -= 1
            if not self.finished[event.status.value]:
                del self.finished[event.status.value]
        if self._first_of_job:
            self._jobs.discard(event.job_id)

    def summary(self) -> dict[str, Any]:
        """The counters as one JSON-ready document."""
        document: dict[str, Any] = {
            "trace": self.spec,
            "events": self.events,
            "tasks": self.tasks,
            "jobs": self.jobs,
            "finished": dict(sorted(self.finished.items())),
            "skipped": self.skipped,
            "skip_reasons": dict(self.stats.skip_reasons),
            "bad_rows": self.bad_rows,
            "bad_examples": self.bad_examples,
        }
        if self.ground_truth is not None:
            document["ground_truth"] = self.ground_truth
        return document
