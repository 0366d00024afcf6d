"""The inspector's defences: loopback-only by default, an access token otherwise, inert pages.

- `check_bind`: a non-loopback host without a token is refused before anything starts.
- Bound to a loopback address, the inspector answers only requests whose `Host` names a loopback
  address (`localhost`, `127.0.0.1`, `[::1]`, or the address it bound), any port (so an SSH tunnel
  to another local port works); anything else gets 403. That stops DNS rebinding: a web page on
  `evil.example` whose name the attacker re-points at 127.0.0.1 would otherwise be same-origin with
  the inspector and could read every rollout. Bound to any other address a token is required, and the
  token is the defence (clients reach the server by whatever name the network gives it).
- `SecurityMiddleware`: with a token, every request must carry it, as `Authorization: Bearer T`, a
  `?token=T` query parameter (which also sets an HttpOnly cookie, so links and the page's own requests
  keep working) or that cookie. Every response gets a strict Content-Security-Policy (no inline
  script, nothing from outside this server) and headers that stop sniffing, framing and referrers.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlencode, urlsplit

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from looprl.errors import UserError
from looprl.utils.net import is_loopback

COOKIE = "looprl_inspector_token"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve on a non-loopback address without an access token."""
    if not is_loopback(host) and not token:
        raise UserError(f"--host {host} would expose every rollout on the network; set LOOPRL_INSPECTOR_TOKEN "
                        "(or pass --token-file FILE) so requests must carry it, or bind 127.0.0.1")


def host_allowed(host_header: str, bound: str) -> bool:
    """Whether a request's `Host` may reach an inspector bound to `bound`: any host when `bound` is not a
    loopback address (a token guards it), else only a loopback name or `bound` itself, on any port."""
    if not is_loopback(bound):
        return True
    if any(c in host_header for c in "@/\\?#"):  # no browser sends these; `urlsplit` would read past them
        return False
    try:
        parts = urlsplit(f"//{host_header}")
        name, _ = parts.hostname, parts.port  # `.port` raises on a malformed one
    except ValueError:
        return False
    return name is not None and (is_loopback(name) or name == bound.strip("[]").lower())


class SecurityMiddleware(BaseHTTPMiddleware):
    """Host check (loopback binds), token check (when a token is set), security headers on every response."""

    def __init__(self, app, token: str | None, host: str) -> None:  # type: ignore[no-untyped-def]
        super().__init__(app)
        self.token = token
        self.host = host

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        host = request.headers.get("host", "")
        if host_allowed(host, self.host):
            response = await self._authorised(request, call_next)
        else:
            response = JSONResponse({"detail": f"Host {host!r} is not this inspector's address: open it as "
                                               "http://127.0.0.1:PORT/ or http://localhost:PORT/"}, status_code=403)
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    async def _authorised(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if not self.token:
            return await call_next(request)
        auth = request.headers.get("authorization", "")
        bearer = auth[7:] if auth.lower().startswith("bearer ") else None
        query = request.query_params.get("token")
        for candidate in (bearer, query, request.cookies.get(COOKIE)):
            if candidate and hmac.compare_digest(candidate.encode(), self.token.encode()):
                break
        else:
            return JSONResponse({"detail": "missing or wrong access token"}, status_code=401)
        if query is None:
            return await call_next(request)
        # the token came in the URL: keep it in a cookie and take it out of the address bar and history
        if request.method == "GET" and not request.url.path.startswith("/api/"):
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            response: Response = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303)
        else:
            response = await call_next(request)
        response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict", path="/")
        return response
