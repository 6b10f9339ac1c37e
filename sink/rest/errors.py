"""Connect's REST error body: ``{"error_code": <http status>, "message": "..."}``.

Tools written for Kafka Connect (kcctl, Kafka UI, operators) parse this body, so every error the
worker returns, including unknown routes, has exactly this shape.
"""

from __future__ import annotations

__all__ = ["RestError"]


class RestError(Exception):
    """An error that maps to one HTTP status and Connect's message text."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def body(self) -> dict[str, object]:
        """The JSON body Connect's ``ConnectExceptionMapper`` produces."""
        return {"error_code": self.status, "message": self.message}
