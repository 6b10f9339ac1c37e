"""The fault proxy's own output: a client killed mid-request is what a chaos run does, not an error."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from chaos.proxy import FaultProxy


def _reset_mid_request(port: int) -> None:
    """Send half a request line, then close with SO_LINGER 0: the kernel answers with a reset,
    as it does for a SIGKILLed sink's open connections."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"PUT /bucket/key HTTP/1.1")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_a_client_reset_prints_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    with FaultProxy("http://127.0.0.1:9") as proxy:
        assert proxy._server is not None
        port = proxy._server.server_address[1]
        for _ in range(3):
            _reset_mid_request(port)
        time.sleep(0.5)  # the handler threads read, hit the reset and finish
    assert "Traceback" not in capsys.readouterr().err
