"""What the verifier's sandbox costs a GRPO step: the ``reasoning_gym`` reward scoring a step's completions.

The committed real-model recipe (configs/smollm2.yaml) scores, per GRPO step, 64 completions of 8 fresh
chain_sum problems (8 prompts x 8 generations; oversample 2), each answer by the task's verifier in the
sandboxed worker, after building the 8 new entries there. This replays that work for ``--steps`` steps with
fresh problems every step, through the reward as TRL calls it (one call, all completions, their entry
references), and reports the time per step and per answer. Per group of eight: four right answers written
alike, three different wrong ones, one without an answer (``--distinct``: eight different answer texts, the
most the verifier can be asked). ``--in-process`` scores the same answers with the verifier called directly in
this process, the floor no sandbox can beat. Run it on two commits to compare
sandboxes (it uses only the reward's public interface):

    uv run --extra reasoning-gym python benchmarks/sandbox.py
    uv run --extra reasoning-gym python benchmarks/sandbox.py --distinct
    uv run --extra reasoning-gym python benchmarks/sandbox.py --in-process

The worker's start (reasoning-gym's import) is made before the clock starts, as training starts it when the
reward is built. Results go in docs/benchmarks.md, section "The verifier's sandbox".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

SETTINGS = {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2}  # the recipe's GRPO problems
PROMPTS, GENERATIONS = 8, 8


def completions_for(answer: str, distinct: bool) -> list[str]:
    """Eight completions in the recipe's format: four right, three wrong, one without an answer slot. The right
    ones write the same answer (as a group's right answers do) unless ``distinct``, which writes eight different
    answers (the most the verifier can be asked per group)."""
    right = [answer] * 4 if not distinct else [answer, f" {answer}", f"{answer} ", f"+{answer}"]
    wrong = [str(int(answer) + delta) for delta in (1, -1, 10)]
    return [f"{a}<end_working_out><SOLUTION>{a}</SOLUTION>" for a in right + wrong] + ["no answer<end_working_out>"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--in-process", action="store_true", help="the verifier in this process (no sandbox)")
    parser.add_argument("--distinct", action="store_true", help="every completion's answer text different")
    args = parser.parse_args()

    from llm_finetuning.rewards import get_reward
    from llm_finetuning.runtime.environment import cpu_description
    from llm_finetuning.tasks.gym import entry_ref, task_dataset

    size = PROMPTS * (args.steps + 1)
    dataset = task_dataset("chain_sum", SETTINGS, seed=11, size=size)
    reward = get_reward("reasoning_gym")
    reward.start()
    reward(completions=["<SOLUTION>0</SOLUTION>"], reasoning_gym_entry=[entry_ref("chain_sum", SETTINGS, 11, size, size - 1)])
    seconds, scores = [], []
    for step in range(args.steps):
        indices = range(step * PROMPTS, (step + 1) * PROMPTS)
        refs = [entry_ref("chain_sum", SETTINGS, 11, size, i) for i in indices for _ in range(GENERATIONS)]
        texts = [text for i in indices for text in completions_for(dataset[i]["answer"], args.distinct)]
        started = time.perf_counter()
        if args.in_process:
            got = [float(dataset.score_answer(t.split("<SOLUTION>")[-1].split("</SOLUTION>")[0], dataset[i]))
                   if "<SOLUTION>" in t else 0.0 for t, i in zip(texts, (i for i in indices for _ in range(8)))]  # fmt: skip
        else:
            got = reward(completions=texts, reasoning_gym_entry=refs)
        seconds.append(time.perf_counter() - started)
        scores += got
    right = sum(score == 1.0 for score in scores) / len(scores)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()  # fmt: skip
    cpu = cpu_description()
    result = {"commit": commit, "machine": f"{cpu['model']} ({', '.join(cpu['flags'])}), {os.cpu_count()} cores",
              "mode": "in-process" if args.in_process else "sandbox", "distinct": args.distinct, "steps": args.steps,
              "answers_per_step": PROMPTS * GENERATIONS, "median_step_ms": round(1000 * statistics.median(seconds), 1),
              "mean_step_ms": round(1000 * statistics.mean(seconds), 1),
              "per_answer_ms": round(1000 * statistics.median(seconds) / (PROMPTS * GENERATIONS), 2),
              "share_right": round(right, 3)}  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
