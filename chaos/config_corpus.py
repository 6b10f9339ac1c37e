"""A corpus of broken connector configs and KCQL statements, each with what its error must name.

Used by ``tests/integration/test_reliability_config.py`` through ``kcql-sink run`` (exit 1, the
key or KCQL position named, no traceback, no secret) and through the REST worker (400, never a
500). Each case starts from :data:`BASE` (a valid local-storage config) and overrides or removes
keys, so every case has exactly the one defect it is about.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BASE", "CORPUS", "SECRET", "BrokenConfig"]

SECRET = "corpus-secret-value-9f2c"  # noqa: S105 - a canary: must never appear in any output

BASE: dict[str, str] = {
    "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
    "topics": "orders",
    "connect.s3.kcql": "INSERT INTO bkt:p SELECT * FROM orders STOREAS `JSON`",
    "connect.storage": "local",
    "connect.local.root": "/tmp/kcql-corpus-out",  # noqa: S108 - never written: every case fails first
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "false",
}

_S3 = {
    "connect.storage": "s3",
    "connect.s3.aws.region": "us-east-1",
    "connect.s3.aws.auth.mode": "Credentials",
    "connect.s3.aws.access.key": "AKIACORPUS",
    "connect.s3.aws.secret.key": SECRET,
    "connect.s3.custom.endpoint": "http://127.0.0.1:9",
}


@dataclass(frozen=True)
class BrokenConfig:
    """One defect: ``set`` overrides BASE, ``drop`` removes keys, ``names`` must all be in the error."""

    id: str
    set: dict[str, str] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    def props(self) -> dict[str, str]:
        """The full config of this case."""
        out = {k: v for k, v in BASE.items() if k not in self.drop}
        out.update(self.set)
        return out


def _kcql(case_id: str, kcql: str, *names: str) -> BrokenConfig:
    return BrokenConfig(case_id, {"connect.s3.kcql": kcql}, names=("connect.s3.kcql", *names))


CORPUS: tuple[BrokenConfig, ...] = (
    # --- KCQL syntax ---------------------------------------------------------------------------
    _kcql(
        "kcql-empty",
        "",
    ),
    _kcql("kcql-garbage", "hello world", "line 1"),
    _kcql("kcql-select-first", "SELECT * FROM orders", "line 1"),
    _kcql("kcql-no-select", "INSERT INTO bkt:p FROM orders", "line 1"),
    _kcql("kcql-no-from", "INSERT INTO bkt:p SELECT *", "line 1"),
    _kcql("kcql-no-target", "INSERT INTO SELECT * FROM orders", "line 1"),
    _kcql("kcql-unclosed-backtick", "INSERT INTO bkt:p SELECT * FROM `orders", "line 1"),
    _kcql(
        "kcql-unclosed-properties",
        "INSERT INTO bkt:p SELECT * FROM orders PROPERTIES('flush.count'=1",
        "line 1",
    ),
    _kcql(
        "kcql-properties-no-value",
        "INSERT INTO bkt:p SELECT * FROM orders PROPERTIES('flush.count')",
        "line 1",
    ),
    _kcql("kcql-trailing-junk", "INSERT INTO bkt:p SELECT * FROM orders STOREAS `JSON` garbage", "line 1"),
    _kcql(
        "kcql-double-storeas",
        "INSERT INTO bkt:p SELECT * FROM orders STOREAS `JSON` STOREAS `AVRO`",
        "line 1",
    ),
    _kcql("kcql-partitionby-empty", "INSERT INTO bkt:p SELECT * FROM orders PARTITIONBY", "line 1"),
    _kcql("kcql-multiline-error", "INSERT INTO bkt:p\nSELECT * FROM orders\nSTOREAS `JSON` ???", "line 3"),
    _kcql(
        "kcql-control-chars",
        "INSERT INTO bkt:p SELECT * FROM orders\x00\x07",
    ),
    _kcql("kcql-unicode-junk", "INSERT INTO bkt:p SELECT * FROM orders STOREAS `JSON` ☃☃", "line 1"),
    _kcql(
        "kcql-huge",
        "INSERT INTO bkt:p SELECT * FROM orders PARTITIONBY " + ",".join(["f"] * 5000) + " ???",  # noqa: S608
    ),
    _kcql("kcql-deep-parens", "INSERT INTO bkt:p SELECT * FROM orders PROPERTIES" + "(" * 3000),
    # --- KCQL semantics ------------------------------------------------------------------------
    _kcql("kcql-unknown-format", "INSERT INTO bkt:p SELECT * FROM orders STOREAS `XLSX`", "XLSX"),
    _kcql(
        "kcql-flush-count-zero",
        "INSERT INTO bkt:p SELECT * FROM orders PROPERTIES('flush.count'=0)",
        "flush.count",
    ),
    _kcql(
        "kcql-flush-count-neg",
        "INSERT INTO bkt:p SELECT * FROM orders PROPERTIES('flush.count'=-5)",
        "flush.count",
    ),
    _kcql(
        "kcql-flush-count-text",
        "INSERT INTO bkt:p SELECT * FROM orders PROPERTIES('flush.count'='many')",
        "flush.count",
    ),
    _kcql(
        "kcql-flush-size-neg",
        "INSERT INTO bkt:p SELECT * FROM orders PROPERTIES('flush.size'=-1)",
        "flush.size",
    ),
    _kcql(
        "kcql-flush-interval-text",
        "INSERT INTO bkt:p SELECT * FROM orders PROPERTIES('flush.interval'='soon')",
        "flush.interval",
    ),
    _kcql(
        "kcql-unknown-property",
        "INSERT INTO bkt:p SELECT * FROM orders PROPERTIES('flush.cuont'=5)",
        "flush.cuont",
    ),
    _kcql(
        "kcql-envelope-csv",
        "INSERT INTO bkt:p SELECT * FROM orders STOREAS `CSV` PROPERTIES('store.envelope'=true)",
        "envelope",
    ),
    _kcql(
        "kcql-bad-codec",
        "INSERT INTO bkt:p SELECT * FROM orders STOREAS `PARQUET` PROPERTIES('store.compression'='LZMA9')",
        "LZMA9",
    ),
    _kcql(
        "kcql-bad-bucket",
        "INSERT INTO Bad_Bucket!:p SELECT * FROM orders",
    ),
    BrokenConfig(
        "kcql-topic-mismatch",
        {"connect.s3.kcql": "INSERT INTO bkt:p SELECT * FROM other"},
        names=("topics", "orders"),
    ),
    _kcql(
        "kcql-bad-padding",
        "INSERT INTO bkt:p SELECT * FROM orders PROPERTIES('padding.length.offset'='twelve')",
        "padding",
    ),
    _kcql(
        "kcql-bad-bool",
        "INSERT INTO bkt:p SELECT * FROM orders PROPERTIES('store.envelope'='perhaps')",
        "store.envelope",
    ),
    # --- connector keys ------------------------------------------------------------------------
    BrokenConfig("no-kcql", drop=("connect.s3.kcql",), names=("connect.s3.kcql",)),
    BrokenConfig(
        "consumer-override-bad",
        {"consumer.override.session.timeout.ms": "abc"},
        names=("session.timeout.ms",),
    ),
    BrokenConfig("topics-and-regex", {"topics.regex": "ord.*"}, names=("topics.regex",)),
    BrokenConfig("bad-topics-regex", {"topics.regex": "ord(["}, drop=("topics",), names=("topics.regex",)),
    BrokenConfig("name-mismatch", {"name": "another-name"}, names=("name",)),
    BrokenConfig("errors-log-text", {"errors.log.enable": "perhaps"}, names=("errors.log.enable",)),
    BrokenConfig("tasks-max-zero", {"tasks.max": "0"}, names=("tasks.max",)),
    BrokenConfig("tasks-max-text", {"tasks.max": "several"}, names=("tasks.max",)),
    BrokenConfig("tasks-max-huge", {"tasks.max": "99999999999999999999"}, names=("tasks.max",)),
    BrokenConfig("storage-unknown", {"connect.storage": "ftp"}, names=("connect.storage",)),
    BrokenConfig("local-no-root", drop=("connect.local.root",), names=("connect.local.root",)),
    BrokenConfig(
        "value-converter-unknown", {"value.converter": "com.example.Nope"}, names=("value.converter",)
    ),
    BrokenConfig("key-converter-unknown", {"key.converter": "com.example.Nope"}, names=("key.converter",)),
    BrokenConfig(
        "avro-no-registry",
        {"value.converter": "io.confluent.connect.avro.AvroConverter"},
        names=("value.converter",),
    ),
    BrokenConfig(
        "schemas-enable-text", {"value.converter.schemas.enable": "maybe"}, names=("schemas.enable",)
    ),
    BrokenConfig("tolerance-unknown", {"errors.tolerance": "sometimes"}, names=("errors.tolerance",)),
    BrokenConfig(
        "dlq-without-tolerance",
        {"errors.deadletterqueue.topic.name": "dlq"},
        names=("errors.deadletterqueue.topic.name",),
    ),
    BrokenConfig(
        "dlq-replication-text",
        {
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "dlq",
            "errors.deadletterqueue.topic.replication.factor": "three",
        },
        names=("errors.deadletterqueue.topic.replication.factor",),
    ),
    BrokenConfig(
        "error-policy-unknown", {"connect.s3.error.policy": "PANIC"}, names=("connect.s3.error.policy",)
    ),
    BrokenConfig("max-retries-neg", {"connect.s3.max.retries": "-1"}, names=("connect.s3.max.retries",)),
    BrokenConfig(
        "null-values-unknown", {"behavior.on.null.values": "explode"}, names=("behavior.on.null.values",)
    ),
    BrokenConfig(
        "eos-text", {"connect.s3.exactly.once.enable": "sorta"}, names=("connect.s3.exactly.once.enable",)
    ),
    BrokenConfig(
        "commit-protocol-unknown", {"connect.s3.commit.protocol": "fast"},
        names=("connect.s3.commit.protocol",),
    ),
    BrokenConfig(
        "commit-protocol-needs-conditional",
        {"connect.s3.commit.protocol": "conditional", "connect.s3.conditional.writes": "false"},
        names=("connect.s3.commit.protocol",),
    ),
    BrokenConfig(
        "index-name-visible", {"connect.s3.indexes.name": "indexes"}, names=("connect.s3.indexes.name",)
    ),
    # --- S3 keys (the secret must never be echoed) ---------------------------------------------
    BrokenConfig(
        "s3-auth-unknown", {**_S3, "connect.s3.aws.auth.mode": "Magic"}, names=("connect.s3.aws.auth.mode",)
    ),
    BrokenConfig(
        "s3-credentials-no-secret",
        {**{k: v for k, v in _S3.items() if k != "connect.s3.aws.secret.key"}},
        names=("connect.s3.aws.secret.key",),
    ),
    BrokenConfig(
        "s3-endpoint-not-url",
        {**_S3, "connect.s3.custom.endpoint": "not a url"},
        names=("connect.s3.custom.endpoint",),
    ),
    BrokenConfig(
        "s3-retries-text",
        {**_S3, "connect.s3.http.max.retries": "lots"},
        names=("connect.s3.http.max.retries",),
    ),
    BrokenConfig(
        "s3-socket-timeout-zero",
        {**_S3, "connect.s3.http.socket.timeout": "0"},
        names=("connect.s3.http.socket.timeout",),
    ),
    BrokenConfig("s3-secret-twice", {**_S3, "aws.secret.key": SECRET + "-other"}, names=("aws.secret.key",)),
)
