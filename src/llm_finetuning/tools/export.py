"""Export trained weights: LoRA merged into 16-bit weights, GGUF (Unsloth backend), and upload to the Hub.

    uv run python -m llm_finetuning.tools.export --config configs/tiny.yaml --adapter outputs/tiny/grpo_saved_lora \\
        --merged outputs/tiny/merged
    uv run python -m llm_finetuning.tools.export --adapter outputs/grpo_saved_lora --gguf outputs/gguf --quantization q4_k_m
    uv run python -m llm_finetuning.tools.export --adapter outputs/grpo_saved_lora --merged outputs/merged \\
        --push-to-hub user/qwen3-4b-math

``--merged`` goes through ``ModelManager.merge_and_save``: the adapter merged into a fresh copy of the base
(16-bit for GPU-trained models, fp32 stays fp32), with the tokenizer and chat template, loadable by plain
``AutoModelForCausalLM`` and by vLLM. A full fine-tune save is already whole and is written as it is.
``--gguf`` needs the Unsloth backend (CUDA and the gpu extra): Unsloth drives llama.cpp's converter and writes
the GGUF files into ``<DIR>_gguf`` beside the merged model in ``DIR``; the command prints each file.
``--push-to-hub`` uploads the merged folder (or the adapter when nothing was merged); offline, or without
a Hub login, it stops with one line before writing anything. A target folder must be new, empty or an earlier
export, and neither the adapter nor a folder holding it: anything else is refused before any work is done.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from ..config import LoraSettings, PipelineConfig
from ..errors import ModelError, PipelineError
from ..model.adapters import check_replaceable, mark_save
from ..model.card import CARD_FILE
from ..model.manager import read_adapter_config
from ..runtime.atomic_io import write_text_atomic
from . import common
from .train import add_config_arguments, command

__all__ = ["check_hub", "config_for_adapter", "export", "main", "push_to_hub"]

_OFFLINE_VALUES = {"1", "true", "yes", "on"}  # how huggingface_hub reads HF_HUB_OFFLINE


def config_for_adapter(config: PipelineConfig, adapter: Path) -> PipelineConfig:
    """The config with ``model.lora`` matching the save: merging depends on what was saved, not what is set."""
    adapter_config = adapter / "adapter_config.json"
    if not adapter_config.is_file():
        return config.replace(model=dataclasses.replace(config.model, lora=None))
    if config.model.uses_lora:
        return config
    saved = read_adapter_config(adapter)
    lora = LoraSettings(
        rank=saved.get("r", 8),
        alpha=saved.get("lora_alpha", 8),
        target_modules=sorted(saved.get("target_modules") or []),
    )
    return config.replace(model=dataclasses.replace(config.model, lora=lora))


def check_hub(repo_id: str) -> None:
    """Fail fast, before any export work, when the Hub cannot take an upload."""
    from ..runtime.environment import hub_reachable

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _OFFLINE_VALUES:
        raise ModelError(
            f"--push-to-hub {repo_id}: HF_HUB_OFFLINE is set; unset it and run again with network"
        )
    if not hub_reachable():
        raise ModelError(
            f"--push-to-hub {repo_id}: the Hugging Face Hub is not reachable (offline?); run again with "
            "network, or export without --push-to-hub and upload the folder later (hf upload)"
        )


def push_to_hub(folder: Path, repo_id: str, private: bool = False) -> str:
    """Create ``repo_id`` if needed and upload ``folder``; return the commit URL."""
    import httpx
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, LocalTokenNotFoundError, OfflineModeIsEnabled

    api = HfApi()
    try:
        api.create_repo(repo_id, private=private, exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id, folder_path=str(folder), commit_message=f"Upload {folder.name}"
        )
    except (
        HfHubHTTPError,
        LocalTokenNotFoundError,
        OfflineModeIsEnabled,
        httpx.HTTPError,
        OSError,
        ValueError,
    ) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ModelError(
            f"--push-to-hub {repo_id}: upload failed ({reason}); log in with `hf auth login` (or set HF_TOKEN) "
            "and check the repo id is yours"
        ) from None
    return str(commit.commit_url)


def export(
    config: PipelineConfig,
    adapter: Path,
    *,
    merged: Path | None = None,
    gguf: Path | None = None,
    quantization: str = "q4_k_m",
    repo_id: str | None = None,
    private: bool = False,
) -> dict[str, str]:
    """Do every export asked for; return what was written or uploaded, by kind."""
    if not (merged or gguf or repo_id):
        raise PipelineError("nothing to export: give --merged DIR, --gguf DIR and/or --push-to-hub REPO_ID")
    if repo_id:
        check_hub(repo_id)
    for flag, target in (("--merged", merged), ("--gguf", gguf), ("--gguf", gguf and gguf_folder(gguf))):
        if target is not None:
            check_target(flag, target, adapter)
    done: dict[str, str] = {}
    if merged or gguf:
        loaded = common.load_model(config_for_adapter(config, adapter), adapter)
        manager = loaded.manager
        try:
            if merged:
                done["merged"] = str(manager.merge_and_save(merged))
                carry_card(adapter, merged)
            if gguf:
                files = manager.backend.save_gguf(manager.model, manager.tokenizer, gguf, quantization)
                mark_save(gguf, "merged")
                mark_save(gguf_folder(gguf), "gguf")
                carry_card(adapter, gguf_folder(gguf))
                done["gguf"] = ", ".join(str(path) for path in files)
        finally:
            loaded.free()
    if repo_id:
        done["hub"] = push_to_hub(merged or adapter, repo_id, private)
    return done


def carry_card(adapter: Path, target: Path) -> None:
    """The adapter's model card, noted as an export of it, into the exported folder (the Hub shows it)."""
    card = adapter / CARD_FILE
    if card.is_file():
        note = f"\n> Exported from the adapter in `{adapter.name}` (merged into the base model's weights).\n"
        write_text_atomic(target / CARD_FILE, card.read_text(encoding="utf-8") + note)


