"""Final object keys of committed files, and the example key ``kcql explain`` shows.

Lenses naming (reference §4.1): default layout ``<pad(lastOffset)>_<minTs>_<maxTs><suffix>.<ext>``,
PARTITIONBY and NOPARTITION ``<topic>(<pad(partition)>_<pad(lastOffset)>)<suffix>.<ext>``.
Confluent naming: ``<prefix or "topics">/<path>/<topic>+<partition>+<firstOffset %010d><suffix>.<ext>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kcql.model import FileNaming
from partitioners.escaping import escape
from partitioners.partitioner import default_path

if TYPE_CHECKING:
    from kcql.model import SinkPlan
    from partitioners.base import FileMeta

__all__ = ["CONFLUENT_DEFAULT_TOPICS_DIR", "base_prefix", "example_key", "object_key"]

CONFLUENT_DEFAULT_TOPICS_DIR = "topics"
"""Confluent's ``topics.dir`` default, used as the prefix when the KCQL target has none."""


def base_prefix(plan: SinkPlan) -> str:
    """The key prefix every data file of ``plan`` starts with, with its trailing ``/`` (or ``""``)."""
    prefix = plan.prefix.strip("/")
    if plan.naming == FileNaming.CONFLUENT and not prefix:
        prefix = CONFLUENT_DEFAULT_TOPICS_DIR
    return prefix + "/" if prefix else ""


def _file_name(
    plan: SinkPlan, topic_seg: str, partition: int, last: str, first: str, times: str, ext: str
) -> str:
    suffix = plan.key_suffix
    if plan.naming == FileNaming.CONFLUENT:
        return f"{topic_seg}+{partition}+{first}{suffix}.{ext}"
    if plan.partition_by == ():
        return f"{last}_{times}{suffix}.{ext}"
    return f"{topic_seg}({escape(plan.padding.pad_partition(partition))}_{last}){suffix}.{ext}"


def object_key(plan: SinkPlan, meta: FileMeta) -> str:
    """The full key (inside the bucket, no leading ``/``) of a committed file.

    ``meta.path`` must be the writer's path from :meth:`Partitioner.path_for`; the key is a pure
    function of the plan and ``meta``, so a retried commit writes the same key.
    """
    name = _file_name(
        plan,
        escape(meta.topic),
        meta.partition,
        escape(plan.padding.pad_offset(meta.last_offset)),
        f"{meta.first_offset:010d}",
        f"{meta.min_timestamp}_{meta.max_timestamp}",
        meta.extension,
    )
    directories = meta.path + "/" if meta.path else ""
    return base_prefix(plan) + directories + name


TOPIC_PLACEHOLDER = "<topic>"
TIMES_PLACEHOLDER = "<minTs>_<maxTs>"


def example_key(plan: SinkPlan, extension: str) -> str:
    """The key of the file holding the first record (partition 0, offset 0) of the source topic.

    Record-derived parts are shown as ``<spec>`` placeholders (``<_value.a.b>``, ``<_key>``,
    ``<_header.h>``, ``<_date.uuuu>``), the topic as ``<topic>`` when the source is ``*``, and the
    timestamps of the default Lenses name as ``<minTs>_<maxTs>``. Stable: ``kcql explain`` prints it.
    """
    wildcard = plan.source == "*"
    topic_seg = TOPIC_PLACEHOLDER if wildcard else escape(plan.source)
    if plan.partition_by is None:
        path = ""
    elif not plan.partition_by:
        path = default_path(plan, plan.source, 0, topic_segment=topic_seg)
    else:
        segments = [topic_seg] if plan.naming == FileNaming.CONFLUENT else []
        for field in plan.partition_by:
            if field.kind == "topic":
                value = topic_seg
            elif field.kind == "partition":
                value = escape(plan.padding.pad_partition(0))
            else:
                value = f"<{field.spec}>"
            segments.append(f"{escape(field.display_name)}={value}" if plan.include_keys else value)
        path = "/".join(segments)
    name = _file_name(
        plan, topic_seg, 0, escape(plan.padding.pad_offset(0)), f"{0:010d}", TIMES_PLACEHOLDER, extension
    )
    return base_prefix(plan) + (path + "/" if path else "") + name
