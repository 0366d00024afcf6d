"""Each trainer rank's peak resident memory while it builds and shards the policy and the KL reference model.

Two (or `--ranks`) gloo ranks on the CPU, bfloat16 layers, as `looprl rl --trainer.world_size N` builds them:
every rank but 0 on the meta device, rank 0 loading the weights and sending each rank its shards
(`trainer.parallel`). `--whole-on-every-rank` measures what looprl did before: every rank loading the whole
model first. `--random-config` builds a random-weight model of that shape instead of loading one (SmolLM2-360M's
shapes by default: 1.4 GB in float32).

    .venv/bin/python bench/trainer_memory.py [--model smollm2-135m-instruct] [--random-config] [--whole-on-every-rank]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.setup_memory import PHASES, setup_peaks

from looprl.model_loading import DEFAULT_MODEL, resolve_model


def random_model(path: Path, like: str) -> Path:
    """A random-weight model of `like`'s config (with SmolLM2's tokenizer), saved under `path`."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    if like == "smollm2-360m":  # HuggingFaceTB/SmolLM2-360M's shapes
        config = LlamaConfig(vocab_size=49152, hidden_size=960, intermediate_size=2560, num_hidden_layers=32,
                             num_attention_heads=15, num_key_value_heads=5, max_position_embeddings=8192,
                             tie_word_embeddings=True, rope_theta=100000.0)
    else:
        config = AutoConfig.from_pretrained(resolve_model(like))
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    AutoTokenizer.from_pretrained(resolve_model(DEFAULT_MODEL)).save_pretrained(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL, help="the model to load (alias, directory or Hub id)")
    parser.add_argument("--random-config", nargs="?", const="smollm2-360m", default=None,
                        help="a random-weight model of this config instead: smollm2-360m or a --model-like name")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--whole-on-every-rank", action="store_true", help="every rank loads the whole model first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = str(random_model(Path(tmp) / "model", args.random_config)) if args.random_config else args.model
        size = sum(f.stat().st_size for f in Path(resolve_model(model)).glob("*.safetensors")) / 2**20
        peaks = setup_peaks(model, Path(tmp) / "peaks", args.ranks, meta=not args.whole_on_every_rank)
    print(f"{args.random_config or args.model}: {size:.0f} MiB of float32 weights, {args.ranks} ranks, "
          f"{'every rank loads the whole model' if args.whole_on_every_rank else 'meta-device init'}")
    for rank, figures in enumerate(peaks):
        growth = ", ".join(f"{phase} +{figures[phase]:.0f}" for phase in PHASES)
        print(f"rank {rank}: peak RSS {figures['peak']:.0f} MiB (base {figures['base']:.0f}; growth: {growth} MiB)")


if __name__ == "__main__":
    main()
