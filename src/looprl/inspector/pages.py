"""The inspector's HTML pages: small server-rendered shells that the browser code fills from the API.

Each page carries only ids (autoescaped by Jinja) in `data-` attributes; everything from the run store
is fetched as JSON and put on the page with `textContent`, so no stored string is ever parsed as HTML.
"""

from __future__ import annotations

from pathlib import Path

import jinja2

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

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
    return templates.TemplateResponse(request, "page.html", {
        "page": "rollout", "title": rollout_id, "run": ref.id, "rollout": rollout_id})
