"""Which configuration values are secrets, and how a secret is shown: one rule for the whole sink.

Every place that shows a configuration value (errors, logs, ``repr``, every REST response, the
``/ui`` page) asks :func:`is_secret_key` and shows :data:`HIDDEN` instead of the value. There is
one rule so that a key hidden in one place is never shown in another.

The rule covers what Kafka Connect and the Lenses S3 sink declare as ``PASSWORD``-type keys, and
anything named like one, with any prefix (``consumer.override.``, ``value.converter.``, ...):

* a key containing ``password``, ``secret``, ``passphrase``, ``token``, ``access.key``,
  ``sasl.jaas.config`` or ``basic.auth.user.info`` (Lenses' ``connect.s3.aws.access.key`` and
  ``connect.s3.aws.secret.key``; Kafka's ``ssl.key.password``, ``ssl.keystore.password``,
  ``ssl.truststore.password``, ``sasl.jaas.config``,
  ``sasl.oauthbearer.assertion.private.key.passphrase``; librdkafka's ``sasl.password``; the
  Schema Registry's ``basic.auth.user.info`` and ``bearer.auth.token``);
* a key ending in ``ssl.keystore.key``, ``ssl.key.pem``, ``ssl.keystore.certificate.chain`` or
  ``ssl.truststore.certificates`` (Kafka's PEM-in-config keys, also ``PASSWORD``; librdkafka's
  ``ssl.key.pem`` holds a private key).

Matching is case-insensitive. Hiding a value that was not secret costs a little convenience;
showing one that was costs a credential, so the markers are deliberately broad.

``[hidden]`` is also what a client sends back when it edits a config it read from the REST API:
``PUT /connectors/{name}/config`` keeps the stored secret for a secret key whose value is exactly
:data:`HIDDEN` (see :mod:`sink.rest.routes`).
"""

from __future__ import annotations

__all__ = ["HIDDEN", "Secret", "is_secret_key", "mask"]

HIDDEN = "[hidden]"
"""What is shown instead of a secret value, everywhere."""

_SECRET_MARKERS = (
    "password",
    "secret",
    "passphrase",
    "token",
    "access.key",
    "sasl.jaas.config",
    "basic.auth.user.info",
)
_SECRET_SUFFIXES = (
    "ssl.keystore.key",
    "ssl.key.pem",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.certificates",
)


def is_secret_key(key: str) -> bool:
    """Whether the value of ``key`` must never be shown (logs, errors, REST responses, ``repr``)."""
    lowered = key.lower()
    return any(marker in lowered for marker in _SECRET_MARKERS) or lowered.endswith(_SECRET_SUFFIXES)


def mask(key: str, value: str) -> str:
    """``value`` as it may be shown: :data:`HIDDEN` when ``key`` is secret.

    An empty value stays empty (there is nothing to hide, and "is required" errors read better
    with ``''`` than with ``[hidden]``).
    """
    return HIDDEN if value and is_secret_key(key) else value


class Secret:
    """A secret string that never shows itself in ``repr``/``str``/logs; :meth:`reveal` to use it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself, for the one call that needs it (the boto3 client)."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({HIDDEN!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)
