"""The replay position: which archived records have landed in Kafka, written inside each transaction.

A position is one JSON record in a position topic (default ``_kcql-sink-replay-positions``; the
partition of the name's hash, see :func:`sink.replay.producer.position_partition`), keyed by the
replay's name and produced in the same Kafka transaction as the records it
accounts for, after they were acknowledged. So it commits (or aborts) with them: on Kafka a
``read_committed`` reader of the position topic sees exactly the position of the last committed
transaction. It holds, per statement (``bucket:prefix``):

* ``tps``: per archived ``topic/partition``, the sort key (last offset, object key) of the last
  fully replayed file; in layouts without PARTITIONBY a partition's files hold consecutive offsets
  and are committed in that order, so every file up to it is done;
* ``done``: with PARTITIONBY (where a later file may end below an earlier one), the keys of the
  fully replayed files;
* ``partial``: ``{key: n}`` for files a transaction ended inside (their first n records landed);

and, per target partition, ``targets``: the offset after the last record this replay produced or
recognised there (used at restart, see :mod:`sink.replay.producer`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kcql.errors import SinkError
from spark_reader.catalog import DataFile

__all__ = ["PlanPosition", "Position", "PositionError"]


class PositionError(SinkError):
    """The stored position cannot be read (names the topic and the key)."""


@dataclass
class PlanPosition:
    """How far one statement's files have been replayed."""

    partitioned: bool
    tps: dict[str, tuple[int, str]] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    partial: dict[str, int] = field(default_factory=dict)

    def is_done(self, f: DataFile) -> bool:
        """Whether every record of ``f`` has landed."""
        if self.partitioned:
            return f.key in self.done
        last = self.tps.get(_tp(f))
        if last is None:
            return False
        off = f.last_offset if f.last_offset is not None else (f.first_offset or 0)
        return (off, f.key) <= last

    def skip_in(self, f: DataFile) -> int:
        """How many leading records of ``f`` already landed (a transaction ended inside it)."""
        return self.partial.get(f.key, 0)

    def file_done(self, f: DataFile) -> None:
        if self.partitioned:
            self.done.add(f.key)
        else:
            off = f.last_offset if f.last_offset is not None else (f.first_offset or 0)
            self.tps[_tp(f)] = (off, f.key)
        self.partial.pop(f.key, None)

    def file_partial(self, f: DataFile, n: int) -> None:
        if n > 0:
            self.partial[f.key] = n

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tps": {k: [v[0], v[1]] for k, v in sorted(self.tps.items())}}
        if self.partitioned:
            out["done"] = sorted(self.done)
        out["partial"] = dict(sorted(self.partial.items()))
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], partitioned: bool) -> PlanPosition:
        partial = data.get("partial")
        return cls(
            partitioned=partitioned,
            tps={k: (int(v[0]), str(v[1])) for k, v in (data.get("tps") or {}).items()},
            done=set(data.get("done") or ()),
            partial={str(k): int(v) for k, v in (partial or {}).items()},
        )


def _check_version(body: Any) -> None:
    if not isinstance(body, dict) or body.get("version") != 1:
        raise ValueError("not a version 1 replay position")


def _tp(f: DataFile) -> str:
    return f"{f.topic}/{f.partition}"


@dataclass
class Position:
    """The whole replay's position: per statement, plus per target topic and partition."""

    plans: dict[str, PlanPosition] = field(default_factory=dict)
    targets: dict[str, dict[int, int]] = field(default_factory=dict)
    found: bool = False
    """True when it was read from the position topic (False: a first run)."""

    def plan(self, plan_id: str, partitioned: bool) -> PlanPosition:
        pos = self.plans.get(plan_id)
        if pos is None:
            pos = self.plans[plan_id] = PlanPosition(partitioned)
        return pos

    def landed(self, topic: str, partition: int, offset: int) -> None:
        """A record of ours is at ``offset``: the next one is after it."""
        parts = self.targets.setdefault(topic, {})
        parts[partition] = max(parts.get(partition, 0), offset + 1)

    def to_bytes(self) -> bytes:
        body = {
            "version": 1,
            "plans": {k: v.to_json() for k, v in sorted(self.plans.items())},
            "targets": {
                t: {str(p): o for p, o in sorted(ps.items())} for t, ps in sorted(self.targets.items())
            },
        }
        return json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, partitioned: dict[str, bool], where: str) -> Position:
        try:
            body = json.loads(data)
            _check_version(body)
            plans = {
                k: PlanPosition.from_json(v, partitioned.get(k, False))
                for k, v in (body.get("plans") or {}).items()
            }
            targets = {
                t: {int(p): int(o) for p, o in ps.items()} for t, ps in (body.get("targets") or {}).items()
            }
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise PositionError(f"cannot read the replay position {where}: {exc}") from exc
        return cls(plans, targets, found=True)
