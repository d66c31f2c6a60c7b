"""Build GRPO configs from the project's arguments with Unsloth's compiled GRPOConfig and with TRL's own, and
print, as JSON, every setting in which they differ.

Run by ``tests/test_unsloth_lane.py`` in a subprocess of the gpu environment: compiling Unsloth's GRPO trainer
replaces ``trl.GRPOConfig`` for the whole process. Unsloth compiles it on CUDA when it is imported; on a CPU the
compile is asked for explicitly, and CUDA is then claimed to torch so the project's arguments are the GPU ones.

    UV_PROJECT_ENVIRONMENT=.venv-gpu uv run --extra gpu python tests/unsloth_grpo_config_probe.py OUT.json
"""

from __future__ import annotations

import json
import sys
import tempfile
from itertools import product
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def differences() -> list[dict]:
    import unsloth  # noqa: F401 - first, as the pipeline does
    from unsloth.models.rl import _patch_trl_rl_trainers

    _patch_trl_rl_trainers("grpo_trainer")
    import torch
    import trl

    compiled = trl.GRPOConfig
    assert hasattr(compiled, "_unsloth_patched_rl_config"), "trl.GRPOConfig is still TRL's own: nothing compiled"
    pristine = compiled.__mro__[1]  # TRL's own class, which Unsloth's derives from
    torch.cuda.is_available = lambda: True  # the project's GPU arguments (bf16 autocast, fused AdamW off)
    torch.cuda.is_bf16_supported = lambda *args, **kwargs: True

    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.config.trl_fields import trl_choices
    from llm_finetuning.model import get_backend
    from llm_finetuning.session.plan import RunPlan
    from llm_finetuning.training.arguments import GRPO_SETTINGS, grpo_arguments, trainer_settings

    found = []
    output = Path(tempfile.mkdtemp())
    losses = sorted(trl_choices("GRPOConfig", "loss_type"))  # every loss the installed trainer computes
    for loss_type, scale, engine in product(losses, ("group", "none"), (False, True)):
        config = PipelineConfig.from_yaml(ROOT / "configs" / "default_config.yaml", [
            f"grpo_training.loss_type={loss_type}", f"grpo_training.scale_rewards={scale}",
            f"grpo_training.use_vllm={str(engine).lower()}", "grpo_training.optim=adamw_torch",
        ])  # fmt: skip
        weights = [spec.weight for spec in config.rewards.rewards]
        unsloth_plan = RunPlan.resolve(config, get_backend("unsloth"))
        unsloth_args = grpo_arguments(config, output, unsloth_plan, 256, weights)  # vLLM iff the engine runs
        trl.GRPOConfig = pristine  # what an hf-backend process sees: TRL's own class
        hf_config = config.with_overrides([f"grpo_training.use_vllm={str(engine).lower()}"])
        hf_args = grpo_arguments(hf_config, output, RunPlan.resolve(hf_config, get_backend("hf")), 256, weights)
        trl.GRPOConfig = compiled
        hf_args.pop("vllm_gpu_memory_utilization", None)  # TRL's own engine only
        built = {name: trainer_settings(_Trainer(cls(**args)), GRPO_SETTINGS)
                 for name, cls, args in (("unsloth", compiled, unsloth_args), ("trl", pristine, hf_args))}  # fmt: skip
        for setting in GRPO_SETTINGS:
            if built["unsloth"][setting] != built["trl"][setting]:
                found.append({"loss_type": loss_type, "scale_rewards": scale, "use_vllm": engine,
                              "setting": setting, "unsloth": built["unsloth"][setting], "trl": built["trl"][setting]})  # fmt: skip
    return found


class _Trainer:
    """What ``trainer_settings`` reads: the arguments, and epsilon_high as both trainers resolve it."""

    def __init__(self, args) -> None:
        self.args = args
        self.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(differences()))  # Unsloth prints to stdout: the result goes to a file
