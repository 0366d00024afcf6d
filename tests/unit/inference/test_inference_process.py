"""EngineProcess: the real `looprl inference` child on the tiny model, and a child that dies."""

import httpx
import openai
import pytest

from looprl.inference.process import EngineProcess, EngineStartError


@pytest.mark.slow  # an engine process started and stopped, twice over in this module
def test_sync_start_request_stop(tiny_model_dir, tmp_path):
    log = tmp_path / "logs" / "inference.log"
    with EngineProcess(str(tiny_model_dir), log_path=log) as engine:
        assert engine.base_url.endswith("/v1") and engine.model_name == str(tiny_model_dir)
        client = openai.OpenAI(base_url=engine.base_url, api_key="unused")
        reply = client.chat.completions.create(model=engine.model_name, messages=[{"role": "user", "content": "hi"}],
                                               max_tokens=3)
        assert reply.usage.completion_tokens <= 3
        url = engine.url
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/health", timeout=1)
    assert log.is_file()


@pytest.mark.slow
async def test_async_context_and_served_name(tiny_model_dir):
    async with EngineProcess(str(tiny_model_dir), served_model_name="tiny",
                             extra_args=["--max-batch-size", "4"]) as engine:
        assert engine.model_name == "tiny"
        async with httpx.AsyncClient() as client:
            models = (await client.get(f"{engine.base_url}/models")).json()
        assert [m["id"] for m in models["data"]] == ["tiny"]


def test_child_that_dies_reports_its_log(tmp_path):
    with (pytest.raises(EngineStartError, match=r"(?s)exited with status 2.*unknown model 'no-such-model'"),
          EngineProcess("no-such-model", log_path=tmp_path / "inference.log")):
        pass
