"""The inspector's FastAPI application: JSON API, HTML pages and packaged static assets.

`create_app(run_dirs, token=None, host="127.0.0.1")` opens each run store read-only and serves it;
nothing is fetched from outside this server (scripts, styles and plots ship in `static/`). `host` is
the address the server binds: on a loopback address, requests must name a loopback host
(`looprl.inspector.security`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from looprl.inspector import api, pages, rollout_analysis, run_analysis
from looprl.inspector.catalog import RunCatalog
from looprl.inspector.run_analysis import HistogramCache
from looprl.inspector.security import SecurityMiddleware
from looprl.inspector.tokens import TokenDecoder


def create_app(run_dirs: list[Path], token: str | None = None, host: str = "127.0.0.1") -> FastAPI:
    """An app serving the runs in `run_dirs` from a server bound to `host`; with `token`, every request must
    carry it."""
    catalog = RunCatalog([Path(d) for d in run_dirs])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        catalog.close()

    app = FastAPI(title="looprl inspector", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.catalog = catalog
    app.state.token_decoder = TokenDecoder()
    app.state.histograms = HistogramCache()
    app.add_middleware(SecurityMiddleware, token=token, host=host)
    app.mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static")
    app.include_router(api.router)
    app.include_router(rollout_analysis.router)
    app.include_router(run_analysis.router)
    app.include_router(pages.router)
    # Starlette types handlers for Exception, not the class they are registered for
    app.add_exception_handler(StarletteHTTPException, pages.error_page)  # type: ignore[arg-type]
    return app
