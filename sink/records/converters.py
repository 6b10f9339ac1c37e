"""Kafka Connect converters: raw Kafka key/value bytes → the values and Avro schemas of a SinkRecord.

Users arrive with the Connect JSON they already run, so the converter class names and keys are
Connect's own (``key.converter``, ``value.converter``, ``value.converter.schemas.enable``,
``value.converter.schema.registry.url``, ...). Supported classes:

* ``org.apache.kafka.connect.storage.StringConverter``: UTF-8 text (``converter.encoding``), bytes
  that do not decode replaced by U+FFFD as Kafka's ``StringDeserializer`` does;
* ``org.apache.kafka.connect.converters.ByteArrayConverter``: bytes as they are;
* ``org.apache.kafka.connect.json.JsonConverter``: ``schemas.enable=true`` reads the
  ``{"schema": .., "payload": ..}`` envelope as Kafka's JsonConverter does and translates the
  Connect schema into an Avro schema the way Confluent's ``AvroData`` does (the project's single
  schema language, see :mod:`sink.records.record`; details in :mod:`sink.records.connect_json`),
  ``replace.null.with.default`` as in Connect; ``false`` reads plain JSON and keeps the original bytes in
  ``SinkRecord.raw_value`` so the JSON format writes them through. When nothing downstream needs
  the parsed value (JSON output without envelope, no PARTITIONBY on value fields) the value is
  not parsed at all: ``value`` then holds the raw bytes too (see :data:`UNPARSED_JSON`);
* ``io.confluent.connect.avro.AvroConverter``: Confluent wire format (magic 0, 4-byte schema id),
  writer schemas fetched once per id with confluent-kafka's ``SchemaRegistryClient`` (cached) and
  decoded with fastavro, which is what confluent-kafka's ``AvroDeserializer`` does internally; we
  decode directly because the deserializer does not expose the writer schema, which becomes
  ``value_schema``/``key_schema``.

Defaults when a converter is not configured (there is no worker properties file to inherit from):
``key.converter`` = ByteArrayConverter, ``value.converter`` = JsonConverter with
``schemas.enable=false``. When JsonConverter is named without ``schemas.enable``, Connect's own
default ``true`` applies.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import msgspec

from kcql.errors import ConfigProblem, RecordError, Stage
from sink.records.connect_json import EnvelopeReader, connect_schema_to_avro
from sink.records.record import Schema, SinkRecord

__all__ = [
    "AVRO_CONVERTER",
    "BYTEARRAY_CONVERTER",
    "BYTES_CONVERTER",
    "JSON_CONVERTER",
    "STRING_CONVERTER",
    "UNPARSED_JSON",
    "AvroConverter",
    "ByteArrayConverter",
    "ConversionError",
    "Converter",
    "JsonConverter",
    "MessageLike",
    "RecordConverter",
    "StringConverter",
    "build_converter",
    "connect_schema_to_avro",
    "converter_problems",
    "needs_parsed_value",
    "record_converter",
]

log = logging.getLogger(__name__)

STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
BYTEARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
BYTES_CONVERTER = BYTEARRAY_CONVERTER
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
AVRO_CONVERTER = "io.confluent.connect.avro.AvroConverter"
_KNOWN = (STRING_CONVERTER, BYTEARRAY_CONVERTER, JSON_CONVERTER, AVRO_CONVERTER)

UNPARSED_JSON = "unparsed"
"""Documentation marker: with schemaless JSON and nothing needing the parsed value, ``value`` is the
raw bytes (identical to ``raw_value``); the JSON format only ever writes ``raw_value`` then."""


_STAGES: dict[str, Stage] = {"key": "KEY_CONVERTER", "value": "VALUE_CONVERTER", "header": "HEADER_CONVERTER"}


class ConversionError(RecordError):
    """A key, value or header cannot be converted; names the record so the user can find it."""

    def __init__(
        self, message: str, topic: str, partition: int, offset: int, part: str, retriable: bool = False
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.part = part
        self.reason = message
        super().__init__(
            f"cannot convert the record {part} at topic {topic!r} partition {partition} "
            f"offset {offset}: {message}",
            offset=offset,
            stage=_STAGES[part],
            transient=retriable,
        )

    @property
    def is_retriable(self) -> bool:
        """True when trying again may succeed (Schema Registry unreachable), not a bad record."""
        return self.transient


class RegistryUnavailable(Exception):
    """The Schema Registry could not be asked (network, 5xx): the record itself may be fine."""


class MessageLike(Protocol):
    """The parts of ``confluent_kafka.Message`` the converters read."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> Any: ...  # list of (name, bytes | None) for consumed messages
    def timestamp(self) -> tuple[int, int]: ...


