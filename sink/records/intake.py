"""Consumed messages -> batches: where it is decided, once, which cheap forms a batch carries.

The converter pair decides what a batch can skip. Values must be schemaless JSON (the joined
text, :mod:`sink.records.json_text`) or Confluent Avro (Arrow columns,
:mod:`sink.records.avro_values`); keys must go through the ByteArray or String converter,
which never fail (the StringConverter replaces bytes that do not decode, as Kafka's does). With
any other converter a key or value could fail in a way no bulk check sees, so such batches only
have the per-record view. A run of messages is cut where its values stop fitting a form (a
tombstone, a foreign payload, another schema id), so an odd record costs its neighbours nothing.

With transforms (``transforms=``), every message is converted and transformed when its batch is
built, since a transform may drop a record or fan it out into several: the batches then hold the
transformed records (each knowing the message it came from, for the dead-letter queue) and the
per-record view only. A message that fails to convert or transform becomes a placeholder whose
error the per-record view raises at its place, so the error policy sees it in order. A topic a
transform renames starts a new batch.

``behavior.on.null.values`` applies here too: ``ignore`` drops tombstones before batches are
built (and a value that converts to null is skipped by the runtime through
:class:`NullValueSkipped`), ``fail`` makes each tombstone a record error of the per-record view.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Literal, Protocol

from confluent_kafka import Message

from kcql.errors import RecordError
from sink.records.avro_values import joined_runs
from sink.records.batch import Convert, RecordBatch, Source
from sink.records.converters import (
    AvroConverter,
    ByteArrayConverter,
    JsonConverter,
    RecordConverter,
    StringConverter,
)
from sink.records.json_text import json_runs
from sink.records.record import SinkRecord
from sink.records.scan import values as scan_values

__all__ = ["BatchBuilder", "NullValueSkipped", "Transforms"]


class Transforms(Protocol):
    """The connector's transforms as the builder asks for them (``sink.transforms.TransformChain``):
    the steps that act on a topic, and what a run's records become (failures by offset)."""

    def for_topic(self, topic: str) -> Transforms: ...
    def __len__(self) -> int: ...
    @property
    def drops_all(self) -> bool: ...
    def apply_batch(self, records: list[SinkRecord]) -> tuple[list[SinkRecord], dict[int, RecordError]]: ...


class NullValueSkipped(RecordError):
    """A value that converted to null under ``behavior.on.null.values=ignore``: skipped, not an error."""


