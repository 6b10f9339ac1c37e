"""Local-directory storage: ``<root>/<bucket>/<key>``, with the same guarantees as S3.

* Atomic visibility: every object is written to a hidden temporary file in the destination's
  directory, fsynced, renamed over the key, and the directory is fsynced, so a crash leaves either
  the old object or the new one, never a torn file.
* Conditional writes: ``if_none_match``/``if_match`` are checked and the rename done while holding
  an exclusive ``fcntl`` lock on the key's lock stripe (``<root>/.kcql-locks/<bucket>/NNN.lock``),
  so two processes cannot both pass the check. Etags are the MD5 of the content, like S3's
  single-part etags: rewriting identical bytes keeps the etag (as on S3). The index never
  repeats its bytes, because every take-over raises its epoch.
* ``copy`` hard-links when it can (cheap for big files), else copies the bytes.

Temporary files are named ``.kcql-tmp-*`` (a dot-prefixed name: never data for
``partitioners.is_data_key``) and are skipped by :meth:`LocalStorage.list`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

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

__all__ = ["LocalStorage"]

log = logging.getLogger(__name__)

_TMP_PREFIX = ".kcql-tmp-"
_LOCK_DIR = ".kcql-locks"
_CHUNK = 1 << 20
_LOCK_STRIPES = 64


def _classify(exc: BaseException) -> type[StorageError] | None:
    if isinstance(exc, FileNotFoundError):
        return ObjectNotFound
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EAGAIN, errno.EBUSY):
            return TransientStorageError
        return StorageError
    return None


def _md5_file(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return f'"{digest.hexdigest()}"'


def _md5_bytes(data: bytes) -> str:
    return f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalStorage(Storage):
    """Buckets are directories under ``root``; keys are ``/``-separated relative paths."""

    supports_conditional_writes = True
    supports_streaming = False
    """Staging and target share the disk: streaming parts would not free any of it."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self._etags: dict[Path, tuple[tuple[int, int, int], str]] = {}
        """Etags of files this process wrote, by (inode, size, mtime): a commit checks the etag of
        a multi-megabyte upload it made milliseconds earlier (``copy(if_match=...)``), and
        re-reading the file for that was a third of the commit's time. Any change to the file
        (another writer replaces it: new inode; edits: new size or mtime) misses the cache."""

    def _etag(self, path: Path) -> str:
        """The MD5 etag of ``path``, from the cache when the file is unchanged since we wrote it."""
        info = path.stat()
        signature = (info.st_ino, info.st_size, info.st_mtime_ns)
        hit = self._etags.get(path)
        if hit is not None and hit[0] == signature:
            return hit[1]
        return _md5_file(path)

    def _remember(self, path: Path, etag: str) -> None:
        if len(self._etags) >= 4096:  # temporary uploads are deleted soon after: keep it small
            self._etags.clear()
        info = path.stat()
        self._etags[path] = ((info.st_ino, info.st_size, info.st_mtime_ns), etag)

    def __repr__(self) -> str:
        return f"LocalStorage({str(self.root)!r})"

    # -- paths -------------------------------------------------------------------------------

    def uri(self, bucket: str, key: str = "") -> str:
        return (self.root / bucket / key).as_uri() if key else (self.root / bucket).as_uri()

    def _bucket_dir(self, bucket: str) -> Path:
        if not bucket or "/" in bucket or bucket in (".", "..") or bucket.startswith("."):
            raise StorageError(f"invalid bucket {bucket!r} for local storage: not a plain directory name")
        return self.root / bucket

    def _path(self, bucket: str, key: str) -> Path:
        segments = key.split("/")
        if not key or key.startswith("/") or any(s in ("", ".", "..") for s in segments):
            raise StorageError(f"invalid object key {key!r}: empty, '.' or '..' segments cannot be stored")
        return self._bucket_dir(bucket).joinpath(*segments)

    @contextlib.contextmanager
    def _key_lock(self, bucket: str, *keys: str) -> Iterator[None]:
        """Exclusive flock on the lock stripes of ``keys`` (taken in a fixed order: no deadlock).

        Keys hash onto :data:`_LOCK_STRIPES` lock files per bucket, so unique keys (temporary
        uploads) do not leave one lock file each behind.
        """
        lock_dir = self.root / _LOCK_DIR / bucket
        lock_dir.mkdir(parents=True, exist_ok=True)
        stripes = sorted({
            int.from_bytes(hashlib.sha1(k.encode("utf-8"), usedforsecurity=False).digest()[:4], "big")
            % _LOCK_STRIPES
            for k in keys
        })
        fds: list[int] = []
        try:
            for stripe in stripes:
                fd = os.open(lock_dir / f"{stripe:03d}.lock", os.O_RDWR | os.O_CREAT, 0o644)
                fds.append(fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            for fd in reversed(fds):
                os.close(fd)  # closing releases the flock

    def _check(self, target: Path, bucket: str, key: str, if_none_match: bool, if_match: str | None) -> None:
        if if_none_match and target.exists():
            raise PreconditionFailed(f"{self.uri(bucket, key)} already exists (if-none-match)")
        if if_match is not None:
            if not target.exists():
                raise PreconditionFailed(f"{self.uri(bucket, key)} does not exist (if-match {if_match})")
            current = _md5_file(target)
            if current != if_match:
                raise PreconditionFailed(f"{self.uri(bucket, key)} changed: etag {current} is not {if_match}")

    def _atomic_write(self, target: Path, fill: Callable[[BinaryIO], object]) -> None:
        """Write a temp file next to ``target`` with ``fill(fh)``, fsync, rename, fsync the directory."""
        for attempt in range(3):
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.parent / f"{_TMP_PREFIX}{uuid.uuid4().hex}"
            try:
                with tmp.open("xb") as fh:
                    fill(fh)
                    fh.flush()
                    os.fsync(fh.fileno())
            except FileNotFoundError:  # a concurrent delete pruned the fresh directory: once more
                if attempt == 2:
                    raise
                continue
            except BaseException:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise
            tmp.replace(target)
            _fsync_dir(target.parent)
            return

    # -- operations --------------------------------------------------------------------------

    def check_bucket(self, bucket: str) -> None:
        path = self._bucket_dir(bucket)
        with map_exceptions(f"create bucket directory {path}", _classify):
            path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK):
            raise StorageError(f"bucket directory {path} is not writable")

    def put_file(
        self, bucket: str, key: str, path: Path, *, if_none_match: bool = False, if_match: str | None = None,
        adopt: bool = False, etag: bool = True,
    ) -> str:
        target = self._path(bucket, key)
        if adopt:
            with map_exceptions(f"put {self.uri(bucket, key)}", _classify), self._key_lock(bucket, key):
                self._check(target, bucket, key, if_none_match, if_match)
                adopted = self._adopt(Path(path), target, etag)
                if adopted is not None:
                    if adopted:
                        self._remember(target, adopted)
                    return adopted

        digests: list[Any] = []

        def fill(fh: BinaryIO) -> None:  # one pass: copy and hash together (fresh on a retry)
            digest = hashlib.md5(usedforsecurity=False)
            digests.append(digest)
            with Path(path).open("rb") as src:
                while chunk := src.read(_CHUNK):
                    digest.update(chunk)
                    fh.write(chunk)

        with map_exceptions(f"put {self.uri(bucket, key)}", _classify), self._key_lock(bucket, key):
            self._check(target, bucket, key, if_none_match, if_match)
            self._atomic_write(target, fill)
            copied = f'"{digests[-1].hexdigest()}"'  # hashed while copying: free, so always kept
            self._remember(target, copied)
            return copied


    def _adopt(self, source: Path, target: Path, etag: bool) -> str | None:
        """Hard-link a handed-over file under ``target`` (atomically) and return its etag (``""``
        unless ``etag``: reading the file back only to hash it cost a committed JSON file ~1.4 ms per
        MB, for an etag the conditional protocol never uses); ``None`` when it cannot be linked
        (another file system), so the caller copies it. Saves writing the bytes twice."""
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f"{_TMP_PREFIX}{uuid.uuid4().hex}"
        try:
            os.link(source, tmp)
        except OSError as exc:
            if exc.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                return None
            raise
        try:
            digest = _md5_file(tmp) if etag else ""
            with tmp.open("rb") as fh:
                os.fsync(fh.fileno())  # the caller fsynced it; cheap, and put_file's promise
            tmp.replace(target)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        _fsync_dir(target.parent)
        return digest

    def put_bytes(
        self, bucket: str, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        target = self._path(bucket, key)
        with map_exceptions(f"put {self.uri(bucket, key)}", _classify), self._key_lock(bucket, key):
            self._check(target, bucket, key, if_none_match, if_match)
            self._atomic_write(target, lambda fh: fh.write(data))
            return _md5_bytes(data)

    def get(self, bucket: str, key: str) -> StoredObject:
        target = self._path(bucket, key)
        with map_exceptions(f"get {self.uri(bucket, key)}", _classify):
            data = target.read_bytes()
        return StoredObject(data, _md5_bytes(data))

    def head(self, bucket: str, key: str) -> ObjectInfo | None:
        target = self._path(bucket, key)
        try:
            with map_exceptions(f"head {self.uri(bucket, key)}", _classify):
                size = target.stat().st_size
                return ObjectInfo(key, size, _md5_file(target))
        except ObjectNotFound:
            return None

    def copy(self, bucket: str, source: str, dest: str, *, if_match: str | None = None) -> None:
        src = self._path(bucket, source)
        target = self._path(bucket, dest)
        with map_exceptions(f"copy {self.uri(bucket, source)} to {dest}", _classify), \
                self._key_lock(bucket, source, dest):
            if not src.exists():
                raise ObjectNotFound(f"copy source {self.uri(bucket, source)} does not exist")
            if if_match is not None and self._etag(src) != if_match:
                raise PreconditionFailed(f"copy source {self.uri(bucket, source)} changed (if-match)")
            if target.exists() and src.samefile(target):
                return  # already a hard link of the source (a copy being repeated after a crash)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.parent / f"{_TMP_PREFIX}{uuid.uuid4().hex}"
            try:
                os.link(src, tmp)
            except OSError:
                shutil.copyfile(src, tmp)
                with tmp.open("rb") as fh:
                    os.fsync(fh.fileno())
            tmp.replace(target)
            # rename() between two links of one inode does nothing (POSIX): never leave tmp behind
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            _fsync_dir(target.parent)

    def delete(self, bucket: str, key: str) -> None:
        target = self._path(bucket, key)
        with map_exceptions(f"delete {self.uri(bucket, key)}", _classify), self._key_lock(bucket, key):
            try:
                target.unlink()
            except FileNotFoundError:
                return
            _fsync_dir(target.parent)
        self._prune_empty(target.parent, self._bucket_dir(bucket))

    @staticmethod
    def _prune_empty(directory: Path, stop: Path) -> None:
        """Remove directories left empty by a delete (S3 has no directories to leave behind)."""
        while directory != stop and stop in directory.parents:
            try:
                directory.rmdir()
            except OSError:
                return
            directory = directory.parent

    def list(self, bucket: str, prefix: str = "") -> Iterator[ObjectInfo]:
        base = self._bucket_dir(bucket)
        start_dir = base.joinpath(*prefix.split("/")[:-1]) if "/" in prefix else base
        if not start_dir.is_dir():
            return
        found: list[ObjectInfo] = []
        with map_exceptions(f"list {self.uri(bucket, prefix)}", _classify):
            for dirpath, _dirs, files in os.walk(start_dir):
                rel_dir = Path(dirpath).relative_to(base).as_posix()
                for name in files:
                    if name.startswith(_TMP_PREFIX):
                        continue
                    key = name if rel_dir == "." else f"{rel_dir}/{name}"
                    if key.startswith(prefix):
                        try:
                            size = (Path(dirpath) / name).stat().st_size
                        except FileNotFoundError:
                            continue  # deleted while listing
                        found.append(ObjectInfo(key, size, ""))
        found.sort(key=lambda info: info.key)
        yield from found
