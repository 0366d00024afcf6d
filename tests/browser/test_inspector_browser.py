"""The rollout inspector in a real browser: Playwright drives Debian's chromium (never a downloaded one).

Opens a run, its Train and Eval tabs, filters and searches the rollout table, opens a rollout, switches
to its Rollout logs, walks prev/next with the keyboard, and checks that markup in a message, a tool
result and a log record stays text. Set INSPECTOR_SCREENSHOTS=DIR to save screenshots of the pages.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.unit.inspector.fake_store import XSS_LOG, XSS_MESSAGE, XSS_TOOL, build_store

pytestmark = pytest.mark.browser
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]

if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")


class Served(str):
    """The server's base URL, also carrying the run directory it serves."""

    run_dir: Path


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    import uvicorn

    from looprl.inspector.app import create_app

    run_dir = build_store(tmp_path_factory.mktemp("runs") / "toy-run")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app([run_dir]), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    served = Served(f"http://127.0.0.1:{port}")
    served.run_dir = run_dir
    yield served
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser, base_url):
    context = browser.new_context(base_url=base_url, viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.set_default_timeout(10_000)
    yield page
    context.close()


def shot(page, name: str) -> None:
    folder = os.environ.get("INSPECTOR_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / f"inspector-{name}.png"), full_page=True)


def rows(page):
    return page.locator("table.rollouts tbody tr[data-id]")


def test_run_page_tabs_filters_and_search(page):
    page.goto("/")
    page.get_by_role("link", name="toy-run").click()
    page.wait_for_url("**/runs/toy-run")
    expect = sync_api.expect
    expect(page.locator(".tab.active")).to_contain_text("Train")
    expect(rows(page)).to_have_count(8)
    expect(page.locator("figure.plot")).to_have_count(4)  # reward (+components), loss, entropy, lr
    expect(page.locator("td.zero-filled").first).to_be_visible()  # train-0-1 lacks `format`
    shot(page, "run-train")

    page.get_by_role("tab", name=re.compile("Eval")).click()
    expect(rows(page)).to_have_count(2)
    expect(page.locator("table.rollouts thead")).to_contain_text("style")
    page.get_by_role("tab", name=re.compile("Train")).click()
    expect(rows(page)).to_have_count(8)

    page.select_option("select[name=termination_reason]", "timeout")
    expect(rows(page)).to_have_count(1)
    expect(rows(page).first).to_have_attribute("data-id", "train-2-6")
    page.get_by_role("button", name="Clear filters").click()
    expect(rows(page)).to_have_count(8)

    page.fill("input[name=q]", "needle")
    expect(rows(page)).to_have_count(1)
    expect(rows(page).first).to_have_attribute("data-id", "train-1-4")
    assert "q=needle" in page.url  # filters live in the URL
    page.fill("input[name=q]", "unique-log-marker")  # a log record's text
    expect(rows(page)).to_have_count(1)
    expect(rows(page).first).to_have_attribute("data-id", "train-1-5")
    page.fill("input[name=q]", "")
    page.select_option("select[name=min_log_level]", "30")
    expect(rows(page)).to_have_count(2)
    assert page.dialogs == []


def test_rollout_page_logs_tab_and_keyboard_navigation(page):
    expect = sync_api.expect
    page.goto("/runs/toy-run?sort=step&order=asc")
    expect(rows(page)).to_have_count(8)
    rows(page).nth(2).click()  # train-0-2: a tool_error with an ERROR record and a traceback
    page.wait_for_url("**/rollouts/train-0-2?**")
    expect(page.locator("article.msg")).to_have_count(5)
    expect(page.locator(".tool-call")).to_contain_text("add")
    expect(page.locator("article.msg-tool")).to_contain_text("tool result")
    expect(page.locator(".side-card").first).to_contain_text("Not scored")
    expect(page.locator(".error-text")).to_have_text("tool_error: it broke")
    shot(page, "rollout-messages")

    page.get_by_role("tab", name=re.compile("Rollout logs")).click()
    expect(page.locator(".log-row")).to_have_count(1)
    expect(page.locator(".log-row .badge.level")).to_have_text("ERROR")
    page.locator(".traceback summary").click()
    expect(page.locator(".traceback pre")).to_contain_text("ValueError: bad")
    assert page.url.endswith("#logs")

    page.keyboard.press("ArrowRight")  # next in the run page's list (step ascending)
    page.wait_for_url("**/rollouts/train-0-3?**")
    expect(page.locator(".log-row")).to_have_count(1)  # stays on the logs tab
    page.keyboard.press("k")
    page.wait_for_url("**/rollouts/train-0-2?**")
    expect(page.locator(".log-row .badge.level")).to_have_text("ERROR")
    page.keyboard.press("m")
    expect(page.locator("article.msg")).to_have_count(5)
    page.goto("/runs/toy-run/rollouts/train-0-1")
    expect(page.locator(".reward-table")).to_contain_text("zero-filled")
    expect(page.locator(".siblings-strip .sib")).to_have_count(2)
    expect(page.locator(".sib.current")).to_contain_text("train-0-1")
    page.keyboard.press("Escape")
    page.wait_for_url(re.compile(r".*/runs/toy-run\?tab=train$"))


def test_markup_in_store_strings_stays_text(page):
    expect = sync_api.expect
    page.goto("/runs/toy-run/rollouts/train-0-3")
    expect(page.get_by_text(XSS_MESSAGE, exact=True)).to_be_visible()
    expect(page.get_by_text(XSS_TOOL, exact=True)).to_be_visible()
    page.get_by_role("tab", name=re.compile("Rollout logs")).click()
    expect(page.get_by_text(XSS_LOG, exact=True)).to_be_visible()
    shot(page, "rollout-logs")
    page.goto("/runs/toy-run?q=alert")
    expect(rows(page)).to_have_count(1)
    assert page.locator("img").count() == 0 and page.locator("main script").count() == 0
    assert page.dialogs == []


def test_a_run_being_written_updates_without_a_reload(page, base_url):
    """Last in this module: it adds a rollout to the shared store."""
    from looprl.store.writer import RunStoreWriter
    from tests.unit.inspector.fake_store import record

    expect = sync_api.expect
    page.goto("/runs/toy-run?tab=eval")
    expect(rows(page)).to_have_count(2)
    expect(page.locator("#live")).to_be_visible()
    writer = RunStoreWriter(base_url.run_dir)
    writer.write_rollouts([record(5, step=3, split="eval", rewards={"correct": 1.0})])
    writer.close()
    expect(rows(page)).to_have_count(3, timeout=15_000)
    expect(page.locator(".tab.active .tab-count")).to_have_text("3")
