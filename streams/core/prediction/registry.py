"""The straggler predictors by name: ``PREDICTORS`` (what settings, the worker, ``laggard eval`` and
``laggard simulate`` accept) and the aliases the command line expands.

A factory takes a ``PredictionContext`` and returns a ``PredictionMethod``. Each method reads its own
hyperparameters from ``context.params`` (Nurd: ``nurd_alpha``, ``nurd_epsilon``) and ignores the rest;
``initial_fraction`` is shared. Implementations are imported when a method is built, so reading the names
(settings validation, ``--help``) stays cheap.

>>> PREDICTORS.names()[:3]
('nurd', 'nurd-nc', 'supervised')
>>> method = PREDICTORS.get("nurd")(PredictionContext(params={"nurd_alpha": 0.0}))
>>> method.name, method.uses_threshold
('nurd', True)
>>> expand_names(["spark", "hadoop"])
['spark-q0.75-m1.5', 'spark-q0.9-m3', 'hadoop']
>>> build_method("nope", PredictionContext())
Traceback (most recent call last):
...
ValueError: unknown predictor 'nope'; one of: nurd, nurd-nc, supervised, nurd-batch, spark-q0.75-m1.5, \
spark-q0.9-m3, hadoop, hst, supervised-node, hazard, node-slow, spark-node, select, elapsed-tau, hawkeye, \
hawkeye-adaptive
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from streams.core.prediction.base import JobPredictor, PredictionContext, PredictionMethod
from streams.core.prediction.perjob import PerJobMethod
from streams.core.prediction.threshold import Threshold
from streams.core.registry import Registry

PredictorFactory = Callable[[PredictionContext], PredictionMethod]
PREDICTORS: Registry[PredictorFactory] = Registry("predictor")
ALIASES: dict[str, tuple[str, ...]] = {"spark": ("spark-q0.75-m1.5", "spark-q0.9-m3")}


def build_method(name: str, context: PredictionContext) -> PredictionMethod:
    """The method registered as ``name``, built for ``context``; ValueError listing the names if unknown."""
    return PREDICTORS.get(name)(context)


def expand_names(names: Iterable[str]) -> list[str]:
    """Names with aliases expanded, each once, in order; unknown names are left for the caller to reject."""
    return list(dict.fromkeys(item for name in names for item in ALIASES.get(name, (name,))))


def _nurd_models(context: PredictionContext) -> dict[str, Any]:
    """Nurd's keyword arguments from ``context.params``: ``nurd_alpha``, ``nurd_epsilon``, h's ``h_window``
    and ``h_target_scaler`` (1/0), g's ``g_lr``."""
    from streams.core.prediction.nurd.nurd import default_propensity, default_regressor

    params = context.params
    return {
        "alpha": params.get("nurd_alpha", 0.5), "epsilon": params.get("nurd_epsilon", 0.05),
        "initial_fraction": context.initial_fraction,
        "regressor": default_regressor(int(params.get("h_window", 50)), bool(params.get("h_target_scaler", 1))),
        "propensity": default_propensity(params.get("g_lr", 0.01)),
    }  # fmt: skip


def _nurd(name: str, weighting: str) -> PredictorFactory:
    def factory(context: PredictionContext) -> PredictionMethod:
        from streams.core.prediction.nurd.nurd import NurdJob

        kwargs = _nurd_models(context)

        def build(threshold: Threshold) -> JobPredictor:
            return NurdJob(threshold, weighting=weighting, **kwargs)  # type: ignore[arg-type]

        return PerJobMethod(name, True, build)

    return factory


def _supervised_node(context: PredictionContext) -> PredictionMethod:
    from streams.core.prediction.nodes import NodeEvidence
    from streams.core.prediction.nurd.nodeaware import NodeAwareMethod, NodeAwareNurdJob

    kwargs = _nurd_models(context)

    def build(threshold: Threshold, evidence: NodeEvidence) -> JobPredictor:
        return NodeAwareNurdJob(evidence, threshold, weighting="none", **kwargs)

    return NodeAwareMethod("supervised-node", build, context.cluster)


