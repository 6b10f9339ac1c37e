"""The replay position topic on real Tansu: one partition per name's hash, read backwards at start."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sink.replay.position import Position
from sink.replay.producer import POSITION_PARTITIONS, KafkaSide, position_partition

WINDOW = 50


def _side(bootstrap: str, topic: str, name: str) -> KafkaSide:
    side = KafkaSide(bootstrap, name, topic, position_window=WINDOW)
    side.ensure_position_topic()
    side.init()
    return side


def _commit_positions(side: KafkaSide, n: int, mark: int) -> None:
    """``n`` transactions, each writing one position whose target offset is ``mark``."""
    for _ in range(n):
        position = Position(targets={"t": {0: mark}})
        side.begin(position)
        side.commit(position)


def _names_in(partition: int, count: int) -> list[str]:
    names = (f"pos-{uuid.uuid4().hex[:8]}" for _ in range(100_000))
    return [n for n in names if position_partition(n, POSITION_PARTITIONS) == partition][:count]


def test_a_start_reads_its_own_partition_backwards_to_its_latest_position(kafka_bootstrap):
    topic = f"_positions-{uuid.uuid4().hex[:6]}"
    busy, early, new = _names_in(3, 3)
    early_side = _side(kafka_bootstrap, topic, early)
    meta = early_side.admin.list_topics(topic, timeout=10).topics[topic]
    assert len(meta.partitions) == POSITION_PARTITIONS and early_side.position_partition == 3
    _commit_positions(early_side, 1, mark=7)  # an old position, far back
    busy_side = _side(kafka_bootstrap, topic, busy)
    _commit_positions(busy_side, 6 * WINDOW, mark=1)
    _commit_positions(busy_side, 1, mark=2)  # its latest
    early_side.close()
    busy_side.close()

    # a restart of the busy replay finds its latest position in the first window
    again = _side(kafka_bootstrap, topic, busy)
    got = again.read_position({})
    assert got.found and got.targets == {"t": {0: 2}}
    assert again.position_records_read <= 2 * WINDOW  # a window (control records take offsets too)

    # the early replay's position is found further back, windows growing eightfold
    back = _side(kafka_bootstrap, topic, early)
    got = back.read_position({})
    assert got.found and got.targets == {"t": {0: 7}}
    # each record read once: the windows step back without overlapping (re-reading a window to
    # the end each step would read ~550 here)
    assert back.position_records_read == 6 * WINDOW + 2

    # a first run reads its partition to the beginning and finds nothing of its own
    first = _side(kafka_bootstrap, topic, new)
    got = first.read_position({})
    assert not got.found and first.position_records_read >= 6 * WINDOW + 2

    # another partition's name reads none of this
    (elsewhere,) = _names_in(11, 1)
    other = _side(kafka_bootstrap, topic, elsewhere)
    assert not other.read_position({}).found and other.position_records_read == 0
    for side in (again, back, first, other):
        side.close()


def test_a_one_partition_position_topic_of_earlier_versions_is_read_and_written_in_partition_0(
    kafka_bootstrap,
):
    topic = f"_positions-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(10)
    name = f"pos-{uuid.uuid4().hex[:8]}"
    # as an earlier version wrote it: key = the name, partition 0, outside a transaction here
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, Position(targets={"t": {0: 5}}).to_bytes(), name.encode(), partition=0)
    producer.flush(10)
    side = _side(kafka_bootstrap, topic, name)
    assert side.position_partition == 0
    got = side.read_position({})
    assert got.found and got.targets == {"t": {0: 5}}
    _commit_positions(side, 1, mark=6)
    side.close()
    assert _side(kafka_bootstrap, topic, name).read_position({}).targets == {"t": {0: 6}}