class Converter(Protocol):
    """Turns the bytes of one side (key or value) into ``(value, avro_schema)``."""

    def convert(self, topic: str, data: bytes) -> tuple[Any, Schema | None]:
        """Convert non-null bytes; raise ValueError (or any Exception) on bad data."""
        ...


class StringConverter:
    """Connect's StringConverter: text in ``converter.encoding`` (default UTF-8).

    Bytes that are not valid in the encoding become U+FFFD, never an error: Kafka's
    ``StringDeserializer`` decodes with ``new String(data, encoding)``, which replaces malformed
    input, so Connect writes such a key or value with replacement characters rather than
    failing the record. A key then never stops a batch from keeping its cheap forms.
    """

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def convert(self, topic: str, data: bytes) -> tuple[Any, Schema | None]:
        return data.decode(self.encoding, "replace"), "string"


class ByteArrayConverter:
    """Connect's ByteArrayConverter: the bytes unchanged."""

    def convert(self, topic: str, data: bytes) -> tuple[Any, Schema | None]:
        return bytes(data), "bytes"


# --------------------------------------------------------------------------- Connect JSON


_msgspec_decode = msgspec.json.decode
_MSGSPEC_MAX_BYTES = 1900
"""Values up to this size are parsed with msgspec (~3x faster than ``json.loads``, the same
Python values whenever it succeeds); they are too short to hold what only ``json.loads`` refuses
(an integer of 4,300 digits, nesting deeper than its recursion limit), so msgspec never accepts a
value ``json.loads`` would not. Longer values, and those msgspec refuses, go to ``json.loads``."""


class JsonConverter:
    """Connect's JsonConverter, with or without the ``{"schema", "payload"}`` envelope.

    With the envelope, documents are read as Kafka's JsonConverter reads them and the Connect
    schema becomes the Avro schema Confluent's AvroData makes of it (:mod:`sink.records.connect_json`).

    Args:
        schemas_enable: ``schemas.enable``.
        replace_null_with_default: ``replace.null.with.default`` (Connect's default ``true``): a
            null or missing value of a schema with a default takes the default.
    """

    def __init__(self, schemas_enable: bool, replace_null_with_default: bool = True) -> None:
        self.schemas_enable = schemas_enable
        self._envelopes = EnvelopeReader(replace_null_with_default)

    def convert(self, topic: str, data: bytes) -> tuple[Any, Schema | None]:
        if not self.schemas_enable:
            if len(data) <= _MSGSPEC_MAX_BYTES:
                try:
                    return _msgspec_decode(data), None
                except msgspec.DecodeError:
                    pass  # json.loads decides: it reads NaN, lone surrogates and UTF-16, or says why not
            return json.loads(data), None
        return self._envelopes.read(data)


_REGISTRY_CLIENT_KEYS = ("basic.auth.user.info", "basic.auth.credentials.source")


