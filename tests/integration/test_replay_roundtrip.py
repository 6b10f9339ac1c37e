"""Round trip on real Tansu + local storage: topic A → sink (format x layout) → replay → topic B.

One sink run writes every case (one source topic and one statement per case, so there is one
group join); each case then replays its archive into a fresh topic B and compares B with A record
for record, read with isolation.level=read_committed.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kcql.replay import parse_replay
from sink.replay.archive import list_committed, read_records
from sink.replay.runner import ReplayOptions, Until, replay
from spark_reader.storage import StorageSettings
from tests.integration._replay_support import Rec, produce, read_topic, sink_props, source_records
from tests.integration._run_support import RunningSink, make_config, wait_for

N = 40
PARTS = 2
ENVELOPE = "'store.envelope'=true"
LAYOUTS: dict[str, tuple[str, str]] = {
    # layout -> (clause before STOREAS, extra properties)
    "default": ("", ""),
    "values": ("PARTITIONBY name", ""),
    "keysandvalues": ("PARTITIONBY name", "'partition.include.keys'=true"),
    "nopartition": ("NOPARTITION", ""),
    "confluent": ("", "'file.naming'='confluent'"),
}
ENVELOPE_CASES = [(fmt, layout) for fmt in ("JSON", "AVRO", "PARQUET") for layout in LAYOUTS]
PLAIN_CASES = [("JSON", "default"), ("PARQUET", "default"), ("JSON", "values")]
STRING_CASES = [("TEXT", "default"), ("BYTES", "default")]
"""Written by a second sink with StringConverter (TEXT takes only strings); replayed with it too."""
STRING = "org.apache.kafka.connect.storage.StringConverter"


def _clauses(layout: str, envelope: bool, fmt: str = "JSON") -> tuple[str, str]:
    clause, extra = LAYOUTS[layout]
    props = ["'flush.count'=1" if fmt == "BYTES" else "'flush.count'=7", "'flush.interval'=1"]
    if envelope:
        props.append(ENVELOPE)
    if extra:
        props.append(extra)
    return clause, ", ".join(props)


class Archive:
    """Every case's source topic, records and replay statement."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cases: dict[tuple[str, str, bool], dict[str, Any]] = {}


