"""hawkeye-adaptive: River's contextual bandit learns per context from simulated JCT, never from the job scored."""

from __future__ import annotations

from producers.registry import open_trace
from streams.core.events import TaskCheckpoint
from streams.core.prediction.base import step
from streams.core.prediction.hawkeye.adaptive import ARMS, AdaptiveHawkeyeMethod, ArmChooser, RewardModel, context
from streams.core.prediction.hawkeye.heldout import SPARK, JobArms, best_fixed, leave_one_out, replay, split
from streams.core.prediction.hawkeye.ledger import JobLedger


def test_chooser_learns_a_different_pair_per_context() -> None:
    chooser = ArmChooser(seed=0)
    small, large = {"bias": 1.0, "size=<50": 1.0}, {"bias": 1.0, "size=1000+": 1.0}
    for _ in range(10):
        chooser.learn(small, {r.name: 0.3 if r.name == "q0.5-m1.2" else 0.1 for r in ARMS})
        chooser.learn(large, {r.name: 0.3 if r.name == "q0.9-m3" else 0.1 for r in ARMS})
    assert chooser.choose(small).name == "q0.5-m1.2"
    assert chooser.choose(large).name == "q0.9-m3"


def test_context_is_type_and_size_bucket() -> None:
    ledger = JobLedger(declared=120, task_type="map")
    assert context(ledger) == {"bias": 1.0, "size=<200": 1.0, "type=map": 1.0}
    assert context(JobLedger(declared=5000)) == {"bias": 1.0, "size=1000+": 1.0}


def test_online_method_uses_only_ended_jobs_and_learns_across_them() -> None:
    trace = open_trace("synthetic:nodes=20,slow=2,jobs=30,tasks=20-40,hetero=2,checkpoints=4,seed=5")
    method = AdaptiveHawkeyeMethod(rewards=RewardModel(repeats=1))
    jobs = {}
    chosen = {}
    for event in trace:
        job = jobs.setdefault(event.job_id, method.job(event.job_id, None))
        step(method, job, event)
        if isinstance(event, TaskCheckpoint) and event.job_id not in chosen:
            # the pair is chosen while the job runs: its own rewards come only after it ended
            assert event.job_id in method.jobs
            chosen[event.job_id] = (job.record.rule.name, method.chooser.jobs)
    assert chosen["job-00000"] == ("q0.75-m1.5", 0)  # nothing ended yet: Spark's default
    assert method.chooser.jobs == 30  # every ended job rewarded the arms once
    assert len({rule for rule, _ in chosen.values()}) > 1  # it moved off the default as jobs ended


def _jobs() -> list[JobArms]:
    trace = open_trace("synthetic:nodes=20,slow=2,jobs=24,tasks=20-40,hetero=2,checkpoints=4,seed=2")
    return replay(trace, RewardModel(repeats=1))


def test_leave_one_out_never_trains_on_the_scored_job() -> None:
    jobs = _jobs()
    rows = leave_one_out(jobs)
    assert [r["job_id"] for r in rows] == [j.job_id for j in jobs]
    for i, row in enumerate(rows):
        others = jobs[:i] + jobs[i + 1 :]
        assert row["spark_arm"] == best_fixed(others, SPARK)
    # poisoning the scored job's own rewards cannot change the pick made for it
    poisoned = list(jobs)
    target = poisoned[0]
    pick = rows[0]["adaptive_arm"]
    poisoned[0] = JobArms(target.job_id, target.n_tasks, target.features,
                          {k: type(v)(-1.0 if k == pick else v.cut, v.wasted_s, v.relaunches, v.success)
                           for k, v in target.outcomes.items()})  # fmt: skip
    assert leave_one_out(poisoned)[0]["adaptive_arm"] == pick


def test_split_reports_wasted_machine_time_for_every_reference() -> None:
    jobs = _jobs()
    rows = split(jobs[:12], jobs[12:])
    for row in rows:
        for label in ("hawkeye-adaptive", "spark-best-on-train", "hawkeye", "spark-q0.75-m1.5", "spark-q0.9-m3"):
            assert row[label]["wasted_s"] >= 0


def test_a_restored_method_continues_with_the_same_flags() -> None:
    import pickle

    events = list(open_trace("synthetic:nodes=12,slow=1,jobs=20,tasks=10-20,hetero=2,checkpoints=3,seed=4"))
    half = len(events) // 2

    def run(restart: bool) -> list[tuple[str, str]]:
        method = AdaptiveHawkeyeMethod(rewards=RewardModel(repeats=1))
        jobs: dict[str, object] = {}
        flags = []
        for i, event in enumerate(events):
            if restart and i == half:  # a worker restart: state through a pickle, job predictors rebuilt
                state = pickle.loads(pickle.dumps(method.snapshot()))
                method = AdaptiveHawkeyeMethod(rewards=RewardModel(repeats=1))
                method.restore(state)
                jobs = {}
            job = jobs.setdefault(event.job_id, method.job(event.job_id, None))
            flag = step(method, job, event)  # type: ignore[arg-type]
            if flag is not None:
                flags.append((flag.job_id, flag.task_id))
        return flags

    assert run(restart=True) == run(restart=False)