class BatchBuilder:
    """Builds the batches of one connector's consumed runs (one topic partition each).

    Args:
        converter: the connector's key and value converters.
        null_values: ``behavior.on.null.values`` (``write``, ``ignore`` or ``fail``).
        check_json: check joined JSON text for validity before a format writes it through
            (``connect.json.validate``; off only by explicit choice).
        executor: the helper thread formats may compute ahead on (see ``RecordBatch.ahead``).
        cheap_forms: ``False`` gives every batch the per-record view only: the reference the
            cheap forms are compared with (tests, and ruling them out when debugging).
        transforms: the connector's transforms (``None``: none). Per topic, only the steps that
            act on it run (see ``TransformChain.for_topic``): a topic they leave alone keeps its
            cheap forms, one a Filter drops whole is not converted at all.
    """

    def __init__(
        self,
        converter: RecordConverter,
        *,
        null_values: Literal["write", "ignore", "fail"] = "write",
        check_json: bool = True,
        executor: Executor | None = None,
        cheap_forms: bool = True,
        transforms: Transforms | None = None,
    ) -> None:
        self.converter = converter
        self.transforms = transforms if transforms is not None and len(transforms) else None
        self._by_topic: dict[str, Transforms | None] = {}
        self.null_values = null_values
        self.check_json = check_json
        self.executor = executor
        key, value = converter.key, converter.value
        # a ByteArray or String key never fails to convert (see StringConverter), so the values
        # alone decide whether a cheap form can be used
        cheap = cheap_forms and type(key) in (ByteArrayConverter, StringConverter)
        self._json = cheap and type(value) is JsonConverter and not value.schemas_enable
        self._avro: AvroConverter | None = value if cheap and type(value) is AvroConverter else None
        self._convert: Convert = converter.convert if null_values == "write" else self._convert_null

    def warm_up(self, topics: Sequence[str]) -> threading.Thread | None:
        """Prepare the Avro converters' schemas of ``topics`` (subjects ``<topic>-value`` and
        ``<topic>-key``) on a thread of their own while the consumer joins its group, so the
        first batch does not wait for the Schema Registry (:meth:`AvroConverter.warm_up`).
        Returns the thread, or ``None`` when no converter reads Avro."""
        jobs = [
            (converter, [f"{topic}-{part}" for topic in topics])
            for converter, part in ((self.converter.value, "value"), (self.converter.key, "key"))
            if isinstance(converter, AvroConverter)
        ]
        if not jobs or not topics:
            return None

        def warm() -> None:
            for converter, subjects in jobs:
                converter.warm_up(subjects)

        thread = threading.Thread(target=warm, name="kcql-sink-registry-warm-up", daemon=True)
        thread.start()
        return thread

    def _convert_null(self, msg: Message) -> SinkRecord:
        record = self.converter.convert(msg)
        if record.value is None:  # a tombstone, or a value that converts to null (JSON null text)
            if self.null_values == "ignore":
                raise NullValueSkipped(
                    f"null value at {record.where} skipped (behavior.on.null.values=ignore)",
                    offset=record.offset,
                )
            raise RecordError(
                f"null value (tombstone) at {record.where} and behavior.on.null.values=fail",
                offset=record.offset,
                stage="TASK_PUT",
            )
        return record

    def build(self, topic: str, partition: int, messages: Sequence[Message]) -> list[RecordBatch]:
        """The batches of ``messages`` (consecutive, error-free messages of one partition), in order.

        Tombstones dropped under ``ignore`` leave no batch behind: the caller's position for the
        partition still moves past them once the batches are written.
        """
        values = scan_values(messages)
        if self.null_values == "ignore" and None in values:
            kept = [i for i, v in enumerate(values) if v is not None]
            messages = [messages[i] for i in kept]
            values = [values[i] for i in kept]
        if not messages:
            return []
        if self.transforms is not None:
            chain = self._by_topic.get(topic, self.transforms)
            if chain is self.transforms:
                reduced = self.transforms.for_topic(topic)
                chain = self._by_topic[topic] = reduced if len(reduced) else None
            if chain is not None:
                if chain.drops_all:
                    return []
                return self._transformed(topic, partition, messages, chain)
        if self._json:
            runs = json_runs(values)
            if len(runs) == 1 and runs[0][2] is not None:  # the common case: keep the values
                return [self._batch(topic, partition, messages, json=runs[0][2], values=values)]
            return [
                self._batch(topic, partition, messages[start:stop], json=text)
                for start, stop, text in runs
            ]
        avro = self._avro
        if avro is not None:
            out = []
            cuts, joined = joined_runs(values)  # joined: the values of a single run, for its bulk steps
            for start, stop, schema_id in cuts:
                columns = None if schema_id is None else (lambda sid=schema_id: avro.columns(sid))
                out.append(self._batch(topic, partition, messages[start:stop], avro=columns, joined=joined))
            return out
        return [self._batch(topic, partition, messages)]

    def _transformed(
        self, topic: str, partition: int, messages: Sequence[Message], chain: Transforms
    ) -> list[RecordBatch]:
        """Every message converted and transformed now; cut where the records' topic changes."""
        convert = self._convert
        converted: list[SinkRecord] = []
        failures: dict[int, RecordError] = {}
        for msg in messages:
            try:
                converted.append(convert(msg))
            except RecordError as exc:
                failures[msg.offset() or 0] = exc
        made, transform_failures = chain.apply_batch(converted) if converted else ([], {})
        failures.update(transform_failures)
        groups: dict[int, list[SinkRecord]] = {}
        for record in made:
            groups.setdefault(record.offset, []).append(record)
        origins: list[Message] = []
        records: list[SinkRecord | None] = []
        for msg in messages:
            offset = msg.offset() or 0
            if offset in failures:
                origins.append(msg)
                records.append(None)  # the placeholder: reading it raises its error
                continue
            out = groups.get(offset, ())
            origins += [msg] * len(out)
            records += out
        if not records:
            return []

        def failed(msg: Message) -> SinkRecord:
            raise failures[msg.offset() or 0]

        batches = []
        start = 0
        for i in range(1, len(records) + 1):
            if i < len(records) and _topic_of(records[i], topic) == _topic_of(records[start], topic):
                continue
            src = Source(origins[start:i], records[start:i], failed, executor=self.executor, transformed=True)
            batches.append(RecordBatch(_topic_of(records[start], topic), partition, src, source_topic=topic))
            start = i
        return batches

    def _batch(self, topic: str, partition: int, messages: Sequence[Message], **forms: object) -> RecordBatch:
        src = Source(
            messages, [None] * len(messages), self._convert,
            check_json=self.check_json, executor=self.executor,
            **forms,  # type: ignore[arg-type]
        )
        return RecordBatch(topic, partition, src)


def _topic_of(record: SinkRecord | None, consumed: str) -> str:
    """The topic a transformed record is written under (a failed message keeps the consumed one)."""
    return consumed if record is None else record.topic