@pytest.fixture(scope="module")
def archive(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Archive:
    from confluent_kafka.admin import AdminClient, NewTopic

    root = tmp_path_factory.mktemp("replay-archive")
    arch = Archive(root)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    statements: dict[bool, list[str]] = {False: [], True: []}  # by "written with StringConverter"
    records = source_records(N, PARTS)
    for envelope, cases in ((True, ENVELOPE_CASES), (False, PLAIN_CASES + STRING_CASES)):
        for fmt, layout in cases:
            topic = f"ra-{fmt.lower()}-{layout}-{'env' if envelope else 'plain'}-{uuid.uuid4().hex[:6]}"
            prefix = f"{layout}-{'env' if envelope else 'plain'}-{fmt.lower()}"
            clause, props = _clauses(layout, envelope, fmt)
            tail = f"{clause} STOREAS {fmt} PROPERTIES({props})"
            by_string = (fmt, layout) in STRING_CASES
            statements[by_string].append(f"INSERT INTO arch:{prefix} SELECT * FROM `{topic}` {tail}")  # noqa: S608
            arch.cases[(fmt, layout, envelope)] = {
                "topic": topic,
                "replay": f"INSERT INTO {{target}} SELECT * FROM arch:{prefix} {tail}",  # noqa: S608
                "string": by_string,
            }
    topics = [c["topic"] for c in arch.cases.values()]
    for fut in admin.create_topics([NewTopic(t, num_partitions=PARTS) for t in topics]).values():
        fut.result(10)
    for t in topics:
        produce(kafka_bootstrap, t, records)
    sinks = []
    for by_string, stmts in statements.items():
        mine = [c["topic"] for c in arch.cases.values() if c["string"] == by_string]
        extra = {"value.converter": STRING} if by_string else {}
        sinks.append(
            RunningSink(make_config(sink_props(str(root), mine, ";\n".join(stmts), **extra)), kafka_bootstrap)
        )
    storage = StorageSettings(kind="local", root=str(root))

    def archived(case: dict[str, Any]) -> int:
        (plan,) = parse_replay(case["replay"].format(target="x"))
        if not (root / "arch").is_dir():
            return 0
        return sum(len(read_records(plan, storage, f)) for f in list_committed(plan, storage))

    try:
        wait_for(lambda: all(archived(c) == N for c in arch.cases.values()), 60, "every case archived")
    finally:
        for sink in sinks:
            sink.join()
    assert all(sink.error is None for sink in sinks), [sink.error for sink in sinks]
    return arch


def _replay_into(
    kafka_bootstrap: str, topic_factory: Any, arch: Archive, case: dict[str, Any], parts: int = PARTS
) -> str:
    target = topic_factory("rb", partitions=parts)
    config = {
        "connect.s3.kcql": case["replay"].format(target=target),
        "connect.storage": "local",
        "connect.local.root": str(arch.root),
        **({"value.converter": STRING} if case["string"] else {}),
    }
    progress = replay(
        config, ReplayOptions(kafka_bootstrap, name=f"rt-{uuid.uuid4().hex[:8]}", batch=15), progress_out=None
    )
    assert progress.records == N
    return target


@pytest.mark.parametrize(("fmt", "layout"), ENVELOPE_CASES)
def test_envelope_round_trip_is_record_for_record(kafka_bootstrap, topic_factory, archive, fmt, layout):
    case = archive.cases[(fmt, layout, True)]
    target = _replay_into(kafka_bootstrap, topic_factory, archive, case)
    expected: list[Rec] = sorted(read_topic(kafka_bootstrap, case["topic"]), key=lambda r: (r[0], r[4]))
    got = read_topic(kafka_bootstrap, target)
    # same records, same partition, and in the same order within each partition
    assert [r for r in got if r[0] == 0] == [r for r in expected if r[0] == 0]
    assert [r for r in got if r[0] == 1] == [r for r in expected if r[0] == 1]
    assert len(got) == N


@pytest.mark.parametrize(("fmt", "layout"), PLAIN_CASES + STRING_CASES)
def test_without_envelope_the_value_and_partition_come_back(
    kafka_bootstrap, topic_factory, archive, fmt, layout
):
    case = archive.cases[(fmt, layout, False)]
    target = _replay_into(kafka_bootstrap, topic_factory, archive, case)
    source = read_topic(kafka_bootstrap, case["topic"])
    got = read_topic(kafka_bootstrap, target)
    assert Counter((r[0], r[2]) for r in got) == Counter((r[0], r[2]) for r in source)
    # key and headers are not in the file; the timestamp is the time of the replay
    assert all(r[1] is None and r[3] == () for r in got)
    if layout == "default":  # per-partition order too, when files hold consecutive offsets
        for p in range(PARTS):
            assert [r[2] for r in got if r[0] == p] == [r[2] for r in source if r[0] == p]


def test_fewer_target_partitions_fold_partitions_modulo(kafka_bootstrap, topic_factory, archive):
    case = archive.cases[("JSON", "default", True)]
    target = _replay_into(kafka_bootstrap, topic_factory, archive, case, parts=1)
    got = read_topic(kafka_bootstrap, target)
    assert {r[0] for r in got} == {0}
    assert Counter(r[2] for r in got) == Counter(r[2] for r in read_topic(kafka_bootstrap, case["topic"]))


def test_second_run_replays_nothing_and_new_name_replays_again(kafka_bootstrap, topic_factory, archive):
    case = archive.cases[("AVRO", "values", True)]
    target = topic_factory("rb", partitions=PARTS)
    config = {
        "connect.s3.kcql": case["replay"].format(target=target),
        "connect.storage": "local",
        "connect.local.root": str(archive.root),
    }
    name = f"again-{uuid.uuid4().hex[:8]}"
    first = replay(config, ReplayOptions(kafka_bootstrap, name=name, batch=10), progress_out=None)
    second = replay(config, ReplayOptions(kafka_bootstrap, name=name, batch=10), progress_out=None)
    assert (first.records, second.records) == (N, 0)
    assert len(read_topic(kafka_bootstrap, target)) == N
    # a new name starts after what the target holds: identical records there are not taken for its own
    third = replay(config, ReplayOptions(kafka_bootstrap, name=f"{name}-b", batch=10), progress_out=None)
    assert third.records == N
    assert len(read_topic(kafka_bootstrap, target)) == 2 * N


@pytest.mark.parametrize("layout", ["default", "values"])
def test_until_stops_at_an_offset_and_a_later_run_continues_exactly_there(
    kafka_bootstrap, topic_factory, archive, layout
):
    case = archive.cases[("JSON", layout, True)]
    target = topic_factory("rb", partitions=PARTS)
    config = {
        "connect.s3.kcql": case["replay"].format(target=target),
        "connect.storage": "local",
        "connect.local.root": str(archive.root),
    }
    name = f"until-{uuid.uuid4().hex[:8]}"
    # offsets 0..19 in each of the 2 partitions; files of 7 records, so offset 9 is inside a file
    first = replay(
        config, ReplayOptions(kafka_bootstrap, name=name, batch=4, until=Until(offset=9)), progress_out=None
    )
    assert first.records == 20
    rest = replay(config, ReplayOptions(kafka_bootstrap, name=name, batch=4), progress_out=None)
    assert rest.records == N - 20
    expected = read_topic(kafka_bootstrap, case["topic"])
    got = read_topic(kafka_bootstrap, target)
    for p in range(PARTS):
        assert [r for r in got if r[0] == p] == sorted((r for r in expected if r[0] == p), key=lambda r: r[4])


def test_a_missing_target_topic_is_named_and_not_created(kafka_bootstrap, archive):
    from confluent_kafka.admin import AdminClient

    from sink.replay.producer import ReplayKafkaError

    case = archive.cases[("JSON", "default", True)]
    missing = f"no-such-{uuid.uuid4().hex[:6]}"
    config = {
        "connect.s3.kcql": case["replay"].format(target=missing),
        "connect.storage": "local",
        "connect.local.root": str(archive.root),
    }
    with pytest.raises(ReplayKafkaError, match=f"target topic '{missing}' does not exist; create it first"):
        replay(config, ReplayOptions(kafka_bootstrap, name="missing"), progress_out=None)
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    assert missing not in topics


def test_follow_with_idle_timeout_ends_after_the_archive_is_replayed(kafka_bootstrap, topic_factory, archive):
    case = archive.cases[("PARQUET", "default", True)]
    target = topic_factory("rb", partitions=PARTS)
    config = {
        "connect.s3.kcql": case["replay"].format(target=target),
        "connect.storage": "local",
        "connect.local.root": str(archive.root),
    }
    options = ReplayOptions(
        kafka_bootstrap, name=f"idle-{uuid.uuid4().hex[:6]}", follow=True, poll_interval=0.1, idle_timeout=0.5
    )
    assert replay(config, options, progress_out=None).records == N
    assert len(read_topic(kafka_bootstrap, target)) == N
