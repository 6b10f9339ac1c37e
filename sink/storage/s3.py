"""S3 (and S3-compatible stores) through boto3.

* Credentials: ``Credentials`` mode passes the configured keys; ``Default`` uses boto3's default
  chain (environment, profile, web identity, instance role). Keys are never logged.
* Retries: botocore's *standard* mode (exponential backoff with jitter, retries throttling and
  5xx) with ``connect.s3.http.max.retries``; timeouts from ``connect.s3.http.*.timeout``.
* Large files go up as multipart uploads (``TransferConfig``), so no single request carries a
  whole 500 MB file and a failed part is retried alone.
* Files streamed while they are written (:mod:`sink.commit.parts`) use the multipart calls
  directly (CreateMultipartUpload, UploadPart, CompleteMultipartUpload, AbortMultipartUpload,
  ListMultipartUploads), errors mapped like every other call.
* Conditional writes use ``IfNoneMatch``/``IfMatch`` on ``PutObject`` and ``CopySourceIfMatch`` on
  ``CopyObject`` (supported by AWS since 2024 and by SeaweedFS; tested against SeaweedFS).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import boto3
from boto3.exceptions import S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

from sink.config.buckets import bucket_name_problem
from sink.config.secrets import HIDDEN
from sink.config.settings import S3Settings
from sink.storage.base import (
    AccessDenied,
    MultipartUpload,
    ObjectInfo,
    ObjectNotFound,
    PreconditionFailed,
    Storage,
    StorageError,
    StoredObject,
    TransientStorageError,
    map_exceptions,
)

__all__ = ["S3Storage"]

log = logging.getLogger(__name__)

_PRECONDITION_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412"}
_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound", "NoSuchUpload"}
_DENIED_CODES = {
    "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled", "AccountProblem",
    "InvalidToken", "ExpiredToken", "TokenRefreshRequired", "InvalidSecurity", "NoSuchBucket",
}
"""Refusals a person fixes (credentials, a policy, a missing bucket): :class:`AccessDenied`."""
_TRANSIENT_CODES = {
    "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "RequestTimeTooSkewed",
    "InternalError", "ServiceUnavailable", "OperationAborted",
}


def _classify(exc: BaseException) -> type[StorageError] | None:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if code in _PRECONDITION_CODES or (status in (409, 412) and code != "BucketAlreadyExists"):
            return PreconditionFailed
        if code in _NOT_FOUND_CODES:
            return ObjectNotFound
        if code in _DENIED_CODES or status in (401, 403):
            return _Denied
        if code in _TRANSIENT_CODES or status >= 500 or status == 429:
            return TransientStorageError
        return StorageError
    if isinstance(exc, EndpointConnectionError | ConnectionClosedError | ConnectTimeoutError
                  | ReadTimeoutError):
        return TransientStorageError
    if isinstance(exc, S3UploadFailedError):  # a multipart part failed after botocore's retries
        return TransientStorageError
    if isinstance(exc, NoCredentialsError):
        return StorageError
    if isinstance(exc, BotoCoreError):
        return StorageError
    return None


class _Denied(AccessDenied):
    """An :class:`AccessDenied` whose message says what to check (it already names the request:
    operation, bucket and key)."""

    def __init__(self, message: str) -> None:
        if "NoSuchBucket" in message:
            hint = "the bucket does not exist: create it, or fix the bucket in connect.s3.kcql"
        else:
            hint = (
                "S3 refused it: check connect.s3.aws.access.key / connect.s3.aws.secret.key and that the "
                "bucket's policy allows this action"
            )
        super().__init__(f"{message} ({hint})")


class _SecretRedactor(logging.Filter):
    """Masks credential values in records of the AWS SDK's own loggers.

    At DEBUG, botocore logs every request with its headers, and the ``Authorization`` header
    carries the access key id (``Credential=AKIA.../...``). A logger's filters apply only to the
    records it creates itself, not to those of its children, so the filter is attached to each
    SDK logger that exists once the client is built (they are created at import time).
    """

    _PREFIXES = ("botocore", "boto3", "s3transfer", "urllib3")

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def add(self, *values: str | None) -> None:
        self.secrets.update(v for v in values if v and len(v) >= 4)
        manager = logging.Logger.manager
        names = [n for n in list(manager.loggerDict) if n.split(".")[0] in self._PREFIXES]
        for name in [*self._PREFIXES, *names]:
            logger = logging.getLogger(name)
            if self not in logger.filters:
                logger.addFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken record is not ours to fix; let it through
            return True
        if any(secret in message for secret in self.secrets):
            for secret in self.secrets:
                message = message.replace(secret, HIDDEN)
            record.msg, record.args = message, None
        return True


_REDACTOR = _SecretRedactor()


class S3Storage(Storage):
    """Buckets and keys on S3 or an S3-compatible endpoint."""

    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        self.supports_conditional_writes = settings.conditional_writes
        config = Config(
            retries={"mode": "standard", "max_attempts": settings.max_retries + 1},
            connect_timeout=settings.connection_timeout_ms / 1000,
            read_timeout=settings.socket_timeout_ms / 1000,
            s3={"addressing_style": "path" if settings.path_style else "auto"},
            # Checksums only "when required": several S3-compatible stores reject the new
            # default CRC trailers on streamed uploads.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        kwargs: dict[str, Any] = {"config": config}
        if settings.region:
            kwargs["region_name"] = settings.region
        elif settings.endpoint:
            kwargs["region_name"] = "us-east-1"  # S3-compatible stores ignore it, botocore needs one
        if settings.endpoint:
            kwargs["endpoint_url"] = settings.endpoint
        if settings.auth_mode == "Credentials" and settings.access_key and settings.secret_key:
            kwargs["aws_access_key_id"] = settings.access_key.reveal()
            kwargs["aws_secret_access_key"] = settings.secret_key.reveal()
        self._client = boto3.session.Session().client("s3", **kwargs)
        if settings.access_key and settings.secret_key:
            _REDACTOR.add(settings.access_key.reveal(), settings.secret_key.reveal())
        self._transfer = TransferConfig(
            multipart_threshold=settings.multipart_threshold,
            multipart_chunksize=settings.multipart_chunk,
            use_threads=False,
        )

    def __repr__(self) -> str:
        return f"S3Storage(endpoint={self.settings.endpoint!r}, region={self.settings.region!r})"

    def uri(self, bucket: str, key: str = "") -> str:
        return f"s3://{bucket}/{key}"

    @staticmethod
    def _conditions(if_none_match: bool, if_match: str | None) -> dict[str, str]:
        args: dict[str, str] = {}
        if if_none_match:
            args["IfNoneMatch"] = "*"
        if if_match is not None:
            args["IfMatch"] = if_match
        return args

    def check_bucket(self, bucket: str) -> None:
        problem = bucket_name_problem(bucket)
        if problem:
            raise StorageError(problem)
        try:
            with map_exceptions(f"head bucket {bucket}", _classify):
                self._client.head_bucket(Bucket=bucket)
        except ObjectNotFound:
            raise StorageError(
                f"bucket {bucket!r} does not exist at {self.settings.endpoint or 'AWS S3'}; create it first"
            ) from None

    def put_file(
        self, bucket: str, key: str, path: Path, *, if_none_match: bool = False, if_match: str | None = None,
        adopt: bool = False, etag: bool = True,
    ) -> str:
        conditions = self._conditions(if_none_match, if_match)
        with map_exceptions(f"put {self.uri(bucket, key)}", _classify):
            size = Path(path).stat().st_size
            if conditions or size < self.settings.multipart_threshold:
                with Path(path).open("rb") as body:
                    response = self._client.put_object(Bucket=bucket, Key=key, Body=body, **conditions)
                return str(response["ETag"])
            self._client.upload_file(str(path), bucket, key, Config=self._transfer)
            return str(self._client.head_object(Bucket=bucket, Key=key)["ETag"])

    def put_bytes(
        self, bucket: str, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        conditions = self._conditions(if_none_match, if_match)
        with map_exceptions(f"put {self.uri(bucket, key)}", _classify):
            response = self._client.put_object(Bucket=bucket, Key=key, Body=data, **conditions)
        return str(response["ETag"])

    def get(self, bucket: str, key: str) -> StoredObject:
        with map_exceptions(f"get {self.uri(bucket, key)}", _classify):
            response = self._client.get_object(Bucket=bucket, Key=key)
            data = response["Body"].read()
        return StoredObject(data, str(response["ETag"]))

    def head(self, bucket: str, key: str) -> ObjectInfo | None:
        try:
            with map_exceptions(f"head {self.uri(bucket, key)}", _classify):
                response = self._client.head_object(Bucket=bucket, Key=key)
        except ObjectNotFound:
            return None
        return ObjectInfo(key, int(response["ContentLength"]), str(response["ETag"]))

    max_single_copy: int = 5 * 1024**3
    """CopyObject refuses sources above 5 GiB; larger objects are copied in parts (UploadPartCopy,
    with the same ``CopySourceIfMatch`` on every part). Lowered by tests to exercise that path."""

    def copy(self, bucket: str, source: str, dest: str, *, if_match: str | None = None) -> None:
        extra = {"CopySourceIfMatch": if_match} if if_match is not None else {}
        with map_exceptions(f"copy {self.uri(bucket, source)} to {dest}", _classify):
            info = self.head(bucket, source)
            if info is None:
                raise ObjectNotFound(f"copy source {self.uri(bucket, source)} does not exist")
            if info.size > self.max_single_copy:
                self._client.copy(
                    {"Bucket": bucket, "Key": source}, bucket, dest, ExtraArgs=extra, Config=self._transfer
                )
                return
            self._client.copy_object(
                Bucket=bucket, Key=dest, CopySource={"Bucket": bucket, "Key": source}, **extra
            )

    def delete(self, bucket: str, key: str) -> None:
        with map_exceptions(f"delete {self.uri(bucket, key)}", _classify):
            self._client.delete_object(Bucket=bucket, Key=key)

    def list(self, bucket: str, prefix: str = "") -> Iterator[ObjectInfo]:
        paginator = self._client.get_paginator("list_objects_v2")
        with map_exceptions(f"list {self.uri(bucket, prefix)}", _classify):
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    yield ObjectInfo(str(item["Key"]), int(item["Size"]), str(item.get("ETag", "")))

    supports_streaming = True

    def create_multipart(self, bucket: str, key: str) -> str:
        with map_exceptions(f"start multipart upload {self.uri(bucket, key)}", _classify):
            response = self._client.create_multipart_upload(Bucket=bucket, Key=key)
        return str(response["UploadId"])

    def upload_part(
        self, bucket: str, key: str, upload_id: str, number: int, data: BinaryIO, size: int
    ) -> str:
        with map_exceptions(f"upload part {number} of {self.uri(bucket, key)}", _classify):
            response = self._client.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data, ContentLength=size
            )
        return str(response["ETag"])

    def complete_multipart(
        self, bucket: str, key: str, upload_id: str, parts: Sequence[tuple[int, str]]
    ) -> str:
        with map_exceptions(f"complete multipart upload {self.uri(bucket, key)}", _classify):
            self._client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id,
                MultipartUpload={"Parts": [{"PartNumber": n, "ETag": etag} for n, etag in parts]},
            )
            # the etag a later CopySourceIfMatch compares with: the stored object's, as HEAD gives it
            return str(self._client.head_object(Bucket=bucket, Key=key)["ETag"])

    def abort_multipart(self, bucket: str, key: str, upload_id: str) -> None:
        try:
            with map_exceptions(f"abort multipart upload {self.uri(bucket, key)}", _classify):
                self._client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        except ObjectNotFound:
            pass  # already completed or aborted

    def list_multipart_uploads(self, bucket: str, prefix: str) -> Iterator[MultipartUpload]:
        paginator = self._client.get_paginator("list_multipart_uploads")
        with map_exceptions(f"list multipart uploads {self.uri(bucket, prefix)}", _classify):
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
                for item in page.get("Uploads", []):
                    yield MultipartUpload(str(item["Key"]), str(item["UploadId"]))

    def close(self) -> None:
        self._client.close()