class AvroConverter:
    """Confluent's AvroConverter: wire format + Schema Registry, writer schemas cached per id."""

    def __init__(self, url: str, client_config: Mapping[str, str] | None = None) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        conf: dict[str, Any] = {"url": url}
        conf.update({k: v for k, v in (client_config or {}).items() if k in _REGISTRY_CLIENT_KEYS})
        self._client = SchemaRegistryClient(conf)
        self._schemas: dict[int, tuple[Schema, Any]] = {}
        self._columns: dict[int, tuple[Schema, Any, Any] | None] = {}

    def _schema(self, schema_id: int) -> tuple[Schema, Any]:
        hit = self._schemas.get(schema_id)
        if hit is None:
            import fastavro
            from confluent_kafka.schema_registry.error import SchemaRegistryError

            try:
                registered = self._client.get_schema(schema_id)
            except SchemaRegistryError as exc:
                if exc.http_status_code == 404 or 40400 <= (exc.error_code or 0) < 40500:
                    raise ValueError(f"schema id {schema_id} is not in the Schema Registry: {exc}") from exc
                raise RegistryUnavailable(f"Schema Registry error for schema id {schema_id}: {exc}") from exc
            except Exception as exc:
                raise RegistryUnavailable(
                    f"Schema Registry unreachable for schema id {schema_id}: {exc}"
                ) from exc
            if registered.schema_type not in (None, "AVRO") or not registered.schema_str:
                raise ValueError(f"schema id {schema_id} is {registered.schema_type or 'empty'}, not AVRO")
            writer = json.loads(registered.schema_str)
            hit = (writer, fastavro.parse_schema(writer))
            self._schemas[schema_id] = hit
        return hit

    def warm_up(self, subjects: Sequence[str]) -> int:
        """Fetch the latest schema of each subject (TopicNameStrategy: ``<topic>-value``) and
        prepare its decoding, before the first record needs it; returns how many were prepared.

        The first batch of a new schema id otherwise waits for the registry (the HTTP client's
        first connection and its lazy imports: 10-20 ms on localhost), the columns and the Arrow
        schema. Best effort: a subject that does not exist (another subject name strategy, no
        data yet) or an unreachable registry only means the first batch fetches as before.
        """
        prepared = 0
        for subject in subjects:
            try:
                latest = self._client.get_latest_version(subject)
                schema_id = latest.schema_id
                if schema_id is None or schema_id in self._schemas:
                    continue
                self.columns(schema_id)
                prepared += 1
            except Exception as exc:  # noqa: BLE001 - an optimisation: the first batch fetches instead
                log.debug("schema registry warm-up of subject %s skipped: %s", subject, exc)
        return prepared

    def columns(self, schema_id: int) -> tuple[Schema, Any, Any] | None:
        """``(writer schema, flat fields, Arrow schema)`` for decoding values of ``schema_id``
        column by column (:mod:`sink.records.avro_block`), or ``None`` when the schema is not a flat record.

        Raises:
            ValueError, RegistryUnavailable: as :meth:`convert` for that schema id.
        """
        if schema_id not in self._columns:
            from formats.arrow_schema import avro_to_arrow
            from formats.avro_columns import flat_fields

            writer, _parsed = self._schema(schema_id)
            fields = flat_fields(writer)
            self._columns[schema_id] = None if fields is None else (writer, fields, avro_to_arrow(writer))
        return self._columns[schema_id]

    def convert(self, topic: str, data: bytes) -> tuple[Any, Schema | None]:
        import fastavro

        if len(data) < 5 or data[0] != 0:
            raise ValueError(
                "Unknown magic byte: Confluent Avro data starts with magic byte 0 and a 4-byte schema id"
            )
        writer, parsed = self._schema(int.from_bytes(data[1:5], "big"))
        return fastavro.schemaless_reader(io.BytesIO(data[5:]), parsed, None), writer


# --------------------------------------------------------------------------- configuration

DEFAULT_CONVERTERS: dict[str, str] = {"key.converter": BYTEARRAY_CONVERTER, "value.converter": JSON_CONVERTER}
"""Used when a converter is not configured (documented in docs/configuration.md)."""


