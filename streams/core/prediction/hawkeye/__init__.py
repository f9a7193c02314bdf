"""Hawkeye (Du and Zhang, IEEE Access 2020): per-host step times, straggling ratio, per-host Pareto
probability of finishing before the deadline, and an adaptive (quantile, multiplier) per job type and size."""
