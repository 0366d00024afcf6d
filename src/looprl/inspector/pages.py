"""The inspector's HTML pages: small server-rendered shells that the browser code fills from the API.

Unknown runs, rollouts and paths get an HTML error page (the API keeps answering JSON). Each page
carries only ids (autoescaped by Jinja) in `data-` attributes; everything from the run store
is fetched as JSON and put on the page with `textContent`, so no stored string is ever parsed as HTML.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from looprl.inspector import queries
from looprl.inspector.api import run_ref
from looprl.inspector.catalog import RunRef

templates = Jinja2Templates(env=jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"), autoescape=True))
router = APIRouter(default_response_class=HTMLResponse)


@router.get("/")
def runs_page(request: Request) -> HTMLResponse:
    return templates.TemplateResponse(request, "page.html", {"page": "runs", "title": "Runs"})


@router.get("/runs/{run_id}")
def run_page(request: Request, ref: RunRef = Depends(run_ref)) -> HTMLResponse:
    return templates.TemplateResponse(request, "page.html", {"page": "run", "title": ref.id, "run": ref.id})


@router.get("/runs/{run_id}/rollouts/{rollout_id}")
def rollout_page(request: Request, rollout_id: str, ref: RunRef = Depends(run_ref)) -> HTMLResponse:
    with ref.source.connection() as conn:
        if queries.rollout_head(conn, ref.run_id, rollout_id) is None:
            raise HTTPException(404, f"no rollout {rollout_id!r} in run {ref.id!r}")
    return templates.TemplateResponse(request, "page.html", {
        "page": "rollout", "title": rollout_id, "run": ref.id, "rollout": rollout_id})


async def error_page(request: Request, exc: StarletteHTTPException) -> Response:
    """JSON under `/api`, an HTML page (with a way back) everywhere else."""
    if request.url.path.startswith("/api/") or exc.status_code < 400:
        return await http_exception_handler(request, exc)
    detail = exc.detail if isinstance(exc.detail, str) else "Not found."
    parts = request.url.path.split("/")
    run = parts[2] if len(parts) > 3 and parts[1] == "runs" and request.app.state.catalog.find(parts[2]) else None
    return templates.TemplateResponse(request, "error.html", {
        "title": f"{exc.status_code}", "status": exc.status_code, "detail": detail, "run": run},
        status_code=exc.status_code, headers=getattr(exc, "headers", None))
