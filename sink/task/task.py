"""The sink task: Kafka Connect's SinkTask lifecycle, driven by any caller.

``start(config)`` → ``open(partitions)`` → ``put(batch)``… / ``pre_commit(offsets)``… →
``close(partitions)`` → ``stop()``. The Kafka runtime (:mod:`sink.runtime`) drives it from a
consumer loop; tests drive it directly. What each call guarantees:

* ``open`` takes ownership of each partition's exactly-once index (fencing the previous owner),
  finishes or rolls back an interrupted commit (or, for an announced conditional commit whose file
  is missing, owes it: the replay re-produces exactly that file, see :meth:`SinkTask._write_owed`),
  and returns the offset to consume from.
* ``put`` takes one :class:`~sink.records.batch.RecordBatch` (records of one topic partition).
  The statement's partitioner cuts it into slices, one per partition path, and each slice is
  appended to the open file of its (topic, partition, path), which commits when flush.count or
  flush.size is reached or the format rolls it (a schema change). Records already committed
  (replays after a crash or a rewind) are skipped. At the first record that cannot be converted,
  placed or written, the records before it are written, it and those after are not, and its
  :class:`~kcql.errors.RecordError` propagates: the error policy is the caller's, in one place.
* ``prefetch`` (optional) lets the open file of a batch start work for a later ``put`` of it on
  the batch's helper thread; it writes nothing.
* A timer thread commits files whose flush.interval has passed, also on idle partitions.
* ``pre_commit`` returns, per partition, the next offset safe to commit to Kafka: nothing at or
  after the first record still sitting in an uncommitted staging file.
* ``close`` (rebalance): with exactly-once on, open files of the closed partitions are committed
  (the index is the resume point, so the next owner starts right after them); if that fails (the
  partition was already taken over, storage is down) they are discarded and the next owner
  replays them. With exactly-once off they are discarded: committing them would write past the
  Kafka offset the runtime already committed, so the next owner would write them again.
* ``stop`` discards whatever is still open (Connect calls ``close`` first).

Locking: one re-entrant lock guards the task's state (writers, partition states). ``put``,
``open``, ``close``, ``pre_commit``, ``stop`` and every timer tick hold it, storage I/O included:
a commit by the timer simply makes a concurrent ``put`` wait, which is the back-pressure we want,
and no writer is ever used by two threads. The exception is :attr:`SinkTask.background_commits`:
files that ``put`` fills are committed by a :class:`~sink.commit.queue.CommitQueue`, which owns
their partitions' indexes meanwhile; every other commit, ``open``, ``close`` and ``stop`` drain
it first (see :mod:`sink.commit.queue`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kcql.errors import ConfigError, RecordError, SinkError
from kcql.model import SinkPlan
from kcql.routing import plan_for_topic
from partitioners import Partitioner, object_key
from sink.commit.committer import COMMIT_STEPS, CommitError, Committer, FaultHook
from sink.commit.index import FencedError, IndexState, PartitionIndex, PendingCommit, index_key, temp_prefix
from sink.commit.parts import StreamingUpload
from sink.commit.queue import CommitJob, CommitQueue
from sink.commit.staging import StagingArea
from sink.config.settings import ConnectorSettings, parse_settings, with_connector_padding
from sink.events import NO_OBSERVER, SinkObserver
from sink.records.batch import RecordBatch
from sink.records.record import TopicPartition
from sink.storage import Storage, create_storage
from sink.task.descriptors import RESERVED, process_budget
from sink.task.statements import Statement, compile_statements
from sink.task.timer import FlushTimer
from sink.task.writers import TOPIC_SEPARATOR, PartitionWriter, WriterKey, WriterPool, writer_slot

__all__ = ["COMMIT_STEPS", "SinkTask"]

log = logging.getLogger(__name__)

MAX_PATHS_AHEAD = 1000
"""Per-path offsets the index may hold ahead of ``committedOffset`` before the file holding the
offset back is committed early (see :meth:`SinkTask._commit_oldest`)."""


@dataclass
class _PartitionState:
    """What the task knows about one open Kafka partition."""

    tp: TopicPartition
    plan: SinkPlan
    statement: Statement
    """The plan's compiled statement (kept here: hashing the plan per batch to find it costs
    more than the rest of the lookups of a ``put``)."""
    index: PartitionIndex | None
    resumed: IndexState | None
    """The index as this task found it at ``open``: what was committed before (read-only; the
    live index belongs to whoever commits, see the module docstring)."""
    high: int = -1
    """Highest offset processed (written, or skipped as already committed)."""
    owed: dict[str, PendingCommit] = field(default_factory=dict)
    """Files the index owes, by slot, that the replay has not re-produced yet (see
    :meth:`SinkTask._write_owed`)."""
    hints: dict[str, Any] = field(default_factory=dict)
    """By slot, what the slot's last committed file tells the next one (``FormatWriter.start_from``);
    kept for layouts of one file per partition only, so it stays one entry per slot."""

    @property
    def partitioner(self) -> Partitioner:
        return self.statement.partitioner

    def skip_threshold(self, path: str) -> int:
        """Records of ``path`` at or below this offset are written already."""
        return self.high if self.resumed is None else max(self.high, self.resumed.skip_threshold(path))


class SinkTask:
    """One sink task. Thread-safe; see the module docstring for the locking rule.

    Attributes:
        task_id: a fresh UUID; recorded as the owner in the exactly-once index.
        fault_hook: tests set it to inject a crash after a commit step (:data:`COMMIT_STEPS`).
        background_commits: commit the files ``put`` fills on threads while the caller goes on
            consuming. Off for direct callers, which expect a full file to be committed when
            ``put`` returns; the runtime turns it on. A failure is raised by a later ``put``,
            naming the partition to rewind (``exc.partitions``).
        streaming_uploads: on storage that supports it (S3), files go up part by part
            (``connect.s3.multipart.part.size``) while they are written, so local staging holds
            about one part per open file (:mod:`sink.commit.parts`). On by default; turning it
            off (before ``open``) stages files whole, as before.
    """

    def __init__(self, observer: SinkObserver = NO_OBSERVER) -> None:
        self.task_id = uuid.uuid4().hex
        self.fault_hook: FaultHook | None = None
        self.settings: ConnectorSettings | None = None
        self.observer = observer
        self.background_commits = False
        self.before_commit: Callable[[], None] | None = None
        """Called before each file commit (any thread): the runtime flushes the dead-letter queue
        there, since a committed file lets a restart resume past the records it skipped."""
        self.streaming_uploads = True
        self._pruning = False
        """True while :meth:`_commit_oldest` commits files, so the commits it makes do not re-enter it."""
        self.files_committed = 0
        self._lock = threading.RLock()
        self._plans: tuple[SinkPlan, ...] = ()
        self._plan_by_topic: dict[str, SinkPlan] = {}
        self._renamed: dict[str, SinkPlan | None] = {}
        self._statements: dict[SinkPlan, Statement] = {}
        self._partitions: dict[TopicPartition, _PartitionState] = {}
        self._pool = WriterPool(1)
        self._storage: Storage | None = None
        self._committer: Committer | None = None
        self._staging: StagingArea | None = None
        self._timer: FlushTimer | None = None
        self._queue: CommitQueue[PartitionWriter] = CommitQueue(self._commit_job)

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
        self._plans, padding_problems = with_connector_padding(plans, settings)
        if padding_problems:
            raise ConfigError(padding_problems)
        self._statements = compile_statements(settings, self._plans)
        self._storage = create_storage(settings.storage)
        for bucket in sorted({plan.bucket for plan in self._plans}):
            self._storage.check_bucket(bucket)
        self._committer = Committer(self._storage, settings.name, settings.exactly_once.commit_protocol)
        self._committer.fault_hook = self._fire_fault
        self._staging = StagingArea(settings.writers.staging_dir, settings.name, self.task_id)
        budget = process_budget()
        if settings.writers.max_open_writers > budget.limit:
            log.warning(
                "connect.s3.max.open.writers=%d is more than the process's file descriptors allow "
                "(RLIMIT_NOFILE less %d for sockets): at most %d staging files stay open at once, "
                "shared by the process's tasks; beyond that the least recently used file is committed",
                settings.writers.max_open_writers, RESERVED, budget.limit,
            )
        self._pool = WriterPool(settings.writers.max_open_writers, budget)
        shortest = min((s.policy.interval for s in self._statements.values()), default=1.0)
        self._timer = FlushTimer(self.flush_due, self._lock, shortest, f"kcql-sink-flush-{settings.name}")
        log.info(
            "task %s of connector %s started: %d statement(s), storage %s, exactly-once %s",
            self.task_id, settings.name, len(self._plans), self._storage,
            f"on ({self._committer.protocol} commits)" if settings.exactly_once.enabled else "off",
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
                resumed = index.state if index else None
                state = _PartitionState(tp, plan, self._statements[plan], index, resumed)
                if index is not None:
                    state.owed = {owed.path: owed for owed in index.state.owed}
                committed = index.state.committed_offset if index else None
                if committed is not None:
                    state.high = committed
                    resume[tp] = committed + 1
                self._partitions[tp] = state
            return resume

    def put(self, batch: RecordBatch) -> None:
        """Write the records of ``batch``; commit the files that fill up (see the module docstring).

        Raises:
            RecordError: a record cannot be converted, placed or written; the ones before it were.
            FencedError: another task owns the partition now (its writers were dropped).
            StorageError: a commit failed (``retriable`` says whether to try again); an error of a
                background commit names its partition in ``exc.partitions``.
            SinkError: the partition is not open on this task.
        """
        self._started()
        with self._lock:
            self._raise_pending_errors()
            state = self._partition(batch)
            if batch.topic == batch.source_topic:
                plan, statement = state.plan, state.statement
            else:
                plan = self._plan_renamed(state, batch.topic)
                statement = self._statements[plan]
            for path, part in statement.partitioner.split(batch):
                slot = writer_slot(batch.topic, batch.source_topic, path)
                threshold = state.skip_threshold(slot)
                if part.first_offset <= threshold:  # a replay: drop what is already written
                    skip = part.count_through(threshold)
                    state.high = max(state.high, part.offset_at(skip - 1))
                    if skip == len(part):
                        continue
                    part = part.slice(skip)
                if statement.projection is not None:
                    part = statement.projection.batch(part)
                self._write(state, plan, statement, slot, part)
            self._check_owed(state)
            self._enforce_staging_budget()

    def prefetch(self, batch: RecordBatch) -> bool:
        """Let the file(s) ``batch`` will go to start computing ahead (PARQUET: parsing, on the
        batch's helper thread); whether anything was started. Only for statements whose layout is
        one file per partition; writes nothing.

        A batch that fills the open file and starts the next one is parsed ahead all the same:
        the parse is memoised by schema, so the next file takes it if its schema comes out the
        same; and a next file whose schema is not fixed yet parses ahead with its predecessor's
        parser (``FormatWriter.start_from``). A batch whose file is not open yet (the partition's
        first, or the next after a commit) is parsed ahead into the schema its first record
        infers (``FileFormat.prefetch_first``). Before, each new file's first batches were parsed
        on the consuming thread.
        """
        with self._lock:
            state = self._partitions.get(TopicPartition(batch.source_topic, batch.partition))
            if state is None or batch.topic != batch.source_topic or not state.partitioner.is_default:
                return False
            path, _ = next(state.partitioner.split(batch))  # one slice: the batch itself
            writer = self._pool.get((batch.topic, batch.partition, path))
            if writer is None:  # its file opens at the put: what its first append will compute
                return state.statement.projection is None and state.statement.format.prefetch_first(batch)
            if writer.finished or writer.holds_owed_file:
                return False
            return writer.prefetch(batch)

    def processed(self, tp: TopicPartition, next_offset: int) -> None:
        """Every record of ``tp`` before ``next_offset`` was handed to :meth:`put` or deliberately
        left out (a transform dropped it, a tombstone under ``behavior.on.null.values=ignore``, a
        bad record the error policy skipped): :meth:`pre_commit` may move past them once nothing
        before them waits in an open file, and a replay of them is skipped. Without this, records
        a transform drops at the end of a run would hold the Kafka offset back until a later record
        is written (forever, on a topic a Filter drops whole)."""
        with self._lock:
            state = self._partitions.get(TopicPartition(tp.topic, tp.partition))
            if state is not None:
                state.high = max(state.high, next_offset - 1)

    def pre_commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The next offset safe to commit to Kafka for each given partition we own.

        Never past the first record still in an uncommitted file, nor past ``offsets[tp]``.
        """
        with self._lock:
            self._reap()
            result: dict[TopicPartition, int] = {}
            for tp, consumed in offsets.items():
                state = self._partitions.get(TopicPartition(tp.topic, tp.partition))
                if state is None:
                    continue
                safe = self._safe_offset(state)
                if safe >= 0:
                    known = consumed is not None and consumed >= 0
                    result[state.tp] = min(safe + 1, consumed) if known else safe + 1
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
                    # oldest first: each commit then moves committedOffset up, so the index's
                    # per-path entries stay few however many files the partition has open
                    for writer in sorted(self._pool.for_partition(tp), key=_first_offset):
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
        if self._timer is not None:
            self._timer.stop()
        with self._lock:
            for tp in list(self._partitions):
                self._drop_partition(tp)
            for writer in self._pool.all():
                writer.discard()
                self._pool.remove(writer)
            self._queue.close()
            if self._staging is not None:
                self._staging.close()
            if self._storage is not None:
                self._storage.close()
            self._timer = None

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
                    if self._timer is not None:
                        self._timer.keep_error(_naming(exc, writer.tp))  # the partition to rewind

    # -- writing ---------------------------------------------------------------------------------

    def _partition(self, batch: RecordBatch) -> _PartitionState:
        tp = TopicPartition(batch.source_topic, batch.partition)
        state = self._partitions.get(tp)
        if state is None:
            raise SinkError(f"put() received records of {tp}, which is not open on this task (call open())")
        return state

    def _write(
        self, state: _PartitionState, plan: SinkPlan, statement: Statement, slot: str, part: RecordBatch
    ) -> None:
        """Append ``part`` (records of one slot) to its open files, committing each that fills up.

        A file never ends between records that share an offset (a transform's fan-out): the
        index counts committed records by offset, so a replay would skip the rest of the group,
        and both files would get the same name. A count roll takes the whole group (the file
        may exceed flush.count by the group's size).
        """
        key: WriterKey = (state.tp.topic, state.tp.partition, slot)
        writer = self._pool.get(key)
        # one file per partition at a time: only then may the commit queue take full files
        background = statement.partitioner.is_default and TOPIC_SEPARATOR not in slot
        while True:
            if writer is not None and writer.finished:  # a commit failed earlier: retry it first
                self._commit_writer(writer, "retry")
                writer = None
            if writer is None:
                writer = self._open_writer(plan, key)
            if writer.holds_owed_file:
                taken = self._write_owed(state, writer, part)
                if not writer.holds_owed_file:  # complete: exactly the announced file
                    self._commit_writer(writer, "roll forward")
                    writer = None
                if taken == len(part):
                    return
                part = part.slice(taken)
                continue
            room = writer.policy.room(writer.record_count)
            if room <= 0:
                self._commit_writer(writer, "count", background)
                writer = None
                continue
            if len(part) > room and part.offset_at(room - 1) == part.offset_at(room):
                room = part.count_through(part.offset_at(room))  # keep a fan-out group together
            chunk = part if len(part) <= room else part.slice(0, room)
            try:
                taken = writer.append(chunk)
            finally:
                if writer.last_offset >= 0:
                    state.high = max(state.high, writer.last_offset)
            if taken < len(chunk):  # the next record must start a new file (a schema change)
                if taken == 0 and writer.record_count == 0:
                    raise SinkError(f"the {plan.format} writer accepted no record at {chunk!r}")
                if taken and chunk.offset_at(taken - 1) == chunk.offset_at(taken):
                    raise _split_group(chunk, taken)
                self._commit_writer(writer, "schema change", background)
                writer = None
            else:
                reason = writer.due(time.monotonic())
                if reason is not None:
                    self._commit_writer(writer, reason, background)
                    writer = None
            if taken == len(part):
                return
            part = part.slice(taken)

    def _write_owed(self, state: _PartitionState, writer: PartitionWriter, part: RecordBatch) -> int:
        """Append the records of ``part`` that belong to the owed file ``writer`` re-produces; how many.

        The index announced that file (``writer.owed``) before a crash and cannot take it back: a
        zombie may still PUT it. So it must come out exactly as announced: the slot's records from
        its first offset through its last, whatever the flush limits say (they do not apply), cut
        right after the last. A replay that cannot give exactly those records (they are gone from
        Kafka, or a transform or the format now behaves differently) is an error naming the file,
        not a silent loss or duplicate.
        """
        owed = writer.owed
        assert owed is not None  # noqa: S101 - only called for such writers
        first = owed.first_offset
        if writer.record_count == 0 and first is not None and part.first_offset != first:
            raise self._owed_error(state, owed, f"its first record is now offset {part.first_offset}")
        room = part.count_through(owed.last_offset)
        if room == 0:
            raise self._owed_error(state, owed, f"the next record of its path is offset {part.first_offset}")
        chunk = part if len(part) <= room else part.slice(0, room)
        try:
            taken = writer.append(chunk)
        finally:
            if writer.last_offset >= 0:
                state.high = max(state.high, writer.last_offset)
        if taken < len(chunk):
            where = chunk.offset_at(taken)
            raise self._owed_error(state, owed, f"the format starts a new file at offset {where}")
        if not writer.holds_owed_file:
            state.owed.pop(writer.path, None)
        return taken

    def _check_owed(self, state: _PartitionState) -> None:
        """Raise if the replay went past an owed file's last offset without re-producing it."""
        for owed in state.owed.values():
            if state.high >= owed.last_offset:
                raise self._owed_error(state, owed, f"the replay reached offset {state.high} without it")

    def _owed_error(self, state: _PartitionState, owed: PendingCommit, why: str) -> CommitError:
        where = self._storage.uri(state.plan.bucket, owed.final_key) if self._storage else owed.final_key
        return CommitError(
            f"partition {state.tp}: cannot re-produce {where}, the file an interrupted commit announced "
            f"(records {owed.first_offset}..{owed.last_offset} of path {owed.path!r}): {why}. A task "
            "that died mid-commit may still upload it, so it cannot be rolled back; check that Kafka "
            "still retains those offsets and that the transforms and KCQL are unchanged. To accept "
            "that these records may be missing or stored twice, remove the entry from \"owed\" in "
            f"{state.index.where if state.index else 'the index'} and restart"
        )

    def _open_writer(self, plan: SinkPlan, key: WriterKey) -> PartitionWriter:
        while self._pool.full:
            lru = self._pool.least_recently_used()
            if lru is None:  # every open file is an owed one still being re-produced
                break
            self._commit_writer(lru, "max open writers")
        assert self._staging is not None  # noqa: S101
        statement = self._statements[plan]
        tp = TopicPartition(key[0], key[1])
        writer = PartitionWriter(
            key, plan, statement.format, self._staging.new_file(tp, statement.format.extension),
            statement.policy, time.monotonic(), self._streaming_upload(plan, tp),
        )
        state = self._partitions.get(tp)
        if state is not None:
            writer.owed = state.owed.get(key[2])
            hint = state.hints.get(key[2])
            if hint is not None and writer.owed is None:  # an owed file is re-produced as it was
                writer.start_from(hint)
        self._pool.add(writer)
        return writer

    def _enforce_staging_budget(self) -> None:
        """Commit the largest open files early when staging exceeds ``connect.s3.local.tmp.max.bytes``.

        Checked once per ``put`` (the overshoot is at most one batch), down to three quarters of
        the budget so that the next check does not fire again at once.
        """
        budget = self.settings.writers.staging_max_bytes if self.settings else None
        if not budget:
            return
        writers = [w for w in self._pool.all() if not w.finished and w.record_count and not w.holds_owed_file]
        total = sum(w.local_bytes for w in writers)  # a streamed file's uploaded parts are not local
        if total <= budget:
            return
        for writer in sorted(writers, key=lambda w: w.local_bytes, reverse=True):
            if total <= budget * 3 // 4:
                break
            total -= writer.local_bytes
            self._commit_writer(writer, "staging budget")

    # -- committing ------------------------------------------------------------------------------

    def _safe_offset(self, state: _PartitionState, excluding: PartitionWriter | None = None) -> int:
        """The highest offset below every record not yet committed (open files and queued ones)."""
        firsts = [
            self._pool.min_first_offset(state.tp, excluding), self._queue.first_offset(state.tp),
            *(owed.first_offset for owed in state.owed.values()),
        ]
        known = [f for f in firsts if f is not None]
        return state.high if not known else min(known) - 1

    def _commit_writer(self, writer: PartitionWriter, reason: str, background: bool = False) -> None:
        """Finish ``writer``'s file and commit it; it leaves the pool only once committed.

        With ``background`` (and :attr:`background_commits` on) the file goes to the commit queue
        instead; every other commit waits for the queue first, so a partition's files reach the
        index in order.
        """
        if writer not in self._pool.for_partition(writer.tp):
            return  # already committed (early, by _commit_oldest) while the caller iterated a snapshot
        if writer.holds_owed_file:
            return  # not the announced file yet: it commits itself at its last offset
        if writer.broken is not None:  # the staging disk was full: the file may end mid-record
            raise writer.broken
        state = self._partitions[writer.tp]
        if state.partitioner.is_default:
            hint = writer.successor_hint()
            if hint is not None:
                state.hints[writer.key[2]] = hint
        if background and self.background_commits and not writer.finished:
            failed = self._queue.failure(state.tp)
            if failed is not None:
                raise _naming(failed, state.tp)
            job = CommitJob(state.tp, writer, writer.first_offset, self._safe_offset(state, writer), reason)
            self._pool.remove(writer)
            self._queue.submit(job)
            return
        self._reap(self._queue.drain())
        failed = self._queue.failure(state.tp)
        if failed is not None:
            raise _naming(failed, state.tp)
        try:
            committed = self._commit_file(state, writer, self._safe_offset(state, excluding=writer), reason)
        except FencedError:
            self._drop_partition(writer.tp)
            raise
        if committed:
            self.files_committed += 1
        writer.discard()  # removes the staging file
        self._pool.remove(writer)
        if state.index is not None and len(state.index.state.paths) > MAX_PATHS_AHEAD:
            self._commit_oldest(state)

    def _commit_job(self, job: CommitJob[PartitionWriter]) -> None:
        """A commit thread's work (no task lock: the queue owns the partition's index meanwhile)."""
        self._commit_file(self._partitions[job.tp], job.writer, job.committed_after, job.reason)

    def _commit_file(
        self, state: _PartitionState, writer: PartitionWriter, committed_after: int, reason: str
    ) -> bool:
        """Finish the file and make it visible (exactly once when the index is on); False when empty."""
        assert self._committer is not None  # noqa: S101
        if self.before_commit is not None:
            self.before_commit()
        writer.finish()
        if writer.first_offset is None:
            return False
        meta = writer.meta()
        final_key = object_key(writer.plan, meta)
        if writer.owed is not None:  # the announced file, under the announced key, verbatim
            final_key = writer.owed.final_key
        started = time.perf_counter()
        if writer.streamed:
            self._commit_streamed(state, writer, final_key, meta.last_offset, committed_after)
        elif state.index is not None:
            self._committer.commit_exactly_once(
                state.index, writer.staging_path, final_key, writer.path, meta.last_offset, committed_after,
                meta.first_offset,
            )
        else:
            self._committer.commit_direct(writer.plan.bucket, writer.staging_path, final_key)
        log.debug("committed %s (%d records, %s)", final_key, meta.record_count, reason)
        self.observer.file_committed(
            state.tp, final_key, meta.record_count, writer.bytes_written, time.perf_counter() - started
        )
        return True

    # -- streamed files (sink.commit.parts) --------------------------------------------------------

    def _streaming_upload(self, plan: SinkPlan, tp: TopicPartition) -> StreamingUpload | None:
        """The part sink for a new file of ``tp``, when files stream (S3, :attr:`streaming_uploads`)."""
        storage, settings = self._storage, self.settings
        if not (self.streaming_uploads and storage is not None and settings is not None):
            return None
        if not storage.supports_streaming:
            return None
        part_size = settings.storage.s3.multipart_chunk
        state = self._partitions.get(tp)
        # the bucket the commit copies within: the index's with exactly-once, as commit_exactly_once
        bucket = state.index.bucket if state is not None and state.index is not None else plan.bucket
        return StreamingUpload(storage, bucket, temp_prefix(settings.name, tp), part_size)

    def _commit_streamed(
        self, state: _PartitionState, writer: PartitionWriter, final_key: str, last_offset: int,
        committed_after: int,
    ) -> None:
        """Complete the file's upload (its rest is the last part), then commit it from its temporary key."""
        assert self._committer is not None and writer.upload is not None  # noqa: S101
        temp_key, etag = writer.upload.complete(writer.staging_path)
        if state.index is not None:
            self._committer.commit_uploaded(
                state.index, temp_key, etag, final_key, writer.path, last_offset, committed_after
            )
        else:
            self._committer.commit_uploaded_direct(writer.upload.bucket, temp_key, etag, final_key)
        writer.upload.committed = True

    def _reap(self, done: list[CommitJob[PartitionWriter]] | None = None) -> None:
        """Account for the background commits that are done."""
        for job in self._queue.reap() if done is None else done:
            if job.first_offset is not None:
                self.files_committed += 1
            job.writer.discard()  # removes the staging file

    def raise_pending_errors(self) -> None:
        """Raise what failed on the flush timer or in a background commit since the last call,
        naming its partition (``exc.partitions``). The runtime calls it on every poll: a partition
        that receives no more records would otherwise never hear of its failed commit, and the
        timer would retry that commit every tick for as long as storage is down. It never waits:
        while the timer holds the lock (uploading) the check is left to the next poll."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            self._raise_pending_errors()
        finally:
            self._lock.release()

    def _raise_pending_errors(self) -> None:
        """Raise what failed since the last call: a timer flush, or a background commit (naming
        its partition, which the caller must rewind)."""
        if self._timer is not None:
            self._timer.raise_error()
        self._reap()
        failed = self._queue.take_error()
        if failed is not None:
            tp, error = failed
            raise _naming(error, tp)

    def _commit_oldest(self, state: _PartitionState) -> None:
        """Commit the open file that holds the partition's committed offset back.

        A file that keeps receiving records (a "hot" PARTITIONBY value) stays open until its
        flush limits, and meanwhile every other path committed adds an entry to the index's
        per-path offsets; as each index write rewrites the whole object, that would grow the
        index and cost quadratic time. Committing the oldest file moves ``committedOffset`` up,
        which prunes those entries.
        """
        if self._pruning:
            return  # the loop below is already running further up the stack
        self._pruning = True
        try:
            # a loop, not recursion through _commit_writer: with thousands of open files the
            # recursion went past Python's stack limit (10,000 PARTITIONBY values at close)
            while state.index is not None and len(state.index.state.paths) > MAX_PATHS_AHEAD:
                holders = [w for w in self._pool.for_partition(state.tp)
                           if w.first_offset is not None and not w.finished and not w.holds_owed_file]
                if not holders:
                    break
                self._commit_writer(min(holders, key=_first_offset), "index size")
        finally:
            self._pruning = False

    def _drop_partition(self, tp: TopicPartition) -> None:
        for job in self._queue.forget(tp):
            job.writer.discard()  # not committed: its records are replayed
        for writer in self._pool.for_partition(tp):
            writer.discard()
            self._pool.remove(writer)
        self._partitions.pop(tp, None)
        if self._staging is not None:
            self._staging.clear_partition(tp)

    # -- helpers ---------------------------------------------------------------------------------

    def _fire_fault(self, step: str) -> None:
        hook = self.fault_hook
        if hook is not None:
            hook(step)

    def _started(self) -> tuple[ConnectorSettings, Storage, Committer, StagingArea]:
        if self.settings is None or self._storage is None or self._committer is None or self._staging is None:
            raise SinkError("the task is not started: call start(config) first")
        return self.settings, self._storage, self._committer, self._staging

    def _plan_renamed(self, state: _PartitionState, topic: str) -> SinkPlan:
        """The statement for records a transform renamed to ``topic``: the one that names it, as
        Connect hands a sink the renamed record (Lenses finds its KCQL by that topic), else the
        consumed topic's."""
        if topic not in self._renamed:
            self._renamed[topic] = plan_for_topic(self._plans, topic)
        return self._renamed[topic] or state.plan

    def _plan_for(self, topic: str) -> SinkPlan:
        plan = self._plan_by_topic.get(topic)
        if plan is None:
            plan = plan_for_topic(self._plans, topic)
            if plan is None:
                raise SinkError(
                    f"Can't find the KCQL for source topic [{topic}]: add a statement "  # noqa: S608
                    f"INSERT INTO <bucket>:<prefix> SELECT * FROM {topic}"
                )
            self._plan_by_topic[topic] = plan
        return plan


def _first_offset(writer: PartitionWriter) -> int:
    return writer.first_offset if writer.first_offset is not None else -1


def _split_group(chunk: RecordBatch, taken: int) -> RecordError:
    """The error for a fan-out group whose records need two files (their schemas differ)."""
    offset = chunk.offset_at(taken)
    return RecordError(
        f"a transform made several records of the message at topic {chunk.source_topic!r} partition "
        f"{chunk.partition} offset {offset} that need different files (their schemas differ) in one "
        "partition path; records of one message must share a file, as the file name and the "
        "exactly-once index count by offset",
        offset=offset,
        stage="TRANSFORMATION",
    )


def _naming(error: BaseException, tp: TopicPartition) -> BaseException:
    """``error``, marked with the partition the caller must rewind (``error.partitions``)."""
    error.partitions = {tp}  # type: ignore[attr-defined]
    return error
