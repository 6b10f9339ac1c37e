"""Replay without a broker: the reverse KCQL form, the position, converters out, archive decoding."""

from __future__ import annotations

import base64
import json

import pytest

from kcql.errors import ConfigError, KcqlSemanticError, KcqlSyntaxError
from kcql.model import StoreFormat
from kcql.replay import parse_replay
from sink.cli.replay import ReplayArgsError, parse_until
from sink.replay.archive import decode_file
from sink.replay.position import PlanPosition, Position, PositionError
from sink.replay.serialise import build_serialiser, header_bytes
from spark_reader.catalog import DataFile


def test_reverse_form_reads_bucket_prefix_as_source_and_topic_as_target():
    (plan,) = parse_replay(
        "INSERT INTO restored SELECT * FROM lake:archive/orders PARTITIONBY name STOREAS AVRO LIMIT 500 "
        "PROPERTIES('store.envelope'=true, 'partition.include.keys'=true, 'source.topic'='orders')"
    )
    assert (plan.topic, plan.bucket, plan.prefix, plan.source_topic, plan.limit) == (
        "restored",
        "lake",
        "archive/orders",
        "orders",
        500,
    )
    assert plan.layout.format is StoreFormat.AVRO and plan.layout.include_keys
    assert plan.layout.source == "*" and plan.layout.envelope is not None


def test_bytes_needs_no_flush_count_and_several_statements_parse():
    plans = parse_replay("INSERT INTO a SELECT * FROM b:x STOREAS BYTES; INSERT INTO c SELECT * FROM b:y")
    assert [p.topic for p in plans] == ["a", "c"]
    assert plans[1].layout.format is StoreFormat.JSON


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ("INSERT INTO bkt:p SELECT * FROM orders", 13, "looks like bucket:prefix"),
        ("INSERT INTO t SELECT a FROM bkt:p", 22, "only SELECT *"),
        ("INSERT INTO t SELECT * FROM bkt:p STOREAS XML", 43, "Unsupported format"),
        ("INSERT INTO t SELECT * FROM bkt:p PROPERTIES('nope'=1)", 46, "unknown property"),
    ],
)
def test_errors_name_the_position_with_a_caret(text, column, words):
    with pytest.raises(KcqlSemanticError) as err:
        parse_replay(text)
    assert err.value.column == column and words in str(err.value)
    assert "^" in str(err.value)


def test_syntax_errors_keep_the_parsers_messages():
    with pytest.raises(KcqlSyntaxError):
        parse_replay("INSERT INTO t SELECT * bkt:p")
    with pytest.raises(KcqlSyntaxError):
        parse_replay("  ;  ")


def _file(key: str, partition: int = 0, last: int | None = None, first: int | None = None) -> DataFile:
    return DataFile(key=key, size=1, topic="t", partition=partition, first_offset=first, last_offset=last)


def test_position_round_trips_and_knows_done_files():
    pos = Position()
    unpart = pos.plan("b:p", partitioned=False)
    unpart.file_done(_file("t/0/9.json", last=9))
    unpart.file_partial(_file("t/0/19.json", last=19), 4)
    part = pos.plan("b:q", partitioned=True)
    part.file_done(_file("x=1/t(0_5).json", last=5))
    pos.landed("out", 1, 41)
    back = Position.from_bytes(pos.to_bytes(), {"b:p": False, "b:q": True}, "here")
    assert back.found and back.targets == {"out": {1: 42}}
    p = back.plans["b:p"]
    assert p.is_done(_file("t/0/9.json", last=9)) and p.is_done(_file("t/0/4.json", last=4))
    assert not p.is_done(_file("t/0/19.json", last=19)) and p.skip_in(_file("t/0/19.json", last=19)) == 4
    assert not p.is_done(_file("t/1/3.json", partition=1, last=3))
    q = back.plans["b:q"]
    assert q.is_done(_file("x=1/t(0_5).json", last=5)) and not q.is_done(_file("x=2/t(0_3).json", last=3))


def test_position_that_is_not_ours_is_a_clear_error():
    with pytest.raises(PositionError, match="cannot read the replay position topic\\[x\\]"):
        Position.from_bytes(b'{"version": 9}', {}, "topic[x]")
    assert PlanPosition(partitioned=False).skip_in(_file("a")) == 0


def test_converters_on_the_way_out():
    js = build_serialiser({}, "value")
    assert js.serialise("t", {"a": 1, "b": [1, "x"]}) == b'{"a":1,"b":[1,"x"]}'
    assert js.serialise("t", None) is None
    raw = build_serialiser({}, "key")  # ByteArrayConverter by default, as in the sink
    assert raw.serialise("t", b"\x00k") == b"\x00k" and raw.serialise("t", "k") == b"k"
    text = build_serialiser({"value.converter": "org.apache.kafka.connect.storage.StringConverter"}, "value")
    assert text.serialise("t", "héllo") == "héllo".encode()
    assert header_bytes("v") == b"v" and header_bytes(b"\x01") == b"\x01" and header_bytes(3) == b"3"
    with pytest.raises(ConfigError, match=r"value\.converter"):
        build_serialiser({"value.converter": "com.example.Nope"}, "value")
    with pytest.raises(ConfigError, match=r"schema\.registry\.url"):
        build_serialiser({"value.converter": "io.confluent.connect.avro.AvroConverter"}, "value")