def _hazard(context: PredictionContext) -> PredictionMethod:
    from streams.core.prediction.hazard import HazardMethod

    params = context.params
    # p = 0.3: chosen in every leave-one-out fold on the Google jobs and the synthetic seeds (laggard eval --heldout)
    return HazardMethod(p=params.get("hazard_p", 0.3), nodes=int(params.get("node_features", 1)),
                        initial_fraction=context.initial_fraction, cluster=context.cluster)  # fmt: skip


SELECT_MEMBERS = ("spark-q0.9-m3", "spark-q0.75-m1.5", "spark-node", "hazard")  # select_first picks the first


def _select(context: PredictionContext) -> PredictionMethod:
    from streams.core.prediction.selector import SelectorMethod

    # Defaults chosen on held-out data only (scripts/prediction_default.py: the configuration whose worst lead
    # over Spark q0.75, less one standard error, across tuning seeds 101-105, their blind form and the Google
    # jobs is largest): Spark's q0.75/m1.5 rule first, follow another member once its mean per-job lead over
    # >= 3 ended jobs is positive (z 0), select's hazard node-aware with p 0.2.
    params = context.params
    first = SELECT_MEMBERS[int(params.get("select_first", 1))]
    names = (first, *(name for name in SELECT_MEMBERS if name != first))
    hazard = {"hazard_p": params.get("select_hazard_p", 0.2), "node_features": 1}
    inner = PredictionContext(context.initial_fraction, {**params, **hazard}, context.cluster, context.seed)
    members = [build_method(name, inner) for name in names]
    share_node_evidence(members)
    return SelectorMethod(members, margin=params.get("select_margin", 0.0), z=params.get("select_z", 0.0),
                          min_jobs=int(params.get("select_min_jobs", 3)))  # fmt: skip


def share_node_evidence(members: list[PredictionMethod]) -> None:
    """``select``'s node-slow (inside spark-node) reads hazard's node evidence instead of learning its own: both
    learned the same finishes into alike evidences, and every checkpoint pickled both. Hazard learns it in
    ``step``'s method learn, where node-slow learned its own, and neither reads it in between: every flag stays the
    same. A node-slow whose evidence is configured otherwise keeps learning its own (right either way)."""
    from streams.core.prediction.hazard import HazardMethod
    from streams.core.prediction.nodeslow import NodeSlowMethod

    owner = next((member for member in members if isinstance(member, HazardMethod)), None)
    if owner is None:
        return
    for member in members:
        for inner in getattr(member, "members", (member,)):
            if isinstance(inner, NodeSlowMethod) and inner.can_borrow(owner.evidence):
                inner.borrow(owner.evidence)


def _node_slow(context: PredictionContext) -> PredictionMethod:
    from streams.core.prediction.nodeslow import NodeSlowMethod

    # slowness 0.3 (tasks 1.35x their job's median): best of 0.1-0.5 on tuning seeds 101-105 of the synthetic
    # cluster with its progress and cpu telemetry withheld (scripts/prediction_default.py)
    return NodeSlowMethod(context.params.get("node_slowness", 0.3), context.initial_fraction, context.cluster)


def _spark_node(context: PredictionContext) -> PredictionMethod:
    from streams.core.prediction.anyof import AnyOfMethod

    return AnyOfMethod([build_method("spark-q0.75-m1.5", context), build_method("node-slow", context)], "spark-node")


def _batch(context: PredictionContext) -> PredictionMethod:
    from streams.core.prediction.nurd.batch import NurdBatchJob

    alpha, epsilon = context.params.get("nurd_alpha", 0.5), context.params.get("nurd_epsilon", 0.05)

    def build(threshold: Threshold) -> JobPredictor:
        # "on-change" gives the predictions of refitting at every checkpoint (deterministic fits) in half the time
        return NurdBatchJob(threshold, alpha=alpha, epsilon=epsilon, initial_fraction=context.initial_fraction,
                            refit="on-change")  # fmt: skip

    return PerJobMethod("nurd-batch", True, build)


