"""No silent typos: every table of an rl config (and the `[slurm]` table) rejects a key it does not
know, naming the key path and the closest known key."""

import pytest
from pydantic import BaseModel

from looprl.config import RLConfig, load_config, validate
from looprl.config.loading import _models_in
from looprl.errors import UserError
from looprl.launch.slurm import SlurmConfig

ENV = ["--env.source", "x.py:E"]


def reachable(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> set[type[BaseModel]]:
    seen = set() if seen is None else seen
    seen.add(model)
    for field in model.model_fields.values():
        for inner in _models_in(field.annotation):
            if inner not in seen:
                reachable(inner, seen)
    return seen


@pytest.mark.parametrize("model", sorted(reachable(RLConfig) | {SlurmConfig}, key=lambda m: m.__name__),
                         ids=lambda m: m.__name__)
def test_every_config_table_forbids_unknown_keys(model):
    assert model.model_config.get("extra") == "forbid"


@pytest.mark.parametrize(("argv", "message"), [
    (["--orchestrator.sampling.temprature", "0.5"],
     "orchestrator.sampling.temprature: Extra inputs are not permitted (did you mean temperature?)"),
    (["--orchestrator.batchsize", "4"],
     "orchestrator.batchsize: Extra inputs are not permitted (did you mean batch_size?)"),
    (["--orchestrator.eval.intervall", "2"],
     "orchestrator.eval.intervall: Extra inputs are not permitted (did you mean interval?)"),
    (["--trainer.lora.rnak", "4"], "trainer.lora.rnak: Extra inputs are not permitted (did you mean rank?)"),
    (["--trainer.loss.ratio.type", "clipped", "--trainer.loss.ratio.eps_hihg", "0.3"],
     "trainer.loss.ratio.clipped.eps_hihg: Extra inputs are not permitted (did you mean eps_high?)"),
    (["--model.nme", "x"], "model.nme: Extra inputs are not permitted (did you mean name?)"),
    (["--zzz", "1"], "zzz: Extra inputs are not permitted\n"),
])
def test_an_unknown_key_is_an_error_naming_its_path_and_the_closest_key(argv, message):
    with pytest.raises(UserError) as error:
        load_config(RLConfig, [*ENV, *argv])
    assert message in str(error.value) + "\n"


def test_the_slurm_table_rejects_unknown_keys():
    with pytest.raises(UserError,
                       match=r"gpus_per_nod: Extra inputs are not permitted \(did you mean gpus_per_node\?\)"):
        validate(SlurmConfig, {"gpus_per_nod": 4})
