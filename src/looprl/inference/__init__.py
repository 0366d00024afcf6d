"""The embedded inference engine: an OpenAI-compatible server on transformers (the CPU default).

- `command`: `looprl inference`, the entry point; `process`: `EngineProcess`, to run it as a child.
- `server`: the FastAPI app; `protocol`: its wire types (OpenAI + vLLM token extensions).
- `engine`: the continuous-batching scheduler thread; `batch`: the shared left-padded KV cache;
  `sampling`: per-row sampling and the logprobs definition; `weights`: in-place weight updates.
- `chat`: chat-template rendering and Hermes `<tool_call>` handling.

Nothing heavy is imported here, so `looprl inference --help` stays instant.
"""
