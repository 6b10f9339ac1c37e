"""The sink task: Kafka Connect's SinkTask lifecycle, driven by any caller.

``start(config)`` → ``open(partitions)`` → ``put(records)``… / ``pre_commit(offsets)``… →
``close(partitions)`` → ``stop()``. The Kafka runtime (:mod:`sink.runtime.loop`) drives it from a
consumer loop; tests drive it directly. What each call guarantees:

* ``open`` takes ownership of each partition's exactly-once index (fencing the previous owner),
  finishes or rolls back an interrupted commit, and returns the offset to consume from.
* ``put`` streams records into one staging file per (topic, partition, partition path) and
  commits files whose flush.count / flush.size is reached, or that a schema change rolls.
  Records already committed (replays after a crash or a rewind) are skipped. On an error that
  concerns one record (:class:`RecordFormatError`, :class:`PartitionError`, both with ``.record``)
  the records before it are written, it and the ones after are not, and the error propagates.
* A timer thread commits files whose flush.interval has passed, also on idle partitions.
* ``pre_commit`` returns, per partition, the next offset safe to commit to Kafka: nothing at or
  after the first record still sitting in an uncommitted staging file.
* ``close`` (rebalance): with exactly-once on, open files of the closed partitions are committed
  (the index is the resume point, so the next owner starts right after them); if that fails (the
  partition was already taken over, storage is down) they are discarded and the next owner
  replays them. With exactly-once off they are discarded: committing them would write past the
  Kafka offset the runtime already committed, so the next owner would write them again.
* ``stop`` discards whatever is still open (Connect calls ``close`` first).

Locking: one re-entrant lock guards all mutable state (writers, partition states, the index
handles). ``put``, ``open``, ``close``, ``pre_commit``, ``stop`` and every timer tick hold it for
their whole duration, storage I/O included: a commit by the timer simply makes a concurrent
``put`` wait, which is the back-pressure we want, and no writer is ever used by two threads.
The exception is :attr:`SinkTask.background_commits` (docs/exactly-once.md, "Background
commits"): full files of ``put_block`` are committed on commit threads without the lock (a
partition's files in order), and every other commit, ``open``, ``close`` and ``stop`` wait for
those threads first.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from formats import FormatError, get_format, settings_for_plan
from kcql.errors import ConfigError, SinkError
from kcql.model import StoreFormat
from partitioners import Partitioner, PartitionError, object_key
from sink.commit.committer import COMMIT_STEPS, Committer, FaultHook
from sink.commit.index import FencedError, PartitionIndex, index_key
from sink.commit.staging import StagingArea
from sink.config.settings import ConnectorSettings, parse_settings
from sink.records.record import SinkRecord, TopicPartition
from sink.storage import Storage, bucket_name_problem, create_storage
from sink.task.flush_policy import FlushPolicy
from sink.task.writers import PartitionWriter, WriterKey, WriterPool

if TYPE_CHECKING:
    from formats.base import FileFormat
    from kcql.model import SinkPlan
    from sink.records.blocks import MessageBlock

__all__ = ["COMMIT_STEPS", "SinkTask"]

log = logging.getLogger(__name__)

MAX_BACKGROUND_COMMITS = 4
"""Files handed to the commit threads at most at once (and threads); one more waits for them."""

MAX_PATHS_AHEAD = 1000
"""Per-path offsets the index may hold ahead of ``committedOffset`` before the file holding the
offset back is committed early (see :meth:`SinkTask._commit_oldest`)."""


@dataclass
class _PartitionState:
    """What the task knows about one open Kafka partition."""

    tp: TopicPartition
    plan: SinkPlan
    index: PartitionIndex | None
    high: int = -1
    """Highest offset processed (written, or skipped as already committed)."""
    failed: BaseException | None = None
    """Why a background commit of this partition failed: no later file may be committed (the
    index would pass records that are not stored) until the partition is opened again."""

    def skip_threshold(self, path: str) -> int:
        if self.index is None:
            return self.high
        return max(self.high, self.index.state.skip_threshold(path))


@dataclass
class _BackgroundCommit:
    """A full file handed to a commit thread; it holds its partition's safe offset back."""

    writer: PartitionWriter
    state: _PartitionState
    committed_after: int
    reason: str
    future: Future[None] | None = field(default=None, repr=False)


