"""S3's bucket naming rules: checked when a connector config is validated and when a task starts.

A typo in a KCQL target (``INSERT INTO My_Bucket:...``) then fails with a sentence naming the rule
instead of an opaque ``InvalidBucketName`` from the first upload.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re

__all__ = ["bucket_name_problem"]

_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def bucket_name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid S3 bucket name (AWS's general-purpose rules), ``None`` if it is.

    Checked at start-up so that a typo in the KCQL target fails with this sentence instead of an
    opaque ``InvalidBucketName`` from the first upload.
    """
    if not 3 <= len(name) <= 63:
        return f"bucket names are 3 to 63 characters long, {name!r} has {len(name)}"
    if not _BUCKET_RE.fullmatch(name):
        return (
            f"bucket name {name!r} may only contain lower-case letters, digits, '.' and '-', "
            "and must start and end with a letter or digit"
        )
    if ".." in name:
        return f"bucket name {name!r} must not contain two adjacent periods"
    with contextlib.suppress(ValueError):
        ipaddress.IPv4Address(name)
        return f"bucket name {name!r} must not look like an IP address"
    return None
