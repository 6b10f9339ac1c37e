"""The fault proxy names each request's S3 operation as the price list does (bench/s3_requests.py),
checked against requests botocore itself sends through the proxy to a tiny fake upstream."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest
from botocore.config import Config

from bench.s3_requests import price_per_request, summarise
from chaos.proxy import FaultProxy, s3_operation


class _Ok(BaseHTTPRequestHandler):
    """Answers every request with an empty 200 (enough for botocore to parse most operations)."""

    protocol_version = "HTTP/1.1"

    def _ok(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = b""
        if self.command == "GET" and "list-type=2" in self.path:
            body = b'<?xml version="1.0"?><ListBucketResult><IsTruncated>false</IsTruncated>'
            body += b"</ListBucketResult>"
        if self.command == "POST" and self.path.endswith("uploads"):
            body = (b'<?xml version="1.0"?><InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>'
                    b"<UploadId>u1</UploadId></InitiateMultipartUploadResult>")
        if "x-amz-copy-source" in self.headers:
            body = b'<?xml version="1.0"?><CopyObjectResult><ETag>"e"</ETag></CopyObjectResult>'
        self.send_response(200)
        self.send_header("ETag", '"e"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _ok

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    try:
        with FaultProxy(f"http://127.0.0.1:{upstream.server_address[1]}") as fp:
            yield fp
    finally:
        upstream.shutdown()
        upstream.server_close()


def test_botocore_requests_are_named_by_operation_and_area(proxy: FaultProxy) -> None:
    client = boto3.client(
        "s3", endpoint_url=proxy.url, region_name="us-east-1", aws_access_key_id="k",
        aws_secret_access_key="s",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    client.put_object(Bucket="b", Key="data/x.json", Body=b"1", IfNoneMatch="*")
    client.put_object(Bucket="b", Key=".indexes/c/t/0.json", Body=b"{}")
    temp = {"Bucket": "b", "Key": ".temp-upload/c/t/0/u"}
    client.copy_object(Bucket="b", Key="data/y.json", CopySource=temp)
    client.head_object(Bucket="b", Key="data/x.json")
    client.get_object(Bucket="b", Key=".indexes/c/t/0.json")
    client.delete_object(Bucket="b", Key=".temp-upload/c/t/0/u")
    client.list_objects_v2(Bucket="b", Prefix=".temp-upload/")
    client.head_bucket(Bucket="b")
    client.create_multipart_upload(Bucket="b", Key="data/big")
    client.upload_part(Bucket="b", Key="data/big", UploadId="u1", PartNumber=1, Body=b"x")
    assert dict(proxy.operations_of("b", by_area=True)) == {
        "data:PutObject": 1, "index:PutObject": 1, "data:CopyObject": 1, "data:HeadObject": 1,
        "index:GetObject": 1, "temp:DeleteObject": 1, "bucket:ListObjectsV2": 1, "bucket:HeadBucket": 1,
        "data:CreateMultipartUpload": 1, "data:UploadPart": 1,
    }
    assert proxy.operations_of("other") == {}


def test_operation_names_and_prices() -> None:
    assert s3_operation("POST", "/b/k?uploadId=1", {}) == ("b", "CompleteMultipartUpload")
    assert s3_operation("DELETE", "/b/k?uploadId=1", {}) == ("b", "AbortMultipartUpload")
    assert s3_operation("PUT", "/b/k?partNumber=2&uploadId=1", {"x-amz-copy-source": "/b/s"}) == (
        "b", "UploadPartCopy",
    )
    assert price_per_request("PutObject") == price_per_request("CopyObject") == 0.005 / 1000
    assert price_per_request("ListObjectsV2") == 0.005 / 1000
    assert price_per_request("HeadObject") == price_per_request("GetObject") == 0.0004 / 1000
    assert price_per_request("DeleteObject") == 0.0


def test_summary_per_file_and_per_million_records() -> None:
    from collections import Counter

    by_area = Counter(
        {"bucket:HeadBucket": 1, "index:GetObject": 2, "index:PutObject": 22, "data:PutObject": 10}
    )
    requests = Counter({"HeadBucket": 1, "GetObject": 2, "PutObject": 32})
    summary = summarise(requests, by_area, files=10, records=1000, partitions=2)
    # start-up: HEAD bucket, an index GET and a take-over PUT per partition; the rest is 3 per file
    assert summary["startup_requests"] == 5
    assert summary["per_file"] == {"GetObject": 0.2, "HeadBucket": 0.1, "PutObject": 3.2, "total": 3.5,
                                   "commit": 3.0}
    summary = summarise(Counter({"PutObject": 30, "HeadObject": 10}), Counter(), files=10, records=1000,
                        partitions=0)
    assert summary["per_file"] == {"HeadObject": 1.0, "PutObject": 3.0, "total": 4.0, "commit": 4.0}
    assert summary["per_million_records"]["total"] == 40_000
    assert summary["usd_per_million_records"] == pytest.approx((30 * 0.005 + 10 * 0.0004) / 1000 * 1000)
