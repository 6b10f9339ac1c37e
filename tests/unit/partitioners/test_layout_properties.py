"""Hypothesis: for arbitrary values and PARTITIONBY specs, keys stay under the prefix, no segment
is hidden, and parse_key gives back exactly what object_key was built from."""

from __future__ import annotations

import posixpath
import string
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcql.model import FileNaming, Padding, PartitionField, SinkPlan
from partitioners import FileMeta, Partitioner, is_data_key, object_key, parse_key
from partitioners.dates import DatePattern
from partitioners.escaping import MISSING
from partitioners.render import to_text
from sink.records.record import SinkRecord

ANY_TEXT = st.text(alphabet=st.characters(codec=None, categories=None), max_size=12)
NAME = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/\\"), min_size=1, max_size=8)
TOPIC = st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=1, max_size=20).filter(
    lambda t: t not in (".", "..")
)
SCALAR = st.one_of(ANY_TEXT, st.integers(), st.booleans(), st.floats(), st.none())
DATE_PATTERNS = [
    "uuuu",
    "LL",
    "dd",
    "HH",
    "uuuu-MM-dd",
    "yyyy/MM/dd HH:mm",
    "'y='u",
    "HHmmss.SSS",
    "'year='uuuu/'month='MM",
]
PADDINGS = st.one_of(
    st.just(Padding()),
    st.builds(
        Padding,
        type=st.sampled_from(["LeftPad", "RightPad", "NoOp"]),
        char=st.sampled_from(["0", "x", "_", "#", "/", " "]),
        offset=st.one_of(st.none(), st.integers(1, 20)),
        partition=st.one_of(st.none(), st.integers(1, 20)),
    ).filter(lambda p: not (p.type == "RightPad" and p.char == "0")),  # 1 vs 10000: ambiguous by nature
)
PREFIXES = st.sampled_from(["", "streamReactorBackups", "a/b/c", "with space/and+plus"])


@st.composite
def scenario(draw: st.DrawFn) -> tuple[SinkPlan, SinkRecord, list[tuple[str, str]]]:
    """A plan with random PARTITIONBY fields plus a record whose values are arbitrary."""
    kinds = draw(
        st.one_of(
            st.none(),  # NOPARTITION
            st.lists(
                st.sampled_from(["key", "keypath", "value", "header", "topic", "partition", "date"]),
                max_size=4,
            ),
        )
    )
    heads = draw(st.lists(NAME, min_size=8, max_size=8, unique=True))
    key_dict: dict[str, Any] = {}
    value: dict[str, Any] = {}
    headers: list[tuple[str, Any]] = []
    topic = draw(TOPIC)
    partition = draw(st.integers(0, 10**6))
    timestamp = draw(st.integers(0, 253_402_300_799_999))
    padding = draw(PADDINGS)
    whole_key = draw(st.one_of(ANY_TEXT, st.integers(), st.booleans(), st.binary(max_size=6)))
    fields: list[PartitionField] = []
    expected: list[tuple[str, str]] = []
    for i, kind in enumerate(kinds or []):
        head = heads[i]
        nested = draw(st.booleans())
        path = (head, "n") if nested else (head,)
        scalar = draw(SCALAR)
        present = draw(st.booleans())
        text = MISSING if scalar is None or not present else to_text(scalar)
        target = {"n": scalar} if nested else scalar
        if kind == "key":
            if any(f.kind == "key" and not f.path for f in fields):
                continue
            fields.append(PartitionField("_key", "key"))
            text = to_text(whole_key)
        elif kind == "keypath":
            if "key" in (kinds or []):  # a key is either primitive or a struct, not both
                continue
            fields.append(PartitionField("_key." + ".".join(path), "key", path))
            if present:
                key_dict[head] = target
        elif kind == "value":
            fields.append(PartitionField(".".join(path), "value", path))
            if present:
                value[head] = target
        elif kind == "header":
            fields.append(PartitionField("_header." + ".".join(path), "header", path))
            headers.append((head, target if present else ({} if nested else None)))
        elif kind == "topic":
            fields.append(PartitionField("_topic", "topic"))
            text = topic
        elif kind == "partition":
            fields.append(PartitionField("_partition", "partition"))
            text = padding.pad_partition(partition)
        else:
            pattern = draw(st.sampled_from(DATE_PATTERNS))
            fields.append(PartitionField("_date." + pattern, "date", (pattern,)))
            text = DatePattern(pattern).format(timestamp)
        expected.append((fields[-1].display_name, text))
    uses_whole_key = any(f.kind == "key" and not f.path for f in fields)
    plan = SinkPlan(
        bucket="b",
        prefix=draw(PREFIXES),
        source=draw(st.sampled_from([topic, "*"])),
        partition_by=None if kinds is None else tuple(fields),
        include_keys=draw(st.booleans()),
        padding=padding,
        naming=draw(st.sampled_from(list(FileNaming))),
        key_suffix=draw(st.sampled_from(["", "-east", "_x.y"])),
    )
    record = SinkRecord(
        topic,
        partition,
        0,
        timestamp,
        whole_key if uses_whole_key else key_dict,
        value,
        tuple(headers),
    )
    return plan, record, expected


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenario(),
    st.integers(0, 10**15),
    st.integers(0, 1000),
    st.integers(-1, 2**45),
    st.sampled_from(["json", "parquet", "json.gz"]),
)
def test_keys_stay_under_prefix_and_parse_back(case, first, span, ts, ext):
    plan, record, expected = case
    path = Partitioner(plan).path_for(record)
    meta = FileMeta(record.topic, record.partition, path, first, first + span, ts, ts + span, span + 1, ext)
    key = object_key(plan, meta)

    base = plan.prefix + "/" if plan.prefix else ("topics/" if plan.naming == FileNaming.CONFLUENT else "")
    assert key.startswith(base)
    assert posixpath.normpath(key) == key  # no "", "." or ".." segments, nothing to climb out with
    assert not posixpath.isabs(key)
    assert is_data_key(key)  # no hidden segment
    assert (
        len(key[len(base) :].split("/")) == len(path.split("/")) + 1 if path else "/" not in key[len(base) :]
    )

    parsed = parse_key(plan, key)
    assert parsed is not None, key
    assert parsed.topic == record.topic
    assert parsed.partition == record.partition
    assert parsed.extension == ext
    if plan.partition_by:
        assert list(parsed.partition_items) == expected
        assert parsed.partition_values == dict(expected)
    else:
        assert parsed.partition_values == {}
    if plan.naming == FileNaming.CONFLUENT:
        assert (parsed.first_offset, parsed.last_offset) == (first, None)
    else:
        assert (parsed.first_offset, parsed.last_offset) == (None, first + span)
        if plan.partition_by == ():
            assert (parsed.min_timestamp, parsed.max_timestamp) == (ts, ts + span)