class SinkTask:
    """One sink task. Thread-safe; see the module docstring for the locking rule.

    Attributes:
        task_id: a fresh UUID; recorded as the owner in the exactly-once index.
        fault_hook: tests set it to inject a crash after a commit step (:data:`COMMIT_STEPS`).
    """

    def __init__(self) -> None:
        self.task_id = uuid.uuid4().hex
        self.fault_hook: FaultHook | None = None
        self.settings: ConnectorSettings | None = None
        self._lock = threading.RLock()
        self._plans: tuple[SinkPlan, ...] = ()
        self._plan_by_topic: dict[str, SinkPlan] = {}
        self._formats: dict[SinkPlan, FileFormat] = {}
        self._partitioners: dict[SinkPlan, Partitioner] = {}
        self._policies: dict[SinkPlan, FlushPolicy] = {}
        self._partitions: dict[TopicPartition, _PartitionState] = {}
        self._pool = WriterPool(1)
        self._storage: Storage | None = None
        self._committer: Committer | None = None
        self._staging: StagingArea | None = None
        self._timer: threading.Thread | None = None
        self._stopping = threading.Event()
        self._timer_error: BaseException | None = None
        self.files_committed = 0
        self.background_commits = False
        """Commit files that :meth:`put_block` fills on a thread while the caller goes on
        consuming (finishing, uploading and fsyncing a file takes tens of milliseconds). Off for
        direct callers, which expect a full file to be committed when ``put`` returns; the
        runtime turns it on. Errors are raised by a later ``put``/``put_block``, naming the
        partition (``exc.partitions``) that must be rewound."""
        self._commit_pool: ThreadPoolExecutor | None = None
        self._prepare_pool: ThreadPoolExecutor | None = None
        """The thread :meth:`prepare_blocks` parses on (Arrow releases the GIL there)."""
        self._committing: dict[TopicPartition, list[_BackgroundCommit]] = {}
        self._commit_errors: dict[TopicPartition, BaseException] = {}

    def __repr__(self) -> str:
        name = self.settings.name if self.settings else "?"
        return f"SinkTask(connector={name!r}, task_id={self.task_id!r}, partitions={len(self._partitions)})"

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, config: dict[str, str], plans: Sequence[SinkPlan] | None = None) -> None:
        """Validate the config, compile the KCQL, check the buckets and start the flush timer.

        Args:
            config: Connect-style connector properties (see :func:`sink.config.settings.parse_settings`).
            plans: already compiled plans (embedding and tests); default: ``kcql.parse`` of
                ``connect.s3.kcql``.

        Raises:
            ConfigError: invalid keys, or a statement whose format settings are invalid.
            KcqlError: the KCQL does not compile.
            StorageError: a bucket does not exist or is not reachable.
        """
        settings = parse_settings(config)
        if plans is None:
            from kcql import parse  # lazy: the parser is heavier than the rest of the task

            plans = parse(settings.kcql)
        self.settings = settings
        self._plans = tuple(plans)
        problems: list[tuple[str, str, str]] = []
        for plan in self._plans:
            try:
                writers = settings.writers
                self._formats[plan] = get_format(
                    settings_for_plan(plan, writers.compression_codec, writers.compression_level)
                )
            except FormatError as exc:
                problems.append(("connect.s3.kcql", plan.statement or plan.source, str(exc)))
            if settings.storage.kind == "s3" and (why := bucket_name_problem(plan.bucket)):
                problems.append(("connect.s3.kcql", plan.statement or plan.bucket, why))
            self._partitioners[plan] = Partitioner(plan)
            self._policies[plan] = FlushPolicy.from_plan(plan)
        root, staging = settings.storage.local_root, settings.writers.staging_dir
        if (
            settings.storage.kind == "local" and root and staging
            and (staging.resolve() == root.resolve() or root.resolve() in staging.resolve().parents)
        ):
            problems.append((
                "connect.s3.local.tmp.directory", str(staging),
                "must not be inside connect.local.root: staging files would appear in the buckets",
            ))
        if problems:
            raise ConfigError(problems)
        self._storage = create_storage(settings.storage)
        for bucket in sorted({plan.bucket for plan in self._plans}):
            self._storage.check_bucket(bucket)
        self._committer = Committer(self._storage, settings.name)
        self._committer.fault_hook = self._fire_fault
        self._staging = StagingArea(staging, settings.name, self.task_id)
        self._pool = WriterPool(settings.writers.max_open_writers)
        self._stopping.clear()
        self._timer = threading.Thread(
            target=self._run_timer, name=f"kcql-sink-flush-{settings.name}", daemon=True
        )
        self._timer.start()
        log.info(
            "task %s of connector %s started: %d statement(s), storage %s, exactly-once %s",
            self.task_id, settings.name, len(self._plans), self._storage,
            "on" if settings.exactly_once.enabled else "off",
        )

    def open(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """Take the partitions over; returns the offset to consume each from.

        Partitions with nothing committed yet are absent from the result (the caller uses the
        Kafka group offset / ``auto.offset.reset``). With exactly-once off the result is empty.

        Raises:
            SinkError: no statement reads a partition's topic; StorageError while reading the index.
        """
        settings, storage, committer, staging = self._started()
        with self._lock:
            resume: dict[TopicPartition, int] = {}
            for tp in partitions:
                tp = TopicPartition(tp.topic, tp.partition)
                plan = self._plan_for(tp.topic)
                if tp in self._partitions:
                    self._drop_partition(tp)
                staging.clear_partition(tp)
                index = None
                if settings.exactly_once.enabled:
                    key = index_key(settings.exactly_once.indexes_name, settings.name, tp)
                    index = PartitionIndex(storage, plan.bucket, key, tp, self.task_id)
                    index.acquire()
                    committer.recover(index)
                state = _PartitionState(tp, plan, index)
                committed = index.state.committed_offset if index else None
                if committed is not None:
                    state.high = committed
                    resume[tp] = committed + 1
                self._partitions[tp] = state
            return resume

    def put(self, records: Sequence[SinkRecord]) -> None:
        """Write records; commit the files that reach flush.count/flush.size or roll on a schema change.

        Raises:
            RecordFormatError, PartitionError: one record cannot be written/placed; ``exc.record``
                is that record; the ones before it were written.
            FencedError: another task owns the partition now (its writers were dropped).
            StorageError: a commit failed (``retriable`` says whether to try again).
        """
        self._started()
        with self._lock:
            self._raise_timer_error()
            self._raise_commit_error()
            start = 0
            count = len(records)
            while start < count:
                topic = records[start].topic
                end = start + 1
                while end < count and records[end].topic == topic:
                    end += 1
                self._put_topic(records[start:end] if start or end < count else records)
                start = end
            self._enforce_staging_budget()

    def accepts_blocks(self, topic: str) -> bool:
        """Whether :meth:`put_block` can take blocks of ``topic``: its statement writes JSON or
        PARQUET without the envelope, into a path that depends only on the topic partition."""
        try:
            plan = self._plan_for(topic)
        except SinkError:
            return False
        return (
            plan.envelope is None
            and self._partitioners[plan].is_default
            and plan.format in (StoreFormat.JSON, StoreFormat.PARQUET)
        )

    def records_before_blocks(self, topic: str, partition: int, offset: int) -> int:
        """How many records from ``offset`` on :meth:`put_block` would refuse for certain (0: try).

        The open file of that partition may need its first rows one by one (a Parquet file fixes
        its schema from them); the caller puts that many through :meth:`put` first.
        """
        with self._lock:
            state = self._partitions.get(TopicPartition(topic, partition))
            if state is None:
                return 0
            writer = self._block_writer(state, offset)
            if writer is None:  # put_block would open a new file
                return self._formats[state.plan].records_before_blocks()
            return writer.records_before_blocks()

    def prepare_blocks(self, blocks: Sequence[MessageBlock]) -> int:
        """Start the work :meth:`put_block` can do ahead for ``blocks`` (parsing, on a thread);
        returns for how many blocks something was started.

        Only for blocks that fit whole in their partition's open file; the caller then puts
        them in order as usual, and may consume more messages meanwhile.
        """
        started = 0
        with self._lock:
            for block in blocks:
                state = self._partitions.get(TopicPartition(block.topic, block.partition))
                writer = None if state is None else self._block_writer(state, block.first_offset)
                if writer is not None and len(block) <= writer.policy.room(writer.record_count):
                    if self._prepare_pool is None:
                        self._prepare_pool = ThreadPoolExecutor(
                            max_workers=1, thread_name_prefix="kcql-sink-prepare"
                        )
                    started += writer.prepare_block(block, self._prepare_pool.submit)
        return started

    def _block_writer(self, state: _PartitionState, offset: int) -> PartitionWriter | None:
        """The open file a block of ``state``'s partition starting at ``offset`` would go to."""
        tp = state.tp
        try:
            path = self._partitioners[state.plan].path_for(SinkRecord(tp.topic, tp.partition, offset))
        except PartitionError:
            return None
        writer = self._pool.get((tp.topic, tp.partition, path))
        return None if writer is None or writer.finished else writer

    def put_block(self, block: MessageBlock) -> int:
        """Write a block of messages (the fast path of :mod:`sink.records.blocks`).

        Returns how many of the block's records were written: a prefix, possibly empty, when the
        file's format refuses the rest (see :meth:`FormatWriter.write_lines`). The caller puts
        the remaining records through :meth:`put`, which decides each one as usual. Replays
        (records already committed) are never taken here.

        Raises:
            FencedError: another task owns the partition now (its writers were dropped).
            StorageError: a commit failed (``retriable`` says whether to try again).
        """
        self._started()
        with self._lock:
            self._raise_timer_error()
            self._raise_commit_error()
            tp = TopicPartition(block.topic, block.partition)
            state = self._partitions.get(tp)
            if state is None:
                return 0  # put() raises the error that names it
            plan = state.plan
            try:
                path = self._partitioners[plan].path_for(
                    SinkRecord(block.topic, block.partition, block.first_offset)
                )
            except PartitionError:
                return 0
            if block.first_offset <= state.skip_threshold(path):
                return 0
            key: WriterKey = (block.topic, block.partition, path)
            writer = self._pool.get(key)
            done, total = 0, len(block)
            while done < total:
                if writer is not None and writer.finished:  # a commit failed earlier: retry it first
                    self._commit_writer(writer, "retry")
                    writer = None
                if writer is None:
                    writer = self._open_writer(plan, key)
                room = writer.policy.room(writer.record_count)
                if room <= 0:
                    self._commit_writer(writer, "count", background=True)
                    writer = None
                    continue
                if writer.records_before_blocks():
                    break  # a new Parquet file fixes its schema from rows put one by one
                chunk = block.tail(done).head(room)
                if not writer.write_block(chunk):
                    break
                done += len(chunk)
                state.high = max(state.high, chunk.last_offset)
                reason = writer.due(time.monotonic())
                if reason is not None:
                    self._commit_writer(writer, reason, background=True)
                    writer = None
            if done:
                self._enforce_staging_budget()
            return done

    def pre_commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The next offset safe to commit to Kafka for each given partition we own.

        Never past the first record still in an uncommitted file, nor past ``offsets[tp]``.
        """
        with self._lock:
            self._reap()
            result: dict[TopicPartition, int] = {}
            for tp, consumed in offsets.items():
                tp = TopicPartition(tp.topic, tp.partition)
                state = self._partitions.get(tp)
                if state is None:
                    continue
                safe = self._safe_offset(state)
                if safe >= 0:
                    known = consumed is not None and consumed >= 0
                    result[tp] = min(safe + 1, consumed) if known else safe + 1
            return result

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        """Stop writing the partitions (rebalance); the module docstring says what happens to open files."""
        if self.settings is None:
            return
        with self._lock:
            for tp in partitions:
                tp = TopicPartition(tp.topic, tp.partition)
                if tp not in self._partitions:
                    continue
                if self.settings.exactly_once.enabled:
                    for writer in self._pool.for_partition(tp):
                        try:
                            self._commit_writer(writer, "close")
                        except FencedError as exc:
                            log.info("close: %s", exc)
                            break
                        except Exception as exc:  # noqa: BLE001 - close must always release the partition
                            log.warning("close: could not commit %s (its records are replayed): %s", tp, exc)
                            break
                self._drop_partition(tp)

    def stop(self) -> None:
        """Stop the timer and discard whatever is still open; idempotent."""
        self._stopping.set()
        timer = self._timer
        if timer is not None and timer is not threading.current_thread():
            timer.join(timeout=30)
        with self._lock:
            self._drain()
            for tp in list(self._partitions):
                self._drop_partition(tp)
            for writer in self._pool.all():
                writer.discard()
                self._pool.remove(writer)
            if self._staging is not None:
                self._staging.close()
            if self._storage is not None:
                self._storage.close()
            self._timer = None
            for pool in (self._commit_pool, self._prepare_pool):
                if pool is not None:
                    pool.shutdown(wait=True)
            self._commit_pool = self._prepare_pool = None
            self._commit_errors.clear()

    # -- writing ---------------------------------------------------------------------------------

    def _put_topic(self, records: Sequence[SinkRecord]) -> None:
        plan = self._plan_for(records[0].topic)
        partitioner = self._partitioners[plan]
        try:
            paths = partitioner.paths_for(records)
        except PartitionError:
            placed: list[str] = []
            for record in records:
                try:
                    placed.append(partitioner.path_for(record))
                except PartitionError as bad:
                    bad.record = record  # type: ignore[attr-defined]
                    self._write_runs(plan, records[: len(placed)], placed)
                    raise bad from None
            raise  # pragma: no cover - paths_for and path_for agree
        self._write_runs(plan, records, paths)

    def _write_runs(self, plan: SinkPlan, records: Sequence[SinkRecord], paths: list[str]) -> None:
        start = 0
        count = len(records)
        while start < count:
            partition, path = records[start].partition, paths[start]
            end = start + 1
            while end < count and paths[end] == path and records[end].partition == partition:
                end += 1
            self._write_run(plan, records[start].topic, partition, path, records[start:end])
            start = end

    def _write_run(
        self, plan: SinkPlan, topic: str, partition: int, path: str, run: Sequence[SinkRecord]
    ) -> None:
        tp = TopicPartition(topic, partition)
        state = self._partitions.get(tp)
        if state is None:
            raise SinkError(f"put() received records of {tp}, which is not open on this task (call open())")
        threshold = state.skip_threshold(path)
        if run[0].offset <= threshold:  # a replay: drop what is already committed or written
            skipped = [r for r in run if r.offset <= threshold]
            run = [r for r in run if r.offset > threshold]
            state.high = max(state.high, skipped[-1].offset)
        key: WriterKey = (topic, partition, path)
        writer = self._pool.get(key)
        while run:
            if writer is not None and writer.finished:  # a commit failed earlier: retry it first
                self._commit_writer(writer, "retry")
                writer = None
            if writer is None:
                writer = self._open_writer(plan, key)
            room = writer.policy.room(writer.record_count)
            chunk = run if len(run) <= room else run[:room]
            try:
                written = writer.write(chunk)
            except Exception as exc:
                index = getattr(exc, "index", 0)
                if index:
                    state.high = max(state.high, chunk[index - 1].offset)
                raise
            if written:
                state.high = max(state.high, chunk[written - 1].offset)
            run = run[written:]
            if written < len(chunk):
                if writer.record_count == 0:
                    raise SinkError(f"the {plan.format} writer accepted no record at {chunk[0].where}")
                self._commit_writer(writer, "schema change")
                writer = None
                continue
            reason = writer.due(time.monotonic())
            if reason is not None:
                self._commit_writer(writer, reason)
                writer = None

    def _enforce_staging_budget(self) -> None:
        """Commit the largest open files early when staging exceeds ``connect.s3.local.tmp.max.bytes``.

        Checked once per ``put`` (the overshoot is at most one batch), down to three quarters of
        the budget so that the next check does not fire again at once.
        """
        budget = self.settings.writers.staging_max_bytes if self.settings else None
        if not budget:
            return
        writers = [w for w in self._pool.all() if not w.finished and w.record_count]
        total = sum(w.bytes_written for w in writers)
        if total <= budget:
            return
        for writer in sorted(writers, key=lambda w: w.bytes_written, reverse=True):
            if total <= budget * 3 // 4:
                break
            total -= writer.bytes_written
            self._commit_writer(writer, "staging budget")

    def _open_writer(self, plan: SinkPlan, key: WriterKey) -> PartitionWriter:
        while self._pool.full:
            self._commit_writer(self._pool.least_recently_used(), "max open writers")
        assert self._staging is not None  # noqa: S101
        file_format = self._formats[plan]
        tp = TopicPartition(key[0], key[1])
        writer = PartitionWriter(
            key, plan, file_format, self._staging.new_file(tp, file_format.extension),
            self._policies[plan], time.monotonic(),
        )
        self._pool.add(writer)
        return writer

    # -- committing ------------------------------------------------------------------------------

    def _safe_offset(
        self, state: _PartitionState, excluding: PartitionWriter | None = None, *, committing: bool = True
    ) -> int:
        """The highest offset below every record not yet committed; ``committing=False`` leaves
        out the files with a background commit (they are committed first, in order)."""
        first = self._pool.min_first_offset(state.tp, excluding)
        for job in self._committing.get(state.tp, ()) if committing else ():  # in flight or failed
            if job.writer.first_offset is not None and (first is None or job.writer.first_offset < first):
                first = job.writer.first_offset
        return state.high if first is None else first - 1

    def _commit_writer(self, writer: PartitionWriter, reason: str, background: bool = False) -> None:
        """Finish ``writer``'s file and commit it; it leaves the pool only once committed.

        With ``background`` (and :attr:`background_commits` on) the file is handed to a commit
        thread instead; every other commit first waits for those, so a partition's files reach
        the index in order.
        """
        assert self._committer is not None  # noqa: S101
        if writer not in self._pool.for_partition(writer.tp):
            return  # already committed (early, by _commit_oldest) while the caller iterated a snapshot
        state = self._partitions[writer.tp]
        if background and self.background_commits and not writer.finished and state.failed is None:
            self._commit_in_background(writer, state, reason)
            return
        self._drain()
        if state.failed is not None:
            raise _naming(state.failed, state.tp)
        writer.finish()
        if writer.first_offset is None:
            writer.discard()
            self._pool.remove(writer)
            return
        meta = writer.meta()
        final_key = object_key(writer.plan, meta)
        try:
            if state.index is not None:
                self._committer.commit_exactly_once(
                    state.index, writer.staging_path, final_key, writer.path, meta.last_offset,
                    self._safe_offset(state, excluding=writer),
                )
            else:
                self._committer.commit_direct(writer.plan.bucket, writer.staging_path, final_key)
        except FencedError:
            self._drop_partition(writer.tp)
            raise
        log.debug("committed %s (%d records, %s)", final_key, meta.record_count, reason)
        self.files_committed += 1
        writer.discard()  # removes the staging file
        self._pool.remove(writer)
        if state.index is not None and len(state.index.state.paths) > MAX_PATHS_AHEAD:
            self._commit_oldest(state)

    def _commit_in_background(self, writer: PartitionWriter, state: _PartitionState, reason: str) -> None:
        if sum(map(len, self._committing.values())) >= MAX_BACKGROUND_COMMITS:
            self._drain()  # back-pressure: memory and staging space of finished files
            if state.failed is not None:
                raise _naming(state.failed, state.tp)
        # a partition's jobs run in order; committed_after only counts writers still open (the
        # partition's jobs before this one are committed first, or this one fails with them)
        job = _BackgroundCommit(writer, state, self._safe_offset(state, writer, committing=False), reason)
        self._pool.remove(writer)
        jobs = self._committing.setdefault(state.tp, [])
        previous = jobs[-1].future if jobs else None
        jobs.append(job)
        if self._commit_pool is None:
            self._commit_pool = ThreadPoolExecutor(
                max_workers=MAX_BACKGROUND_COMMITS, thread_name_prefix="kcql-sink-commit"
            )
        job.future = self._commit_pool.submit(self._run_background_commit, job, previous)

    def _run_background_commit(self, job: _BackgroundCommit, previous: Future[None] | None) -> None:
        """On a commit thread, without the task lock: nothing else uses this writer any more,
        and every other user of the partition's index waits for these threads first
        (:meth:`_drain`). Partitions commit in parallel; a partition's files one after the other
        (``previous``, its file before this one, was submitted earlier to the same FIFO pool, so
        it is running or done when this one starts: waiting for it cannot deadlock)."""
        assert self._committer is not None  # noqa: S101
        if previous is not None:
            wait([previous])
        state, writer = job.state, job.writer
        if state.failed is not None:
            raise state.failed  # an earlier file of this partition is not stored
        try:
            writer.finish()
            if writer.first_offset is None:
                return
            meta = writer.meta()
            final_key = object_key(writer.plan, meta)
            if state.index is not None:
                self._committer.commit_exactly_once(
                    state.index, writer.staging_path, final_key, writer.path, meta.last_offset,
                    job.committed_after,
                )
            else:
                self._committer.commit_direct(writer.plan.bucket, writer.staging_path, final_key)
            log.debug("committed %s (%d records, %s, background)", final_key, meta.record_count, job.reason)
        except BaseException as exc:
            state.failed = exc
            raise

    def _reap(self) -> None:
        """Account for the background commits that are done; keep failed ones (they hold the
        partition's safe offset back) and their error for the next put."""
        for tp in list(self._committing):
            jobs = self._committing[tp]
            while jobs and jobs[0].future is not None and jobs[0].future.done():
                error = jobs[0].future.exception()
                if error is not None:
                    self._commit_errors.setdefault(tp, error)
                    break
                job = jobs.pop(0)
                if job.writer.first_offset is not None:
                    self.files_committed += 1
                job.writer.discard()  # removes the staging file
            if not jobs:
                del self._committing[tp]

    def _drain(self) -> None:
        """Wait for every background commit, then :meth:`_reap`."""
        futures = [job.future for jobs in self._committing.values() for job in jobs if job.future is not None]
        if futures:
            wait(futures)
        self._reap()

    def _raise_commit_error(self) -> None:
        """Raise the first background commit failure not raised yet, naming its partition."""
        self._reap()
        if self._commit_errors:
            tp = next(iter(self._commit_errors))
            raise _naming(self._commit_errors.pop(tp), tp)

    def _commit_oldest(self, state: _PartitionState) -> None:
        """Commit the open file that holds the partition's committed offset back.

        A file that keeps receiving records (a "hot" PARTITIONBY value) stays open until its
        flush limits, and meanwhile every other path committed adds an entry to the index's
        per-path offsets; as each index write rewrites the whole object, that would grow the
        index and cost quadratic time. Committing the oldest file moves ``committedOffset`` up,
        which prunes those entries.
        """
        writers = self._pool.for_partition(state.tp)
        holders = [w for w in writers if w.first_offset is not None and not w.finished]
        if holders:
            oldest = min(holders, key=lambda w: w.first_offset or 0)
            self._commit_writer(oldest, "index size")

    def _drop_partition(self, tp: TopicPartition) -> None:
        if tp in self._committing:
            self._drain()
            for job in self._committing.pop(tp, ()):
                job.writer.discard()  # a failed commit: its records are replayed
        self._commit_errors.pop(tp, None)
        for writer in self._pool.for_partition(tp):
            writer.discard()
            self._pool.remove(writer)
        self._partitions.pop(tp, None)
        if self._staging is not None:
            self._staging.clear_partition(tp)

    # -- timer -----------------------------------------------------------------------------------

    def _tick_seconds(self) -> float:
        shortest = min((policy.interval for policy in self._policies.values()), default=1.0)
        return min(max(shortest / 10, 0.05), 1.0)

    def _run_timer(self) -> None:
        tick = self._tick_seconds()
        while not self._stopping.wait(tick):
            with self._lock:
                if self._stopping.is_set():
                    return
                self.flush_due()

    def flush_due(self) -> None:
        """Commit every file whose flush.interval has passed (the timer calls this every tick).

        Errors are kept and raised by the next ``put`` (the Connect way: the framework sees the
        failure on its own thread); one failing partition does not stop the others.
        """
        with self._lock:
            now = time.monotonic()
            for writer in self._pool.all():
                if writer not in self._pool:  # dropped by an earlier failure in this loop
                    continue
                if not writer.finished and writer.due(now) is None:
                    continue
                try:
                    self._commit_writer(writer, "interval" if not writer.finished else "retry")
                except Exception as exc:  # noqa: BLE001 - handed to the caller's thread by put()
                    log.error("flush of %s failed: %s", writer.tp, exc)  # noqa: TRY400 - no traceback spam
                    if self._timer_error is None:
                        self._timer_error = exc

    def _raise_timer_error(self) -> None:
        error, self._timer_error = self._timer_error, None
        if error is not None:
            raise error

    # -- helpers ---------------------------------------------------------------------------------

    def _fire_fault(self, step: str) -> None:
        hook: Callable[[str], None] | None = self.fault_hook
        if hook is not None:
            hook(step)

    def _started(self) -> tuple[ConnectorSettings, Storage, Committer, StagingArea]:
        if self.settings is None or self._storage is None or self._committer is None or self._staging is None:
            raise SinkError("the task is not started: call start(config) first")
        return self.settings, self._storage, self._committer, self._staging

    def _plan_for(self, topic: str) -> SinkPlan:
        plan = self._plan_by_topic.get(topic)
        if plan is None:
            plan = next((p for p in self._plans if p.matches_topic(topic)), None)
            if plan is None:
                raise SinkError(
                    f"Can't find the KCQL for source topic [{topic}]: add a statement "  # noqa: S608
                    f"INSERT INTO <bucket>:<prefix> SELECT * FROM {topic}"
                )
            self._plan_by_topic[topic] = plan
        return plan


def _naming(error: BaseException, tp: TopicPartition) -> BaseException:
    """``error``, marked with the partition the caller must rewind (``error.partitions``)."""
    error.partitions = {tp}  # type: ignore[attr-defined]
    return error
