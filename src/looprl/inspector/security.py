"""The inspector's defences: loopback-only by default, an access token otherwise, inert pages.

- `check_bind`: a non-loopback host without a token is refused before anything starts.
- `SecurityMiddleware`: with a token, every request must carry it, as `Authorization: Bearer T`, a
  `?token=T` query parameter (which also sets an HttpOnly cookie, so links and the page's own requests
  keep working) or that cookie. Every response gets a strict Content-Security-Policy (no inline
  script, nothing from outside this server) and headers that stop sniffing, framing and referrers.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlencode

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
        raise UserError(f"--host {host} would expose every rollout on the network; pass --token TOKEN "
                        "(or set LOOPRL_INSPECTOR_TOKEN) so requests must carry it, or bind 127.0.0.1")


class SecurityMiddleware(BaseHTTPMiddleware):
    """Token check (when a token is set) and security headers on every response."""

    def __init__(self, app, token: str | None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(app)
        self.token = token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await self._authorised(request, call_next)
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
