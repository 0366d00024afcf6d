"""The gateway's HTTP client toward the upstream engines: aiohttp's connection pool, httpx's errors.

With every rollout in flight holding a connection, the pool's cost per request decides the gateway's
throughput: httpx's pool scans all its connections on each request and each response (quadratic in
the rollouts in flight, most of the gateway's CPU at 320 of them), aiohttp's does not. The gateway's
error handling stays in httpx's terms (`httpx.HTTPError` and its transport subclasses, which the
retry rule names), so each aiohttp failure is raised as the httpx error that means the same.

The session is created on first use, inside the event loop that serves the gateway.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx

JSON_HEADERS = {"Content-Type": "application/json"}


@dataclass
class UpstreamResponse:
    """An upstream's answer: its status and the body as received (forwarded to the env as is)."""

    status_code: int
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


def _as_httpx_error(e: Exception) -> httpx.HTTPError:
    """The httpx error for an aiohttp failure: refused or unresolvable connections are `ConnectError`, a
    connection the server dropped before answering `RemoteProtocolError`, a timeout `TimeoutException`."""
    message = str(e) or type(e).__name__
    if isinstance(e, aiohttp.ClientConnectorError):
        return httpx.ConnectError(message)
    if isinstance(e, aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError(message)
    if isinstance(e, (TimeoutError, aiohttp.ServerTimeoutError)):
        return httpx.TimeoutException(message)
    if isinstance(e, aiohttp.ClientPayloadError):
        return httpx.ReadError(message)
    if isinstance(e, aiohttp.ClientOSError):
        return httpx.WriteError(message) if "write" in message.lower() else httpx.ReadError(message)
    return httpx.TransportError(message)


class UpstreamClient:
    def __init__(self, headers: dict[str, str], *, timeout_s: float, connect_timeout_s: float, keepalive_s: float,
                 max_connections: int) -> None:
        self.headers = {**JSON_HEADERS, **headers}
        self.timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=connect_timeout_s)
        self.keepalive_s, self.max_connections = keepalive_s, max_connections
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.max_connections, keepalive_timeout=self.keepalive_s)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self.timeout, headers=self.headers,
                                                  auto_decompress=True)
        return self._session

    async def post(self, url: str, json: dict[str, Any]) -> UpstreamResponse:
        """POST `json` to `url`; transport failures raise the matching `httpx.HTTPError`."""
        data = _dumps(json)
        try:
            async with self._open().post(url, data=data) as response:
                return UpstreamResponse(response.status, await response.read())
        except (TimeoutError, aiohttp.ClientError) as e:
            raise _as_httpx_error(e) from e

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
