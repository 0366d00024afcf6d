"""vLLM as the inference engine (`inference.backend = "vllm"`).

- `launch`: `VllmProcess`, vLLM's OpenAI server as a child process of looprl (the same interface as
  the embedded engine's `EngineProcess`), and the interpreter that runs it.
- `routes`: runs inside the vLLM server: `POST /update_weights` and `GET /health` with the embedded
  engine's bodies, so the orchestrator cannot tell the two engines apart.
- `template`: the chat template that gives vLLM the embedded engine's Hermes tool rendering.
- `worker`: runs inside vLLM's workers (`--worker-extension-cls`): loads a broadcast's safetensors
  into the live model.

`routes` and `worker` run in vLLM's own interpreter (often its own virtual environment), so they
import only the standard library, torch, safetensors and vLLM, never the rest of looprl.
"""
