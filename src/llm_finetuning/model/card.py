"""The model card every save carries (``README.md`` with Hugging Face's metadata block): what the weights are, what
they were trained on and with, how they scored, and how to load them.

It is written into the adapter folder with the save, and again once the save's evaluation is known (so the table
holds the figures of the weights in the folder); an export and a push to the Hub take it along. The card is made
from plain data — the run's summary and resolved config — so it says only what the run recorded.

    >>> card = model_card({"eval": {"after_sft": {"n": 200, "format_accuracy": 1.0, "answer_accuracy": 0.5,
    ...                                           "sampled_answer_accuracy": 0.4}}},
    ...                   {"model": {"model_name": "builtin:tiny-qwen3", "lora": None}}, stage="after_sft")
    >>> "answer accuracy (greedy) | - | 0.500" in card
    True
"""

from __future__ import annotations

from typing import Any

__all__ = ["CARD_FILE", "model_card"]

CARD_FILE = "README.md"
_STAGES = ("before_sft", "after_sft", "after_expert_iteration", "after_grpo")
_TAGS = {"SFT": "sft", "expert iteration": "expert-iteration", "GRPO": "grpo"}
_ROWS = (("format accuracy", "format_accuracy"), ("answer accuracy (greedy)", "answer_accuracy"),
         ("answer accuracy (sampled)", "sampled_answer_accuracy"))  # fmt: skip


def model_card(summary: dict[str, Any], config: dict[str, Any], stage: str) -> str:
    """The card of the weights saved at ``stage`` (``after_sft``, ``after_expert_iteration`` or ``after_grpo``)."""
    model = config.get("model", {})
    lora = model.get("lora")
    kind = "LoRA adapter" if lora else "fully fine-tuned model"
    base = model.get("model_name", "?")
    phases = _phases(summary, stage)
    lines = [
        "---",
        f"base_model: {base}" if "/" in base and not base.startswith(("builtin:", ".", "/")) else "base_model: null",
        "library_name: " + ("peft" if lora else "transformers"),
        "tags: [llm-finetuning, " + ", ".join(_TAGS[phase] for phase in phases) + ", math]",
        "---",
        "",
        f"# {kind} of {base}, {' then '.join(phases)}",
        "",
        "Trained with llm-finetuning: supervised fine-tuning teaches the answer format" + _then(phases),
        "",
        *_data(config),
        *_rewards(config, stage),
        *_results(summary, stage),
        *_settings(summary, config, lora),
        *_loading(base, lora),
    ]
    return "\n".join(lines) + "\n"


def _phases(summary: dict[str, Any], stage: str) -> list[str]:
    """The phases that trained the weights saved at ``stage``, in order."""
    iterated = bool((summary.get("eval") or {}).get("after_expert_iteration")) or stage == "after_expert_iteration"
    return ["SFT", *(["expert iteration"] if iterated else []), *(["GRPO"] if stage == "after_grpo" else [])]


def _then(phases: list[str]) -> str:
    then = {"expert iteration": ", then expert iteration fine-tunes on the answers it got right",
            "GRPO": ", then GRPO reinforcement learning with graded rewards improves the answers"}  # fmt: skip
    return "".join(then[phase] for phase in phases[1:]) + "."


def _data(config: dict[str, Any]) -> list[str]:
    data = config.get("data", {})
    rows = [f"- {phase.upper()}: `{spec.get('name')}` ({spec.get('format', 'auto')})"
            for phase, spec in (("sft", data.get("sft") or {}), ("grpo", data.get("grpo") or {})) if spec]  # fmt: skip
    return ["## Data", "", *rows, ""] if rows else []


def _rewards(config: dict[str, Any], stage: str) -> list[str]:
    if stage != "after_grpo":
        return []
    specs = config.get("rewards", {}).get("rewards", [])
    rows = [f"- `{spec.get('name')}` × {spec.get('weight', 1.0)}" for spec in specs]
    return ["## Rewards", "", *rows, ""]


def _results(summary: dict[str, Any], stage: str) -> list[str]:
    evals = summary.get("eval") or {}
    shown = [s for s in _STAGES[: _STAGES.index(stage) + 1] if s != "after_expert_iteration" or evals.get(s)]
    n = next((evals[s]["n"] for s in shown if evals.get(s)), None)
    if n is None:
        return []
    header = "| | " + " | ".join(s.replace("_", " ") for s in shown) + " |"
    lines = ["## Results", "", f"On {n} held-out problems the training never saw:", "", header,
             "|---" * (len(shown) + 1) + "|"]  # fmt: skip
    for label, key in _ROWS:
        cells = [_cell((evals.get(s) or {}).get(key)) for s in shown]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _cell(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _settings(summary: dict[str, Any], config: dict[str, Any], lora: Any) -> list[str]:
    lines = ["## Training", ""]
    if lora:
        lines.append(f"- LoRA rank {lora.get('rank')}, alpha {lora.get('alpha')}, on {', '.join(lora.get('target_modules', []))}")
    for phase in ("sft", "grpo"):
        record = (summary.get("phases") or {}).get(phase) or {}
        settings = record.get("settings") or {}
        if record.get("steps"):
            chosen = {k: settings[k] for k in ("learning_rate", "per_device_train_batch_size", "num_generations",
                                               "loss_type", "beta") if k in settings}  # fmt: skip
            lines.append(f"- {phase.upper()}: {record['steps']} steps; " + ", ".join(f"{k} {v}" for k, v in chosen.items()))
    return [*lines, ""]


def _loading(base: str, lora: Any) -> list[str]:
    if lora:
        code = ["from peft import AutoPeftModelForCausalLM", "from transformers import AutoTokenizer", "",
                'model = AutoPeftModelForCausalLM.from_pretrained("path/to/this/folder")',
                'tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")  # with the chat template it was trained on']  # fmt: skip
    else:
        code = ["from transformers import AutoModelForCausalLM, AutoTokenizer", "",
                'model = AutoModelForCausalLM.from_pretrained("path/to/this/folder")',
                'tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")']  # fmt: skip
    return ["## How to load", "", "```python", *code, "```", "",
            "or ask it from the command line: `llm-finetune infer --adapter path/to/this/folder \"What is 3 + 4?\"`."]  # fmt: skip