def test_json_envelope_decodes_key_bytes_headers_and_metadata():
    (plan,) = parse_replay("INSERT INTO t SELECT * FROM b:p STOREAS JSON PROPERTIES('store.envelope'=true)")
    line = {
        "key": base64.b64encode(b"\x00k").decode(),
        "keyIsArray": True,
        "value": {"id": 1},
        "headers": {"h": ["a", "b"], "z": "c"},
        "metadata": {"timestamp": 5, "topic": "src", "partition": 3, "offset": 17},
    }
    (rec,) = decode_file(plan, _file("p/src/3/17.json", partition=3, last=17), json.dumps(line).encode())
    assert (rec.key, rec.value, rec.timestamp, rec.partition, rec.offset) == (b"\x00k", {"id": 1}, 5, 3, 17)
    assert rec.headers == (("h", "a"), ("h", "b"), ("z", "c"))


def test_plain_text_keeps_values_and_infers_offsets_from_the_name():
    (plan,) = parse_replay("INSERT INTO t SELECT * FROM b:p STOREAS TEXT")
    recs = decode_file(plan, _file("p/src/0/11.text", last=11), b"a\nb\n")
    assert [(r.value, r.offset, r.key, r.headers) for r in recs] == [("a", 10, None, ()), ("b", 11, None, ())]


def test_until_parses_offsets_and_times():
    assert parse_until("42").offset == 42
    assert parse_until("1700000000000ms").timestamp == 1_700_000_000_000
    assert parse_until("2026-01-01T00:00:00Z").timestamp == 1_767_225_600_000
    with pytest.raises(ReplayArgsError, match="time zone"):
        parse_until("2026-01-01T00:00:00")
    with pytest.raises(ReplayArgsError, match="expected an offset"):
        parse_until("soon")


def test_bytes_csv_and_avro_files_decode_with_what_they_keep():
    import io

    import fastavro

    (raw,) = parse_replay("INSERT INTO t SELECT * FROM b:p STOREAS BYTES")
    (rec,) = decode_file(raw, _file("p/src/0/4.bytes", last=4), b"\x00\x01")
    assert (rec.value, rec.offset) == (b"\x00\x01", 4)
    (csvh,) = parse_replay("INSERT INTO t SELECT * FROM b:p STOREAS CSV_WITHHEADERS")
    recs = decode_file(csvh, _file("p/src/0/1.csv", last=1), b"a,b\r\n1,x\r\n2,y\r\n")
    assert [r.value for r in recs] == [{"a": "1", "b": "x"}, {"a": "2", "b": "y"}]
    (avro,) = parse_replay("INSERT INTO t SELECT * FROM b:p STOREAS AVRO PROPERTIES('store.envelope'=true)")
    value_schema = {"type": "record", "name": "v", "fields": [{"name": "id", "type": "long"}]}
    schema = {
        "type": "record",
        "name": "Envelope",
        "fields": [
            {"name": "key", "type": ["null", "bytes"], "default": None},
            {"name": "value", "type": ["null", value_schema], "default": None},
            {
                "name": "headers",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "H",
                        "fields": [
                            {"name": "name", "type": "string"},
                            {"name": "value", "type": ["null", "string"]},
                            {"name": "value_bytes", "type": ["null", "bytes"]},
                        ],
                    },
                },
            },
        ],
    }
    buf = io.BytesIO()
    row = {"key": b"k", "value": {"id": 3}, "headers": [{"name": "h", "value": None, "value_bytes": b"\x02"}]}
    fastavro.writer(buf, schema, [row])
    (rec,) = decode_file(avro, _file("p/src/0/0.avro", last=0), buf.getvalue())
    assert (rec.key, rec.value, rec.headers) == (b"k", {"id": 3}, (("h", b"\x02"),))
    assert rec.value_schema == value_schema and rec.key_schema == "bytes"


def test_avro_converter_needs_a_schema_from_the_archive():
    from sink.replay.serialise import ReplaySerialiseError

    ser = build_serialiser(
        {
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": "http://x",
        },
        "value",
    )
    assert ser.serialise("t", None) is None
    with pytest.raises(ReplaySerialiseError, match="only STOREAS AVRO files carry one"):
        ser.serialise("t", {"id": 1})


def test_reconciler_takes_what_a_killed_transaction_left_in_order_and_passes_over_foreign_records():
    from sink.replay.producer import Reconciler

    h = (("h", b"1"),)
    visible = {
        0: [(b"k1", b"v1", h, 10, 100), (b"zz", b"foreign", (), 5, 101), (b"k2", b"v2", h, 11, 102)],
    }
    rec = Reconciler(visible)
    assert rec.take(0, b"k1", b"v1", list(h), 10) == 100
    assert rec.take(0, b"k1", b"v1", list(h), 10) is None  # each visible record counts once
    assert rec.take(0, b"k2", b"v2", list(h), None) == 102  # no archived timestamp: not compared
    assert rec.take(0, b"k3", b"v3", list(h), 12) is None  # beyond what landed: produce it
    assert rec.take(1, b"k1", b"v1", list(h), 10) is None  # nothing visible in partition 1
    assert Reconciler({0: [(b"k", b"v", (), 7, 3)]}).take(0, b"k", b"v", [], 8) is None  # timestamps differ


def test_murmur2_is_kafkas_and_positions_go_where_its_default_partitioner_puts_the_name():
    from sink.replay.producer import murmur2, position_partition

    # org.apache.kafka.common.utils.UtilsTest.testMurmur2
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    assert {k: murmur2(k) for k in cases} == cases
    assert position_partition("abc", 25) == (479470107 & 0x7FFFFFFF) % 25
    assert position_partition("foobar", 25) == (-790332482 & 0x7FFFFFFF) % 25  # toPositive, not abs
    assert {position_partition(f"replay-{i}", 1) for i in range(50)} == {0}  # a one-partition topic
    assert len({position_partition(f"replay-{i}", 25) for i in range(200)}) == 25
