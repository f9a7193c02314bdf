"""The running detector's task table compacts in bulk (issue 18, session 18) into exactly the table that putting the
kept rows one by one builds: same rows in the same order, jobs and nodes numbered alike (the order of the detector's
float sums depends on it), the same lookups afterwards."""

from __future__ import annotations

import random

from streams.core.detection.task_table import TaskTable


def test_a_bulk_compaction_builds_the_table_the_kept_rows_would() -> None:
    rng = random.Random(7)
    table = TaskTable()
    for i in range(5000):
        job, node = f"j{rng.randrange(400)}", f"n{rng.randrange(60)}"
        start = i * 10 + rng.randrange(10)
        table.put(job, f"t{i}", node, start, -1)
        if rng.random() < 0.8:
            table.put(job, f"t{i}", node, start, rng.randrange(1, 500))
        elif rng.random() < 0.2:
            table.drop(job, f"t{i}")
    starts, durations = table.arrays()[2], table.arrays()[3]
    horizon, running_horizon = 30_000, 10_000
    keep = ((starts >= horizon) | ((durations == -1) & (starts >= running_horizon))) & (durations != -2)
    expected = TaskTable()
    for row in table.rows_where(keep):
        expected.put(*row)
    assert table.compact(horizon, running_horizon)
    assert [c.tolist() for c in table.arrays()] == [c.tolist() for c in expected.arrays()]
    assert table.rows() == expected.rows()
    assert (table.node_names, table.node_code) == (expected.node_names, expected.node_code)
    assert table._job_code == expected._job_code and table._index == expected._index
    table.put("j-new", "t-new", "n-new", 60_000, -1)  # and it goes on as the rebuilt one would
    expected.put("j-new", "t-new", "n-new", 60_000, -1)
    assert [c.tolist() for c in table.arrays()] == [c.tolist() for c in expected.arrays()]
    assert table.has("j-new", "t-new") and not table.has("j0", "t0")


def test_the_table_keeps_one_copy_of_each_job_id_and_task_id_however_many_events_carry_them() -> None:
    """Each decoded event brings its own strings; the table's index lives as long as the tasks (issue 18: most of the
    running detector's memory), so it keeps the first copy of a job id and one of each task id, before and after a
    compaction."""
    table = TaskTable()
    for job in range(3):
        for task in range(4):
            # "".join: a fresh string object per event, as a decoder gives
            table.put("".join(["job-", str(job)]), "".join(["t", str(task)]), "n1", 10 * task, -1)
    keys = table._keys
    assert len({id(job) for job, _ in keys}) == 3 and len({id(task) for _, task in keys}) == 4
    assert table.compact(horizon=20, running_horizon=20)  # keeps the tasks started at 20 and 30 of every job
    table.put("".join(["job-", "2"]), "".join(["t", "9"]), "n1", 40, -1)
    keys = table._keys
    assert len(keys) == 7 and len({id(job) for job, _ in keys}) == 3 and len({id(task) for _, task in keys}) == 3
