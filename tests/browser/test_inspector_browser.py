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
from tests.unit.inspector.fake_store import XSS_LOG, XSS_MESSAGE, XSS_TOOL, build_store, mark_collapse_recovery

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


def serve(run_dirs: list[Path]):
    import uvicorn

    from looprl.inspector.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(run_dirs), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    served = Served(f"http://127.0.0.1:{port}")
    served.run_dir = run_dirs[0]
    yield served
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    yield from serve([build_store(tmp_path_factory.mktemp("runs") / "toy-run")])


@pytest.fixture(scope="module")
def real_url(tmp_path_factory):
    """A real `looprl rl` run (3 steps on a tiny random-weight model) beside the toy store."""
    from tests.integration.test_rl_cli import config, looprl

    tmp = tmp_path_factory.mktemp("real")
    looprl("rl", "@", str(config(tmp)))
    yield from serve([tmp / "run", build_store(tmp / "toy-run", status="completed")])


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def new_page(browser, url):
    context = browser.new_context(base_url=url, viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.set_default_timeout(10_000)
    return context, page


@pytest.fixture
def page(browser, base_url):
    context, page = new_page(browser, base_url)
    yield page
    context.close()


@pytest.fixture
def real_page(browser, real_url):
    context, page = new_page(browser, real_url)
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
    # the rollout table comes first, above the fold; the plots follow in collapsible groups
    assert rows(page).first.bounding_box()["y"] < 1000
    # reward, reward/correct, histogram
    expect(page.locator("details.plot-group[data-group=reward][open] figure.plot")).to_have_count(3)
    expect(page.locator("details.plot-group[data-group=reward] figure.plot .axis-label").first).to_have_text("step")
    training = page.locator("details.plot-group[data-group=training]")
    expect(training).not_to_have_attribute("open", "")
    training.locator("summary").click()
    expect(training.locator("figure.plot")).to_have_count(2)  # loss, entropy
    expect(training.locator(".constant")).to_contain_text("lr = 1.00e-6")  # constant: one value, not a plot
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
    expect(page.locator(".snippet-row mark")).to_have_text("needle")  # why it matched
    expect(page.locator(".snippet-row")).to_contain_text("message #2 (user)")
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


def test_token_view_of_a_real_run(real_page):
    import sqlite3

    expect = sync_api.expect
    page = real_page
    run_dir = Path(page.request.get("/api/runs/run").json()["run_dir"])
    with sqlite3.connect(run_dir / "looprl.db") as db:
        trained = db.execute("SELECT rollout_id FROM rollouts WHERE split='train' AND advantage IS NOT NULL LIMIT 1"
                             ).fetchone()[0]
        untrained = db.execute("SELECT rollout_id FROM rollouts WHERE split='eval' LIMIT 1").fetchone()[0]
        [completion] = db.execute("SELECT completion_tokens FROM model_calls WHERE rollout_id = ?",
                                  (trained,)).fetchone()
    assert completion >= 1  # at most max_tokens = 6: the random model may end its reply sooner
    page.goto(f"/runs/run/rollouts/{trained}")
    expect(page.locator(".reward-card")).to_be_visible()
    page.keyboard.press("t")
    expect(page.locator(".token-call")).to_have_count(1, timeout=60_000)  # the first view loads the tokenizer
    tokens = page.locator(".token-call .tok")
    expect(tokens).to_have_count(completion)
    expect(tokens.first).to_have_class(re.compile(r"\btrained\b"))
    assert "sampler logprob" in tokens.first.get_attribute("title")
    assert not tokens.first.evaluate("el => el.classList.contains('ids')")  # decoded with the run's tokenizer
    expect(page.locator("[data-part=trained]")).to_contain_text("trained with advantage")
    expect(page.locator("[data-part=trainer]")).to_have_count(0)  # the trainer reported its logprobs
    assert "trainer logprob" in tokens.first.get_attribute("title")
    expect(page.locator(".token-call")).to_contain_text("max |mismatch|")
    page.locator(".token-details summary").click()
    expect(page.locator(".token-table tbody tr")).to_have_count(completion)
    shot(page, "tokens")
    page.goto(f"/runs/run/rollouts/{untrained}#tokens")
    expect(page.locator(".token-call .tok.untrained").first).to_be_visible()
    expect(page.locator("[data-part=trained]")).to_contain_text("never trained")


def test_two_runs_compared(real_page):
    expect = sync_api.expect
    page = real_page
    page.goto("/")
    page.get_by_label("compare run", exact=True).check()
    page.get_by_label("compare toy-run").check()
    chart = page.locator(".compare-runs figure.plot")
    expect(chart.locator(".legend-item")).to_have_count(4)  # each run's train and eval reward
    assert "compare=run,toy-run" in page.url
    page.goto("/runs/run")
    shot(page, "run")


def test_reward_arithmetic_and_group_baseline(page):
    expect = sync_api.expect
    page.goto("/runs/toy-run/rollouts/train-0-1")
    card = page.locator(".reward-card")
    expect(card.locator("tr[data-component=correct]")).to_contain_text("× 1")
    expect(card.locator("tr[data-component=format]")).to_contain_text("zero-filled")
    expect(card.locator("[data-part=total]")).to_have_text("0")
    baseline = card.locator("[data-part=baseline]")
    expect(baseline).to_contain_text("mean of 2 counted rewards = 0.75")  # siblings: 1.5 and 0
    expect(baseline).to_contain_text("advantage = reward − mean = 0 − 0.75 = -0.75")
    page.goto("/runs/toy-run/rollouts/eval-2-0")
    expect(page.locator(".reward-card")).to_be_visible()
    assert page.locator("[data-part=baseline]").count() == 0  # eval rollouts have no advantage


def test_siblings_show_replies_and_compare_by_keyboard(page):
    expect = sync_api.expect
    page.goto("/runs/toy-run/rollouts/train-0-0")
    expect(page.locator(".sib .sib-reply").first).to_have_text("“The answer is 4.”")
    page.keyboard.press("c")  # the compare view, by keyboard
    expect(page.locator(".tab.active")).to_contain_text("Compare")
    expect(page.locator(".compare-select")).to_have_value("train-0-1")
    expect(page.locator(".compare-row")).to_have_count(5)
    page.goto("/runs/toy-run/rollouts/train-0-3")
    page.locator(".sib[data-id=train-0-2] .sib-compare").focus()
    page.keyboard.press("Enter")
    expect(page.locator(".compare-select")).to_have_value("train-0-2")
    expect(page.locator(".compare-row:not(.same) mark.diff").first).to_be_visible()  # the user messages differ
    shot(page, "compare")


def test_example_history_links_to_its_rollouts(page):
    expect = sync_api.expect
    page.goto("/runs/toy-run/rollouts/train-1-4")
    table = page.locator(".history-table")
    expect(table.locator("tbody tr")).to_have_count(4)  # ex0: train at steps 0, 1, 2 and eval at step 2
    page.locator(".history-table a.hist-link", has_text="train-0-").first.click()
    page.wait_for_url("**/rollouts/train-0-0")


def test_token_view_without_token_ids(page):
    expect = sync_api.expect
    page.goto("/runs/toy-run/rollouts/train-0-0#tokens")
    expect(page.locator(".token-call")).to_have_count(2)
    expect(page.locator("[data-part=trainer]")).to_have_text("Trainer logprobs not recorded for this run.")


def test_runs_compared_and_error_pages(page):
    expect = sync_api.expect
    page.goto("/runs/nope")
    expect(page.locator("h1")).to_contain_text("404")
    page.get_by_role("link", name="All runs").click()
    page.wait_for_url(re.compile(r".*/$"))
    page.goto("/runs/toy-run/rollouts/nope")
    expect(page.locator(".error-page")).to_contain_text("no rollout 'nope'")
    page.get_by_role("link", name="Back to run toy-run").click()
    page.wait_for_url("**/runs/toy-run")


def test_a_run_being_written_updates_without_a_reload(page, base_url):
    """Last in this module: it adds a rollout to the shared store."""
    from tests.unit.inspector.fake_store import record

    from looprl.store.writer import RunStoreWriter

    expect = sync_api.expect
    page.goto("/runs/toy-run?tab=eval")
    expect(rows(page)).to_have_count(2)
    expect(page.locator("#live")).to_be_visible()
    writer = RunStoreWriter(base_url.run_dir)
    writer.write_rollouts([record(5, step=3, split="eval", rewards={"correct": 1.0})])
    writer.close()
    expect(rows(page)).to_have_count(3, timeout=15_000)
    expect(page.locator(".tab.active .tab-count")).to_have_text("3")


def test_collapse_recovery_marks_on_the_run_page(browser, tmp_path):
    """Each intervention of `[orchestrator.collapse]` is a mark under the run's title: step, why, what changed."""
    run_dir = build_store(tmp_path / "toy-run")
    mark_collapse_recovery(run_dir)
    for url in serve([run_dir]):
        context, page = new_page(browser, url)
        page.goto("/runs/toy-run")
        marks = page.locator("[data-part=collapse]")
        sync_api.expect(marks).to_have_count(3)
        sync_api.expect(marks.nth(0)).to_have_text(
            "Step 1: collapse recovery: 4 of 4 groups at step 1 without signal, policy not exploring; sampling "
            "temperature of the next groups 1 -> 1.25 (raise 1); entropy bonus 0.01 in the loss from now on")
        sync_api.expect(marks.nth(0)).to_have_class(re.compile(r"\bwarn\b"))
        sync_api.expect(marks.nth(1)).to_contain_text("groups have signal again at step 2")
        sync_api.expect(marks.nth(2)).to_contain_text("Step 2: collapse recovery: the policy's entropy at step 1")
        sync_api.expect(marks.nth(2)).not_to_have_class(re.compile(r"\bwarn\b"))
        context.close()


def test_token_view_bands_a_reply_by_policy_version(browser, tmp_path):
    """In-flight weight updates: one reply sampled by policies 12, 13 and 14 shows a labelled band per
    version, and the rollout header says which policies sampled it."""
    import sqlite3

    run = build_store(tmp_path / "toy-run")
    with sqlite3.connect(run / "looprl.db") as db:
        db.execute("UPDATE model_calls SET completion_token_ids=?, completion_logprobs=?, completion_policy_versions=? "
                   "WHERE rollout_id='train-0-0' AND idx=0",
                   ("[5, 6, 7, 8]", "[-1.0, -2.0, -0.5, -0.1]", "[12, 12, 13, 14]"))
    expect = sync_api.expect
    for url in serve([run]):
        context, page = new_page(browser, url)
        page.goto("/runs/toy-run/rollouts/train-0-0#tokens")
        expect(page.locator(".meta-item", has_text="Weights").locator("dd")).to_have_text("sampled by policies 12-14")
        bands = page.locator(".token-call[data-call='0'] .version-band")
        expect(bands).to_have_count(3)
        expect(bands.locator(".version-label")).to_have_text(["policy 12", "policy 13", "policy 14"])
        expect(bands.first.locator(".tok")).to_have_count(2)
        call = page.locator(".token-call[data-call='0'] [data-part=policies]")
        expect(call).to_have_text("sampled by policies 12-14")
        assert "sampled by policy 13" in bands.nth(1).locator(".tok").first.get_attribute("title")
        shot(page, "tokens-policy-versions")
        context.close()