def gguf_folder(output: Path) -> Path:
    """Where Unsloth writes the GGUF files of a ``--gguf DIR`` export: ``DIR_gguf``, beside the merged model."""
    return output.with_name(output.name + "_gguf")


def check_target(flag: str, target: Path, adapter: Path) -> None:
    """A folder an export writes must be replaceable (``check_replaceable``) and apart from the adapter it reads."""
    target, source = target.resolve(), adapter.resolve()
    if target == source or target in source.parents or source in target.parents:
        raise ModelError(f"{flag} {target}: is the adapter being exported ({source}) or holds it or lies inside "
                         "it; write the export to a folder of its own")  # fmt: skip
    check_replaceable(target)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m llm_finetuning.tools.export", description=__doc__.splitlines()[0]
    )
    add_config_arguments(parser)
    parser.add_argument(
        "--adapter", help="trained weights (default: <output_dir>/<save_path>, else sft/final)"
    )
    parser.add_argument("--merged", type=Path, help="write the adapter merged into the base weights here")
    parser.add_argument("--gguf", type=Path, help="write a GGUF file here (Unsloth backend only)")
    parser.add_argument("--quantization", default="q4_k_m", help="GGUF quantization method (default q4_k_m)")
    parser.add_argument(
        "--push-to-hub", dest="repo_id", metavar="REPO_ID", help="upload merged (else adapter)"
    )
    parser.add_argument("--private", action="store_true", help="create the Hub repo as private")
    return parser


@command(build_parser)
def main(args: argparse.Namespace) -> int:
    config = common.config_from(args)
    adapter = Path(args.adapter) if args.adapter else common.default_adapter(config)
    done = export(
        config, adapter, merged=args.merged, gguf=args.gguf, quantization=args.quantization,
        repo_id=args.repo_id, private=args.private,
    )  # fmt: skip
    for kind, where in done.items():
        print(f"{kind}: {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
