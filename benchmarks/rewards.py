"""Time every registered reward on one GRPO-sized batch: 64 completions of about 4,000 characters.

The completions are synthetic but shaped like real rollouts: step-by-step arithmetic prose, then an
answer in the Unsloth GRPO notebook's ``<end_working_out><SOLUTION>…</SOLUTION>`` format (most), the XML format, the
``<think>``/``<answer>`` format, or cut off mid-reasoning; about half the answers are right. Each
reward scores the batch ``--repeats`` times after one warm-up call; the table shows the median.

    uv run python benchmarks/rewards.py                  # 64 x ~4,000 characters, 20 repeats
    uv run python benchmarks/rewards.py --completions 256 --chars 8000

Target: all rewards together within 50 ms per batch on a 2-core CPU. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from llm_finetuning.rewards import available_rewards, get_reward

SENTENCES = [
    "We have {a} apples and buy {b} more, so there are {a} + {b} = {s} apples.",
    "Step {n}: multiply {a} by {b} to get {p}.",
    "First, note that {a} is less than {p}, so the product is larger.",
    "Next, subtract {b} from {s}, which leaves {a}.",
    "Let x = {a}. Then 2x + {b} = {t}, and checking gives the same value.",
    "- the remainder of {p} divided by {b} is {r}.",
    "Finally, the sum of the digits of {p} is {d}.",
]


def make_completion(rng: random.Random, chars: int, gold: int) -> str:
    words = []
    while sum(map(len, words)) < chars:
        a, b, n = rng.randint(2, 999), rng.randint(2, 99), len(words) + 1
        p = a * b
        values = {"a": a, "b": b, "n": n, "s": a + b, "p": p, "t": 2 * a + b, "r": p % b}
        words.append(rng.choice(SENTENCES).format(**values, d=sum(map(int, str(p)))) + "\n")
    reasoning = "".join(words)
    answer = str(gold if rng.random() < 0.5 else gold + rng.randint(1, 50))
    form = rng.random()
    if form < 0.7:
        return f"{reasoning}<end_working_out>\n<SOLUTION>{answer}</SOLUTION>"
    if form < 0.8:
        return f"<reasoning>\n{reasoning}</reasoning>\n<answer>\n{answer}\n</answer>\n"
    if form < 0.9:
        return f"<think>\n{reasoning}</think> <answer>\\boxed{{{answer}}}</answer>"
    return reasoning  # cut off at max_completion_length


def make_batch(completions: int, chars: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    golds = [rng.randint(1, 10_000) for _ in range(completions)]
    return [make_completion(rng, chars, g) for g in golds], [str(g) for g in golds]


def time_reward(name: str, completions: list[str], golds: list[str], repeats: int) -> float:
    reward = get_reward(name)
    prompts = ["What is the answer?"] * len(completions)
    reward(prompts=prompts, completions=completions, answer=golds)  # warm-up: imports, caches
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        reward(prompts=prompts, completions=completions, answer=golds)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--completions", type=int, default=64, help="completions per batch")
    parser.add_argument("--chars", type=int, default=4000, help="approximate characters per completion")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per reward (median reported)")
    args = parser.parse_args()
    completions, golds = make_batch(args.completions, args.chars)
    mean_chars = sum(map(len, completions)) / len(completions)
    print(
        f"{len(completions)} completions, {mean_chars:,.0f} characters on average, {args.repeats} repeats\n"
    )
    print("| reward | median ms per batch |\n| --- | ---: |")
    total = 0.0
    for name in available_rewards():
        seconds = time_reward(name, completions, golds, args.repeats)
        total += seconds
        print(f"| {name} | {seconds * 1000:.2f} |")
    print(f"| **all {len(available_rewards())} together** | **{total * 1000:.2f}** |")


if __name__ == "__main__":
    main()
