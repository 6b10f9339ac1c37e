"""Replay: committed archive files back into Kafka, exactly once (``kcql-sink replay``).

Modules: :mod:`~sink.replay.archive` (which files, their records), :mod:`~sink.replay.serialise`
(converters on the way out), :mod:`~sink.replay.position` (what has landed),
:mod:`~sink.replay.producer` (transactions and restart reconciliation), :mod:`~sink.replay.runner`
(the loop, ``--follow``, ``--until``, progress). The statement form is :mod:`kcql.replay`.
"""
