"""Profile where the direct statistics worker's CPU goes on Google parts 0-9 (docs/scale.md, session 11).

Runs ``python -m laggard.bench.google_kafka direct --role statistics --expected FILE`` (its own broker, the replay,
one worker), finds the bench's ``laggard worker`` child as soon as it starts and attaches py-spy to it (sampling
without pausing it, ``--nonblocking``, so the profile does not slow the worker it measures); py-spy writes its
collapsed stacks when the bench stops the worker after the final snapshot. With ``--in-process`` it then profiles
the in-process run of the same pipeline (the bench's ``--in-process-only`` into a fresh file) the same way, one
process after the other (the machine has 2 cores). ``scripts/cpu_parts.py`` splits the stacks into parts.

    python scripts/profile_google_worker.py OUT_DIR [--rate HZ] [--expected FILE] [--in-process]

Needs py-spy (``pip install py-spy``) and the traces under LAGGARD_TRACES_DIR; run from the tree's root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def thread_cpu(pid: int) -> dict[str, float]:
    """user + system CPU seconds of each thread of ``pid`` ("tid name"), from /proc (what py-spy's samples do not
    give on a loaded machine: they count a thread waiting for a core as running)."""
    found = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").glob("*") if pid else ():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        fields = rest.split()
        found[f"{task.name} {name}"] = (int(fields[11]) + int(fields[12])) / tick
    return found


def main(argv: list[str]) -> None:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    rate = argv[argv.index("--rate") + 1] if "--rate" in argv else "100"
    expected = argv[argv.index("--expected") + 1] if "--expected" in argv else str(out / "expected.json")
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    record = [spy, "record", "--rate", rate, "--format", "raw", "--nonblocking", "--threads"]
    with open(out / "bench.json", "wb") as document:  # the child keeps its own descriptor
        bench = subprocess.Popen([sys.executable, "-m", "laggard.bench.google_kafka", "direct", "--role",
                                  "statistics", "--expected", expected], stdout=document)
    profiler, worker = None, 0
    while bench.poll() is None and profiler is None:
        workers = [p for p in children(bench.pid) if " worker " in cmdline(p) + " "]
        if workers:
            with open(out / "py-spy-worker.log", "wb") as log:
                profiler = subprocess.Popen([*record, "-o", str(out / "worker.txt"), "-p", str(workers[0])],
                                            stdout=log, stderr=subprocess.STDOUT)
            print(f"py-spy attached to worker {workers[0]}", file=sys.stderr)
            worker = workers[0]
        time.sleep(0.05)
    threads: dict[str, float] = {}  # CPU seconds of each of the worker's threads, as last seen
    while bench.poll() is None:
        threads.update(thread_cpu(worker))
        time.sleep(1.0)
    (out / "threads.json").write_text(repr(threads))
    print("worker threads' CPU s (last seen, up to 1 s before it stopped):", file=sys.stderr)
    for name, seconds in sorted(threads.items(), key=lambda kv: -kv[1]):
        print(f"  {seconds:8.1f}  {name}", file=sys.stderr)
    if profiler is not None:
        profiler.wait(120)
    print((out / "bench.json").read_text())
    if "--in-process" in argv:
        fresh = out / "in-process.json"
        fresh.unlink(missing_ok=True)
        run = subprocess.Popen([sys.executable, "-m", "laggard.bench.google_kafka", "--in-process-only",
                                "--expected", str(fresh)])
        with open(out / "py-spy-in-process.log", "wb") as log:
            profiler = subprocess.Popen([*record, "-o", str(out / "in-process.txt"), "-p", str(run.pid)],
                                        stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(run.pid, 0)  # this child's own rusage: not py-spy's
        run.returncode = os.waitstatus_to_exitcode(status)
        profiler.wait(120)
        print(f"in-process: exit {run.returncode}, CPU {usage.ru_utime + usage.ru_stime:.1f} s "
              f"(user {usage.ru_utime:.1f}), {fresh.read_bytes()[-120:]!r}", file=sys.stderr)

if __name__ == "__main__":
    main(sys.argv[1:])
