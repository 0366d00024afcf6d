"""Everything that crosses a process boundary on the way orchestrator -> trainer -> inference engine.

Processes never import each other's internals: they exchange these messages, as files in the run
directory (paths from `looprl.paths`). Steps count from 1; weights "version N" are the weights after
N optimizer steps (version 0: the initial model).

| file or message                  | types, helpers               | producer -> consumer                    |
| -------------------------------- | ---------------------------- | --------------------------------------- |
| `steps/step_N/batch.json`        | `TrainBatch`                 | orchestrator -> trainer                 |
|   its packed rows                | `MicroBatch`, `Tree`         | orchestrator packing -> trainer step    |
| `steps/step_N/trainer.json`      | `TrainerReport`              | trainer -> orchestrator (run store)     |
|   its `rollout_logprobs`         | `Tree.rollout_ids`/`samples`,| trainer step -> orchestrator, split per |
|                                  | `sample_segments`            | call into `model_calls.trainer_logprobs`|
| `broadcasts/step_N/` + `STABLE`  | `mark_stable`, `is_stable`,  | trainer -> orchestrator, which has the  |
|                                  | `newest_broadcast`           | engine load it (`POST /update_weights`) |
|   or its `shared_memory.json`    | `shared_weights`: the message| trainer -> embedded engine on the same  |
|   + the region in `/dev/shm`     | and the region's lock        | host, relayed by the orchestrator       |
| `checkpoints/step_N/`            | `latest_checkpoint`          | trainer -> launcher (`--resume`)        |
|   its `progress.json`            | `TrainBatch.progress`        | orchestrator -> trainer -> orchestrator |
| any `step_N` directory           | `step_dirs`                  | (discovery, for every reader)           |
| `run_secret` (0600), handed over | `engine_access`: the secret, | launcher -> engine, orchestrator (the   |
|   in the environment, never argv | the weights paths an engine  | engine's `Authorization: Bearer`)       |
|                                  | may load                     |                                         |

Files are written to a temporary sibling and renamed into place (`write_model`), and read by polling
(`read_model`, `wait_model`, `await_model`). Plain pydantic and JSON, no torch (but for
`shared_weights.Region.views`, which imports it when called); no process package is imported here.
"""

from looprl.handoff.batch import MicroBatch, Segment, Tree, row_segments, sample_owner, sample_segments
from looprl.handoff.files import await_model, read_model, wait_model, write_model
from looprl.handoff.step_messages import TrainBatch, TrainerReport
from looprl.handoff.weight_dirs import STABLE, is_stable, latest_checkpoint, mark_stable, newest_broadcast, step_dirs

__all__ = [
    "STABLE",
    "MicroBatch",
    "Segment",
    "TrainBatch",
    "TrainerReport",
    "Tree",
    "await_model",
    "is_stable",
    "latest_checkpoint",
    "mark_stable",
    "newest_broadcast",
    "read_model",
    "row_segments",
    "sample_owner",
    "sample_segments",
    "step_dirs",
    "wait_model",
    "write_model",
]