def _sub(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    dotted = prefix + "."
    return {k[len(dotted) :]: v for k, v in props.items() if k.startswith(dotted)}


def converter_problems(
    props: Mapping[str, str], defaults: Mapping[str, str] | None = None
) -> list[ConfigProblem]:
    """Every converter setting that is wrong (``key.converter``, ``value.converter`` and their
    sub-keys), so the caller can report them together with the rest of the config."""
    defaults = DEFAULT_CONVERTERS if defaults is None else defaults
    problems: list[ConfigProblem] = []
    for prefix in ("key.converter", "value.converter"):
        cls = (props.get(prefix) or defaults[prefix]).strip()
        sub = _sub(props, prefix)
        if cls not in _KNOWN:
            problems.append(
                ConfigProblem(
                    prefix, cls, f"unsupported converter class {cls!r}; use one of " + ", ".join(_KNOWN)
                )
            )
            continue
        if cls == JSON_CONVERTER:
            for key in ("schemas.enable", "replace.null.with.default"):
                flag = sub.get(key)
                if flag is not None and flag.strip().lower() not in ("true", "false"):
                    problems.append(ConfigProblem(f"{prefix}.{key}", flag, "must be true or false"))
            fmt = sub.get("decimal.format")
            if fmt is not None and fmt.strip().upper() not in ("BASE64", "NUMERIC"):
                # only chooses how Connect *writes* decimals; both are read, but Connect refuses others
                problems.append(ConfigProblem(f"{prefix}.decimal.format", fmt, "must be BASE64 or NUMERIC"))
        if cls == AVRO_CONVERTER and not sub.get("schema.registry.url", "").strip():
            problems.append(
                ConfigProblem(
                    prefix,
                    cls,
                    f"{prefix}.schema.registry.url is required for io.confluent.connect.avro.AvroConverter",
                )
            )
        if cls == STRING_CONVERTER:
            enc = sub.get("converter.encoding") or sub.get("encoding") or "utf-8"
            try:
                "".encode(enc)
            except LookupError:
                problems.append(ConfigProblem(f"{prefix}.converter.encoding", enc, "unknown encoding"))
    return problems


def build_converter(cls: str, props: Mapping[str, str], prefix: str) -> Converter:
    """The converter ``cls`` configured from ``<prefix>.*`` keys (validate with converter_problems).

    A JsonConverter whose ``schemas.enable`` is absent gets Connect's default ``true``, except when
    the class itself was not configured (our default is schemaless JSON, see the module docs).
    """
    sub = _sub(props, prefix)
    cls = cls.strip()
    if cls == STRING_CONVERTER:
        return StringConverter(sub.get("converter.encoding") or sub.get("encoding") or "utf-8")
    if cls == BYTEARRAY_CONVERTER:
        return ByteArrayConverter()
    if cls == JSON_CONVERTER:
        default = "true" if prefix in props else "false"
        return JsonConverter(
            sub.get("schemas.enable", default).strip().lower() == "true",
            sub.get("replace.null.with.default", "true").strip().lower() == "true",
        )
    if cls == AVRO_CONVERTER:
        url = (sub.get("schema.registry.url") or "").split(",")[0].strip()
        if not url:
            raise ValueError(f"{prefix}.schema.registry.url is required for {AVRO_CONVERTER}")
        return AvroConverter(url, sub)
    raise ValueError(f"unsupported converter class {cls!r}; use one of " + ", ".join(_KNOWN))


_PAIRS = frozenset({(0x7B, 0x7D), (0x5B, 0x5D)})  # {...} and [...]


def _passes_through(data: bytes) -> bool:
    """Whether unparsed JSON text may be written as it is: an object or array on one line.

    Two byte comparisons and C-level searches, instead of a parse: anything else (scalars, text
    with a line break or a carriage return, which a JSON-lines file cannot hold as it is, a
    payload that is not JSON at all such as Avro or plain text) is parsed, so the usual poison
    records are still caught; only a malformed document inside a well-formed ``{...}``/``[...]``
    frame can pass unchecked.
    """
    return bool(data) and (data[0], data[-1]) in _PAIRS and b"\n" not in data and b"\r" not in data


def _header_value(v: bytes | None) -> Any:
    if v is None:
        return None
    try:
        return v.decode("utf-8")
    except UnicodeDecodeError:
        return v


class RecordConverter:
    """Converts consumed messages into SinkRecords (key, value, headers, timestamp).

    Args:
        key: the key converter.
        value: the value converter.
        parse_value: ``topic -> bool``; when it returns False and the value converter is
            schemaless JSON, values are not parsed: ``raw_value`` carries the text and ``value``
            the same bytes. Texts that are not a one-line ``{...}``/``[...]`` are still parsed
            (see :func:`_passes_through`), so non-JSON payloads are still caught as record errors.
    """

    def __init__(
        self, key: Converter, value: Converter, parse_value: Callable[[str], bool] | None = None
    ) -> None:
        self.key = key
        self.value = value
        self._parse_value = parse_value or (lambda _t: True)
        self._raw_json = isinstance(value, JsonConverter) and not value.schemas_enable
        self._skip_cache: dict[str, bool] = {}

    def _skip_parse(self, topic: str) -> bool:
        hit = self._skip_cache.get(topic)
        if hit is None:
            hit = self._raw_json and not self._parse_value(topic)
            self._skip_cache[topic] = hit
        return hit

    def convert(self, msg: MessageLike) -> SinkRecord:
        """One message → SinkRecord.

        Raises:
            ConversionError: naming topic, partition, offset and whether key or value failed.
        """
        topic = msg.topic() or ""
        kbytes = msg.key()
        vbytes = msg.value()
        part = "key"
        try:
            key, kschema = (None, None) if kbytes is None else self.key.convert(topic, kbytes)
            part = "value"
            raw = None
            if vbytes is None:
                value, vschema = None, None
            elif self._raw_json:
                raw = vbytes
                if _passes_through(vbytes) and self._skip_parse(topic):
                    value, vschema = vbytes, None
                else:
                    value, vschema = self.value.convert(topic, vbytes)
            else:
                value, vschema = self.value.convert(topic, vbytes)
        except Exception as exc:
            raise ConversionError(
                str(exc) if isinstance(exc, RegistryUnavailable) else f"{type(exc).__name__}: {exc}",
                topic,
                msg.partition() or 0,
                msg.offset() or 0,
                part,
                retriable=isinstance(exc, RegistryUnavailable),
            ) from exc
        ts_type, ts = msg.timestamp()
        hdrs = msg.headers()
        return SinkRecord(
            topic,
            msg.partition() or 0,
            msg.offset() or 0,
            ts if ts_type else None,
            key,
            value,
            tuple((n, _header_value(v)) for n, v in hdrs) if hdrs else (),
            kschema,
            vschema,
            raw,
        )

    def convert_batch(
        self, messages: Sequence[MessageLike]
    ) -> tuple[list[SinkRecord], list[tuple[MessageLike, ConversionError]]]:
        """Convert a batch; failed messages are returned with their error, in order, so the
        caller applies the error policy (DLQ, skip, stop) without losing the rest."""
        records: list[SinkRecord] = []
        failures: list[tuple[MessageLike, ConversionError]] = []
        convert = self.convert
        append = records.append
        for msg in messages:
            try:
                append(convert(msg))
            except ConversionError as err:
                failures.append((msg, err))
        return records, failures


def record_converter(
    props: Mapping[str, str], parse_value: Callable[[str], bool] | None = None
) -> RecordConverter:
    """The RecordConverter the connector config asks for (validate with converter_problems)."""
    convs = []
    for prefix in ("key.converter", "value.converter"):
        cls = (props.get(prefix) or DEFAULT_CONVERTERS[prefix]).strip()
        convs.append(build_converter(cls, props, prefix))
    return RecordConverter(convs[0], convs[1], parse_value)


def needs_parsed_value(plans: Sequence[Any]) -> Callable[[str], bool]:
    """``topic -> bool``: whether the statement handling ``topic`` needs the parsed value.

    Only ``STOREAS JSON`` without envelope, projection and PARTITIONBY on value fields can write
    the raw JSON text as it came; every other format, the envelope, a projection and value
    partitioning read fields (transforms too: their callers do not ask).
    The first matching statement wins, as in Lenses; a topic without one needs nothing (it fails
    elsewhere with Lenses' message).
    """

    def needs(topic: str) -> bool:
        for plan in plans:
            if plan.matches_topic(topic):
                fmt = getattr(plan.format, "value", plan.format)
                value_fields = any(f.kind == "value" for f in (plan.partition_by or ()))
                projected = getattr(plan, "projection", False) and bool(plan.fields or plan.ignore)
                source = getattr(plan, "date_source", None)
                value_fields = value_fields or (source is not None and source.field is not None)
                return not (fmt == "JSON" and plan.envelope is None and not value_fields and not projected)
        return True

    return needs
