"""The seed's ``s3.json`` (the Lenses blog's config) runs unchanged through ``kcql-sink run``.

Only the placeholders, the Schema Registry URL and the S3 endpoint are filled in: the deprecated
short keys (``aws.access.key``, ``aws.auth.mode``, ...), the Lenses connector class and the legacy
``WITH_FLUSH_COUNT = 5000`` stay as the user wrote them. The records are the blog's ``orders``
Avro records; the output is read back with boto3 + fastavro, and the process is stopped with
SIGTERM, which must exit 0 after committing.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import fastavro
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from partitioners import is_data_key
from tests.integration._run_support import fast_consumer_overrides, wait_for

SEED = Path(__file__).parent.parent / "data" / "seed_s3.json"
VALUE_SCHEMA = (
    '{"type":"record","name":"myrecord","fields":[{"name":"id","type":"int"},{"name":"created","type":"string"},'
    '{"name":"product","type":"string"},{"name":"price","type":"double"}, {"name":"qty", "type":"int"}]}'
)
COUNT = 5000  # the seed's WITH_FLUSH_COUNT: one full file


def test_seed_s3_json_works_unchanged(
    kafka_bootstrap, producer, s3_endpoint, s3_client, s3_bucket_factory, schema_registry_url, tmp_path
):
    bucket = s3_bucket_factory("seed")
    text = SEED.read_text()
    for placeholder, value in {
        "${BUCKET_NAME}": bucket,
        "${PREFIX_NAME}": "archive",
        "${YOUR_ACCESS_KEY}": s3_endpoint.access_key,
        "${YOUR_SECRET_KEY}": s3_endpoint.secret_key,
        "http://localhost:8081": schema_registry_url,
    }.items():
        text = text.replace(placeholder, value)
    doc = json.loads(text)
    # pointing at the test endpoint, with the seed-era keys (aliases) a user of that config would add
    doc["config"]["aws.custom.endpoint"] = s3_endpoint.url
    doc["config"]["aws.vhost.bucket"] = "true"
    doc["config"].update(fast_consumer_overrides())
    config = tmp_path / "s3.json"
    config.write_text(json.dumps(doc, indent=2))

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic("orders", num_partitions=1)])["orders"].result(timeout=10)
    serialize = AvroSerializer(SchemaRegistryClient({"url": schema_registry_url}), VALUE_SCHEMA)
    ctx = SerializationContext("orders", MessageField.VALUE)
    orders = [
        {
            "id": i,
            "created": "2016-05-06 13:53:00",
            "product": "OP-DAX-P-20150201-95.7",
            "price": 94.2,
            "qty": i,
        }
        for i in range(COUNT)
    ]
    for order in orders:
        producer.produce("orders", value=serialize(order, ctx))
    producer.flush(30)

    log = (tmp_path / "run.log").open("w+")
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sink.cli", "run", str(config), "--bootstrap-servers", kafka_bootstrap],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=Path(__file__).parent.parent.parent,
    )
    try:

        def data_keys() -> list[str]:
            listed = s3_client.list_objects_v2(Bucket=bucket).get("Contents", [])
            return [o["Key"] for o in listed if is_data_key(o["Key"], "archive")]

        wait_for(lambda: bool(data_keys()) or proc.poll() is not None, timeout=120, what="a committed file")
        assert proc.poll() is None, log.seek(0) or log.read()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log.seek(0)
    output = log.read()
    assert "aws.access.key is deprecated: use connect.s3.aws.access.key" in output
    assert s3_endpoint.secret_key not in output  # secrets never logged
    assert "Traceback" not in output
    keys = data_keys()
    assert len(keys) == 1 and keys[0].endswith(".avro")
    body = s3_client.get_object(Bucket=bucket, Key=keys[0])["Body"].read()
    rows = list(fastavro.reader(io.BytesIO(body)))
    assert rows == orders