def _spark(quantile: float, multiplier: float) -> PredictorFactory:
    def factory(context: PredictionContext) -> PredictionMethod:
        from streams.core.prediction.baselines import SpeculationJob

        name = f"spark-q{quantile:g}-m{multiplier:g}"
        return PerJobMethod(name, False, lambda threshold: SpeculationJob(quantile, multiplier))

    return factory


def _hadoop(context: PredictionContext) -> PredictionMethod:
    from streams.core.prediction.baselines import HadoopJob

    return PerJobMethod("hadoop", False, lambda threshold: HadoopJob(0.05, 1.0))


def _hst(context: PredictionContext) -> PredictionMethod:
    from streams.core.prediction.baselines import OutlierJob

    return PerJobMethod("hst", False, lambda threshold: OutlierJob(initial_fraction=context.initial_fraction))


def _elapsed_tau(context: PredictionContext) -> PredictionMethod:
    from streams.core.prediction.baselines import ElapsedTauJob

    return PerJobMethod("elapsed-tau", True, lambda threshold: ElapsedTauJob(threshold, context.initial_fraction))


PREDICTORS.register("nurd", _nurd("nurd", "calibrated"), "Nurd: h(x) reweighted by calibrated propensity g(x)")
PREDICTORS.register("nurd-nc", _nurd("nurd-nc", "propensity"), "Nurd without calibration: h(x) / g(x)")
PREDICTORS.register("supervised", _nurd("supervised", "none"), "Nurd's latency model h alone (no reweighting)")
PREDICTORS.register("nurd-batch", _batch, "Nurd as in the paper: scikit-learn models refit at every checkpoint")
PREDICTORS.register("spark-q0.75-m1.5", _spark(0.75, 1.5), "Spark speculation: after 75 % finished, 1.5x median")
PREDICTORS.register("spark-q0.9-m3", _spark(0.9, 3.0), "Spark speculation: after 90 % finished, 3x median")
PREDICTORS.register("hadoop", _hadoop, "Hadoop: after 5 % finished, elapsed > mean + 1 std of durations")
PREDICTORS.register("hst", _hst, "HalfSpaceTrees on checkpoint features: anomaly score in the job's top tenth")
PREDICTORS.register("supervised-node", _supervised_node, "Nurd's h with the task's node evidence among its features")
PREDICTORS.register("hazard", _hazard, "node-aware classifier of 'relaunch now pays', learned across jobs")
PREDICTORS.register("node-slow", _node_slow, "flag a task on a node whose finished tasks ran slow (node evidence)")
PREDICTORS.register("spark-node", _spark_node, "Spark q0.75/m1.5, or earlier when the task's node ran slow (node-slow)")
PREDICTORS.register(
    "select", _select, "Spark's rules, spark-node and hazard in shadow: follow the one leading on ended jobs"
)
# A yardstick, not a predictor: what knowing tau and elapsed time alone is worth under the same protocol.
PREDICTORS.register("elapsed-tau", _elapsed_tau, "yardstick: flag once elapsed time passes tau")


def _hawkeye(context: PredictionContext) -> PredictionMethod:
    from streams.core.prediction.hawkeye.factories import make_hawkeye

    return make_hawkeye(context)


def _hawkeye_adaptive(context: PredictionContext) -> PredictionMethod:
    from streams.core.prediction.hawkeye.factories import make_hawkeye_adaptive

    return make_hawkeye_adaptive(context)


PREDICTORS.register("hawkeye", _hawkeye, "Hawkeye q0.75/m1.5: per-host straggling ratio and Pareto PoF (speculate)")
PREDICTORS.register(
    "hawkeye-adaptive", _hawkeye_adaptive, "Hawkeye, (q, m) per job type and size by River LinUCB on ended jobs' JCT"
)
