"""Every config field that holds a secret is a `SecretStr`, including fields added later (issue #34, item 2).

A `SecretStr` dumps as `**********` wherever a config is written (the run store's `runs.config`,
`config.toml`, a tracker, a log). This walks every pydantic model of looprl's configuration and command
layer and fails on a field whose name says it holds a secret but whose type does not keep it.
"""

import importlib
import pkgutil
import re
import types
import typing

import pytest
from pydantic import BaseModel, SecretStr

SECRET_NAME = re.compile(r"(^|_)(api_?key|key|token|secret|password|passwd|passphrase|credentials?|auth)$")
PACKAGES = ["looprl.config", "looprl.commands", "looprl.inspector", "looprl.trackers", "looprl.launch",
            "looprl.session", "looprl.envserver", "looprl.gateway", "looprl.store", "looprl.handoff"]


def looprl_models() -> set[type[BaseModel]]:
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            importlib.import_module(info.name)
    found, todo = set(), list(BaseModel.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        # only the walked packages: a model loaded by another test (the engine's wire protocol, whose
        # `token` is a piece of text) must not change what this test checks
        if cls.__module__.startswith(tuple(f"{name}." for name in PACKAGES)) and cls not in found:
            found.add(cls)
    return found


def holds_secret_type(annotation) -> bool:
    """`SecretStr`, alone or in a union (`SecretStr | None`)."""
    if annotation is SecretStr:
        return True
    origin = typing.get_origin(annotation)
    return origin in (typing.Union, types.UnionType) and any(holds_secret_type(a) for a in typing.get_args(annotation))


def test_the_walk_finds_the_models_that_hold_secrets():
    from looprl.commands.eval.run import EvalRunConfig
    from looprl.config import RLConfig, TrackersConfig

    assert {RLConfig, TrackersConfig, EvalRunConfig} <= looprl_models()
    assert SECRET_NAME.search("api_key") and SECRET_NAME.search("hf_token") and not SECRET_NAME.search("token_budget")


def test_every_secret_field_is_a_secretstr():
    leaks = [f"{cls.__module__}.{cls.__qualname__}.{name}: {field.annotation}"
             for cls in looprl_models() for name, field in cls.model_fields.items()
             if SECRET_NAME.search(name) and not holds_secret_type(field.annotation)]
    assert not leaks, "secret fields must be pydantic.SecretStr:\n" + "\n".join(leaks)


def test_a_secret_is_masked_in_every_dump():
    from pathlib import Path

    from looprl.commands.eval.run import EvalRunConfig
    from looprl.config import EnvRuntimeConfig

    cfg = EvalRunConfig(env=EnvRuntimeConfig(source="e.py:E"), model="m", base_url="http://x/v1",
                        api_key="sk-test-LOOPRL-CANARY-dump", output=Path("out"))
    for dump in (cfg.model_dump_json(), str(cfg.model_dump(mode="json")), repr(cfg), str(cfg.model_dump())):
        assert "CANARY" not in dump
    assert cfg.api_key.get_secret_value() == "sk-test-LOOPRL-CANARY-dump"



@pytest.mark.parametrize("override", [
    ["--log.trackers.mlflow.tracking_uri", "https://me:hunter2@mlflow.example.com"],
    ["--inference.urls", '["http://me:hunter2@node1:8000"]'],
    ["--inference.vllm_args", '["--api-key", "hunter2"]'],
    ["--inference.vllm_args", '["--api-key=hunter2"]'],
])
def test_a_config_that_would_write_a_secret_is_refused(override):
    from looprl.config import RLConfig, load_config
    from looprl.errors import UserError

    with pytest.raises(UserError) as refused:
        load_config(RLConfig, ["--env.source", "e.py:E", *override])
    assert "hunter2" not in str(refused.value)
    load_config(RLConfig, ["--env.source", "e.py:E", "--log.trackers.mlflow.tracking_uri", "https://mlflow.example.com",
                           "--inference.urls", '["http://node1:8000"]'])
