"""Storage backends behind one small interface (:class:`Storage`): a local directory and S3.

:func:`create_storage` builds the backend the connector config asks for (``connect.storage``).
"""

from __future__ import annotations

from sink.config.settings import StorageSettings
from sink.storage.base import (
    ObjectInfo,
    ObjectNotFound,
    PreconditionFailed,
    Storage,
    StorageError,
    StoredObject,
    TransientStorageError,
    map_exceptions,
)

__all__ = [
    "ObjectInfo",
    "ObjectNotFound",
    "PreconditionFailed",
    "Storage",
    "StorageError",
    "StoredObject",
    "TransientStorageError",
    "create_storage",
    "map_exceptions",
]


def create_storage(settings: StorageSettings) -> Storage:
    """The backend for ``settings.kind`` (``local`` needs ``local_root``)."""
    if settings.kind == "local":
        from sink.storage.local import LocalStorage

        if settings.local_root is None:
            raise StorageError("connect.local.root is required when connect.storage=local")
        return LocalStorage(settings.local_root)
    from sink.storage.s3 import S3Storage

    return S3Storage(settings.s3)
