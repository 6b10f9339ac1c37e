"""The Python transform ``make bench`` times (``json_to_parquet_mapper``): a typical one-field map."""

from __future__ import annotations

from sink.records.record import SinkRecord


def lower_country(record: SinkRecord) -> SinkRecord:
    """The value with ``country`` lower-cased (the bench data has it upper case), in a new dict."""
    value = dict(record.value)
    value["country"] = value["country"].lower()
    record.value = value
    return record
