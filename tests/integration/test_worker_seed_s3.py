"""The seed's ``curl -X POST -d @s3.json http://localhost:8083/connectors`` against the worker.

The blog's ``s3.json`` is POSTed as bytes (as curl sends it) with only the placeholders, the
registry URL and the SeaweedFS endpoint filled in: Lenses class, deprecated ``aws.*`` keys,
``WITH_FLUSH_COUNT = 5000`` and the Avro converter stay. The topic gets a unique name (the broker
is shared by the session). Output is read back with boto3 + fastavro.
"""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import fastavro
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from partitioners import is_data_key
from tests.integration._run_support import fast_consumer_overrides, wait_for
from tests.integration._worker_support import Worker

SEED = Path(__file__).parent.parent / "data" / "seed_s3.json"
VALUE_SCHEMA = (
    '{"type":"record","name":"myrecord","fields":[{"name":"id","type":"int"},{"name":"created","type":"string"},'
    '{"name":"product","type":"string"},{"name":"price","type":"double"}, {"name":"qty", "type":"int"}]}'
)
COUNT = 5000


def test_seed_s3_json_posted_to_the_worker(
    kafka_bootstrap,
    topic_factory,
    producer,
    s3_endpoint,
    s3_client,
    s3_bucket_factory,
    schema_registry_url,
    tmp_path,
):
    bucket = s3_bucket_factory("seedw")
    topic = topic_factory("orders")
    text = SEED.read_text()
    for placeholder, value in {
        "${BUCKET_NAME}": bucket,
        "${PREFIX_NAME}": "archive",
        "${YOUR_ACCESS_KEY}": s3_endpoint.access_key,
        "${YOUR_SECRET_KEY}": s3_endpoint.secret_key,
        "http://localhost:8081": schema_registry_url,
        "FROM orders": f"FROM `{topic}`",
        '"topics": "orders"': f'"topics": "{topic}"',
    }.items():
        text = text.replace(placeholder, value)
    doc = json.loads(text)
    name = f"{doc['name']}-{uuid.uuid4().hex[:6]}"
    doc["name"] = name
    doc["config"]["aws.custom.endpoint"] = s3_endpoint.url
    doc["config"]["aws.vhost.bucket"] = "true"
    doc["config"].update(fast_consumer_overrides())

    serialize = AvroSerializer(SchemaRegistryClient({"url": schema_registry_url}), VALUE_SCHEMA)
    ctx = SerializationContext(topic, MessageField.VALUE)
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
        producer.produce(topic, value=serialize(order, ctx))
    producer.flush(30)

    worker = Worker(tmp_path / "state", kafka_bootstrap, tmp_path / "worker.log")
    try:
        # validate first, as the Lenses docs suggest, then create exactly as the seed's curl does
        validated = worker.put(
            "/connector-plugins/S3SinkConnector/config/validate", json=doc["config"] | {"name": name}
        )
        assert validated.status_code == 200 and validated.json()["error_count"] == 0, validated.text
        created = worker.post(
            "/connectors", data=json.dumps(doc).encode(), headers={"Content-Type": "application/json"}
        )
        assert created.status_code == 201, created.text
        assert created.json()["config"]["aws.secret.key"] == "[hidden]"

        def data_keys() -> list[str]:
            listed = s3_client.list_objects_v2(Bucket=bucket).get("Contents", [])
            return [o["Key"] for o in listed if is_data_key(o["Key"], "archive")]

        wait_for(lambda: bool(data_keys()), timeout=120, what="a committed file")
        status = worker.wait_status(name, "RUNNING", "RUNNING")
        assert status["type"] == "sink"
        metrics = worker.get("/metrics").text
        assert f'kcql_sink_files_committed_total{{connector="{name}",task="0"}} 1.0' in metrics
        page = worker.get("/ui").text
        assert name in page and "archive/" in page  # the recent file is listed
    finally:
        assert worker.stop() == 0
    log = worker.log()
    assert s3_endpoint.secret_key not in log
    assert "Traceback" not in log
    keys = data_keys()
    assert len(keys) == 1 and keys[0].endswith(".avro")
    rows = list(fastavro.reader(io.BytesIO(s3_client.get_object(Bucket=bucket, Key=keys[0])["Body"].read())))
    assert rows == orders
