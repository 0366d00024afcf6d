"""The process logger: isolation from loguru's global logger, reconfiguration, JSON lines, stdlib routing."""

import io
import json
import logging

import loguru
import pytest

from looprl.utils.logger import JSON_FIELDS, InterceptHandler, get_logger, reset_logger, setup_logger


@pytest.fixture(autouse=True)
def _fresh_logger():
    reset_logger()
    yield
    reset_logger()


def test_get_logger_initialises_lazily_and_reset_forgets_it():
    first = get_logger()
    assert get_logger() is first
    reset_logger()
    assert get_logger() is not first


def test_reconfigure_replaces_the_sink_and_level():
    a, b = io.StringIO(), io.StringIO()
    setup_logger("info", sink=a).info("to a")
    setup_logger("warning", sink=b)
    get_logger().info("dropped")
    get_logger().warning("to b")
    assert "to a" in a.getvalue() and "to b" not in a.getvalue()
    assert "to b" in b.getvalue() and "dropped" not in b.getvalue()


def test_json_lines_parse_with_documented_fields():
    out = io.StringIO()
    setup_logger("debug", json_logging=True, sink=out, process="orchestrator")
    logger = get_logger()
    logger.bind(step=3).info("step {} done", 3)
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 2 and all(set(line) == set(JSON_FIELDS) for line in lines)
    assert lines[0]["message"] == "step 3 done" and lines[0]["level"] == "INFO"
    assert lines[0]["process"] == "orchestrator" and lines[0]["extra"] == {"step": 3}
    assert "ValueError: boom" in lines[1]["exception"] and lines[1]["level"] == "ERROR"


def test_stdlib_records_are_routed_at_their_levels():
    out = io.StringIO()
    setup_logger("info", json_logging=True, sink=out)
    logging.getLogger("some.lib").debug("hidden")
    logging.getLogger("some.lib").warning("careful %s", "now")
    logging.getLogger("httpx").info("HTTP Request: POST")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["logger"], line["level"], line["message"]) for line in lines] == [
        ("some.lib", "WARNING", "careful now")]
    assert lines[0]["function"] == "test_stdlib_records_are_routed_at_their_levels"


def test_isolated_from_the_global_loguru_logger():
    out = io.StringIO()
    setup_logger("info", sink=out)
    loguru.logger.remove()  # third-party code reconfiguring loguru's global logger
    sink_id = loguru.logger.add(io.StringIO())
    get_logger().info("still here")
    loguru.logger.remove(sink_id)
    loguru.logger.add(__import__("sys").stderr)
    assert "still here" in out.getvalue()


def test_text_lines_name_the_rollout_bound_to_a_record():
    out = io.StringIO()
    setup_logger("info", sink=out)
    get_logger().bind(rollout="ab12").info("hello")
    assert "rollout=ab12 | hello" in out.getvalue() and "\x1b[" not in out.getvalue()


def test_a_stdlib_record_whose_arguments_do_not_fit_its_format_is_logged_as_written():
    sink = io.StringIO()
    setup_logger("info", sink=sink)
    # not pytest's, which raises
    [handler] = [h for h in logging.getLogger().handlers if isinstance(h, InterceptHandler)]
    handler.handle(logging.LogRecord("env", logging.INFO, __file__, 1, "%d items", ("many",), None))
    assert "'%d items' % ('many',) (logging error: TypeError: %d format: a real number is required, not str)" \
        in sink.getvalue()
