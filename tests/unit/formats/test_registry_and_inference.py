"""The public registry, extensions and codecs; schema inference and name sanitizing."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

import formats
from formats import FormatSettings, extension_for, get_format, supported_codecs
from formats.base import FileFormat, FormatError
from formats.schema_inference import IncompatibleSchemas, desanitize_name, infer, merge, sanitize_name
from kcql.model import StoreFormat
from tests.unit.formats.records import CREATED

LENSES_EXTENSIONS = {
    StoreFormat.JSON: "json",
    StoreFormat.AVRO: "avro",
    StoreFormat.PARQUET: "parquet",
    StoreFormat.CSV: "csv",
    StoreFormat.CSV_WITHHEADERS: "csv",
    StoreFormat.TEXT: "text",
    StoreFormat.BYTES: "bytes",
}


@pytest.mark.parametrize("fmt", list(StoreFormat))
def test_every_format_is_registered_with_every_codec(fmt: StoreFormat) -> None:
    for codec in supported_codecs(fmt):
        instance = get_format(FormatSettings(format=fmt, codec=codec))
        assert isinstance(instance, FileFormat)
        assert instance.extension == extension_for(fmt, codec)
    assert extension_for(fmt) == LENSES_EXTENSIONS[fmt]


def test_codec_names_are_normalized_and_errors_list_the_choices() -> None:
    assert get_format(FormatSettings(format=StoreFormat.AVRO, codec="zstandard")).extension == "avro"
    assert get_format(FormatSettings(format=StoreFormat.PARQUET, codec="none")).extension == "parquet"
    with pytest.raises(
        FormatError, match="not supported for STOREAS PARQUET; supported: UNCOMPRESSED, SNAPPY"
    ):
        get_format(FormatSettings(format=StoreFormat.PARQUET, codec="LZO"))
    assert get_format(FormatSettings(format=StoreFormat.AVRO, codec="SNAPPY", level=3))  # level ignored
    with pytest.raises(FormatError, match=r"level 23 is out of range for ZSTD; expected 1\.\.22"):
        get_format(FormatSettings(format=StoreFormat.PARQUET, codec="ZSTD", level=23))
    assert get_format(FormatSettings(format=StoreFormat.AVRO, codec="XZ", level=9))


def test_public_api() -> None:
    assert {"get_format", "extension_for", "supported_codecs", "FormatSettings"} <= set(formats.__all__)


def test_infer_and_merge() -> None:
    schema = infer({"a": 1, "b": [1, 2.5], "c": {"d": date(2024, 1, 1)}, "e": Decimal("1.50"), "t": CREATED})
    fields = {f["name"]: f["type"] for f in schema["fields"]}
    assert fields["a"] == ["null", "long"]
    assert fields["b"] == ["null", {"type": "array", "items": "double"}]
    assert fields["c"][1]["fields"][0]["type"] == ["null", {"type": "int", "logicalType": "date"}]
    assert fields["e"][1]["scale"] == 2
    assert fields["t"][1]["logicalType"] == "timestamp-millis"
    merged = merge(infer({"a": 1}), infer({"b": "x", "a": 2.0}))
    assert [f["name"] for f in merged["fields"]] == ["a", "b"]
    assert merged["fields"][0]["type"] == ["null", "double"]
    with pytest.raises(IncompatibleSchemas):
        merge(infer({"a": 1}), infer({"a": "x"}))
    with pytest.raises(IncompatibleSchemas):
        infer({"a": object()})


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("ok_name", "ok_name"),
        ("trace-id", "trace_x2D_id"),
        ("1st", "_x31_st"),
        ("", "_x_"),
        ("a.b", "a_x2E_b"),
        ("_x_", "_x5F_x_"),
        ("a_x2D_b", "a_x5F_x2D_b"),
        ("ä", "_xE4_"),
    ],
)
def test_sanitize_examples(name: str, safe: str) -> None:
    assert sanitize_name(name) == safe
    assert desanitize_name(safe) == name


@given(st.text(max_size=20))
def test_sanitize_is_valid_and_reversible(name: str) -> None:
    safe = sanitize_name(name)
    assert safe[0].isalpha() or safe[0] == "_"
    assert all(ch.isascii() and (ch.isalnum() or ch == "_") for ch in safe)
    assert desanitize_name(safe) == name


@pytest.mark.parametrize("fmt", list(StoreFormat))
def test_staging_file_rules(tmp_path, fmt: StoreFormat) -> None:
    empty = tmp_path / "empty"
    empty.touch()  # as tempfile.mkstemp leaves it
    get_format(FormatSettings(format=fmt)).open(empty).abort()
    full = tmp_path / "full"
    full.write_bytes(b"data")
    with pytest.raises(FileExistsError):
        get_format(FormatSettings(format=fmt)).open(full)
    assert full.read_bytes() == b"data"


@pytest.mark.parametrize(
    "fmt", [StoreFormat.CSV, StoreFormat.CSV_WITHHEADERS, StoreFormat.TEXT, StoreFormat.BYTES]
)
def test_envelope_only_for_json_avro_parquet(fmt: StoreFormat) -> None:
    from kcql.model import EnvelopeFields

    with pytest.raises(FormatError, match=r"store\.envelope is supported for STOREAS JSON, AVRO and PARQUET"):
        get_format(FormatSettings(format=fmt, envelope=EnvelopeFields()))


def test_settings_for_plan() -> None:
    from formats import settings_for_plan
    from kcql.model import EnvelopeFields, SinkPlan

    plan = SinkPlan(bucket="b", prefix="p", source="t", format=StoreFormat.JSON, envelope=EnvelopeFields())
    settings = settings_for_plan(plan, "GZIP", 9)
    assert (settings.codec, settings.level, settings.envelope) == ("GZIP", 9, EnvelopeFields())
    assert get_format(settings).extension == "gz"
    own = SinkPlan(bucket="b", prefix="", source="t", format=StoreFormat.AVRO, compression_codec="SNAPPY")
    assert settings_for_plan(own, "DEFLATE", 5).codec == "SNAPPY"
    csv_plan = SinkPlan(bucket="b", prefix="", source="t", format=StoreFormat.CSV)
    assert settings_for_plan(csv_plan, "GZIP", 6).codec == "UNCOMPRESSED"  # connector default not forced
    assert settings_for_plan(csv_plan).schema_compatibility == "NONE"
