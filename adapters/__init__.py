"""Scheduler adapters (SPEC 5): act on the blacklist published to Kafka.

``follower`` is the pure bookkeeping (versions, gaps, the cap, idempotence); ``consumer`` the one kafka-python
loop around it; ``statefile`` what survives a restart; ``base`` the applier interface; ``file``, ``yarn``,
``k8s`` and ``webhook`` one small applier each. Detection and decision happen upstream (node scores, the
ranking policy); adapters only act, and each can be replaced without touching the others.
"""
