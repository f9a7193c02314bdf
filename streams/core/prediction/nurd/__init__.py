"""Nurd (SPEC 4): the latency model h, the propensity model g and their calibration, online and batch."""
