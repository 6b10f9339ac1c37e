"""``example_key``: what ``kcql-sink kcql explain`` shows for each layout (a stable contract)."""

from __future__ import annotations

import pytest

from kcql.model import FileNaming, Padding
from partitioners import example_key

from .helpers import plan


@pytest.mark.parametrize(
    ("p", "ext", "expected"),
    [
        (plan(), "json", "streamReactorBackups/myTopic/0/000000000000_<minTs>_<maxTs>.json"),
        (plan(prefix=""), "json", "myTopic/0/000000000000_<minTs>_<maxTs>.json"),
        (plan(source="*"), "avro", "streamReactorBackups/<topic>/0/000000000000_<minTs>_<maxTs>.avro"),
        (
            plan(include_keys=True, source="*"),
            "json",
            "streamReactorBackups/topic=<topic>/partition=0/000000000000_<minTs>_<maxTs>.json",
        ),
        (
            plan(padding=Padding(offset=12, partition=12), key_suffix="-dc1"),
            "json",
            "streamReactorBackups/myTopic/000000000000/000000000000_<minTs>_<maxTs>-dc1.json",
        ),
        (
            plan("_value.a.b", "_key", "_header.h", "_date.uuuu"),
            "parquet",
            (
                "streamReactorBackups/a.b=<_value.a.b>/key=<_key>/h=<_header.h>/date=<_date.uuuu>"
                "/myTopic(0_000000000000).parquet"
            ),
        ),
        (
            plan("a.b", "_key.|x.y", "_topic", "_partition", include_keys=False),
            "csv",
            "streamReactorBackups/<a.b>/<_key.x.y>/myTopic/0/myTopic(0_000000000000).csv",
        ),
        (
            plan("_topic", "_partition", source="*", padding=Padding(offset=12, partition=3)),
            "json",
            "streamReactorBackups/topic=<topic>/partition=000/<topic>(000_000000000000).json",
        ),
        (plan(nopartition=True), "json", "streamReactorBackups/myTopic(0_000000000000).json"),
        (plan(nopartition=True, source="*"), "json", "streamReactorBackups/<topic>(0_000000000000).json"),
        (
            plan(prefix="", naming=FileNaming.CONFLUENT),
            "avro",
            "topics/myTopic/partition=0/myTopic+0+0000000000.avro",
        ),
        (
            plan("country", naming=FileNaming.CONFLUENT, source="*"),
            "json",
            "streamReactorBackups/<topic>/country=<country>/<topic>+0+0000000000.json",
        ),
        (
            plan(nopartition=True, naming=FileNaming.CONFLUENT, prefix=""),
            "json",
            "topics/myTopic+0+0000000000.json",
        ),
        (
            plan(source="_internal"),
            "json",
            "streamReactorBackups/%5Finternal/0/000000000000_<minTs>_<maxTs>.json",
        ),
    ],
)
def test_example_key(p, ext, expected):
    assert example_key(p, ext) == expected
