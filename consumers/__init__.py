"""Adapters and services around the :mod:`streamtopics` library (map: docs/design.md, "Module layout").

Every stream runs through one driver, :class:`consumers.stream.StreamDriver` (learn, refresh,
snapshot directory, checkpoint in one commit order): the archive replay
(:mod:`consumers.replay`, reading :mod:`consumers.sources`) and the Kafka consumer service
(:mod:`consumers.kafka_consumer`, scaled out by :mod:`consumers.group`). Around them: the
monitoring service (:mod:`consumers.service`), the metrics (:mod:`consumers.metrics`) and the
``streamtopics`` command line (:mod:`consumers.cli`). ``consumers`` imports ``streamtopics``,
never the reverse.
"""
