"""Answers in other people's conventions, made from gold answers: the cases of the grader's comparison
with math-verify (``benchmarks/grader.py --conventions``).

For each gold answer (from the project's labelled cases, the data samples in ``tests/data``, or any
JSONL file of a public dataset given with ``--golds``) the answer is written again in the conventions
other models use, each as a positive and as a near-miss negative, and placed in a model-style
response (a boxed sentence, a Minerva-style closing line, a "**Final Answer**" display, a reasoning
block) inside the answer slot. ``expected`` is the verdict docs/grader.md's rules give; where
math-verify decides otherwise the harness lists the case, and docs/benchmarks.md says which convention
we keep and why.

Classes (one function each, registered in ``CLASSES``): ``decimal_comma``, ``thousands``,
``percent``, ``chain``, ``interval_relation``, ``several_answers``, ``approximate``,
``past_the_turn``, ``multiline``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
_INTEGER = re.compile(r"-?\d+")
_DECIMAL = re.compile(r"-?\d+\.\d+")
_FRACTION = re.compile(r"(-?)\\frac\{?(\d+)\}?\{?(\d+)\}?")
_INTERVAL = re.compile(r"([(\[])\s*(-?\d+)\s*,\s*(-?\d+)\s*([)\]])")
_SIMPLE_ITEM = re.compile(r"-?\d+|\(-?\d+,\s*-?\d+\)")
_STYLES = (
    "Putting it together, the answer is $\\boxed{{{answer}}}$.",
    "So we get $x$.\n\nFinal Answer: The final answer is ${answer}$. I hope it is correct.",
    "Combining the cases gives the result.\n\n**Final Answer**\n\\[\n\\boxed{{{answer}}}\n\\]",
    "<think>\nLet me check the arithmetic once more.\n</think>\nThe answer is $\\boxed{{{answer}}}$.",
)
_TURNS = (  # the end of the model's turn and the next turns, in the common chat formats
    "<|im_end|>\n<|im_start|>user\nNext question.<|im_end|>\n<|im_start|>assistant\n",
    "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nNext question.<|eot_id|>",
    "<｜end▁of▁sentence｜><｜User｜>Next question.<｜Assistant｜>",
    "\n\nHuman: Next question.\n\nAssistant: ",
    "\n\n### Instruction:\nNext question.\n\n### Response:\n",
)


def gold_answers(path: Path | None = None) -> list[str]:
    """Distinct gold answers: ``path`` (JSONL rows with ``answer``, ``gold`` or ``solution``) or, by
    default, those of the labelled grading cases and the dataset samples in ``tests/data``."""
    from llm_finetuning.grading import gold_answer

    paths = [path] if path else [DATA / "grader_cases.jsonl", *sorted(DATA.glob("**/*.jsonl"))]
    golds: dict[str, None] = {}
    for file in paths:
        for line in file.read_text().splitlines():
            row = json.loads(line)
            for field in ("answer", "gold", "solution"):
                if isinstance(row.get(field), str):
                    answer = gold_answer(row[field]) if field == "solution" else row[field]
                    if answer and len(answer) < 80 and "\n" not in answer:
                        golds[answer.strip()] = None
                    break
    return list(golds)


def _decimal_comma(gold: str) -> Iterator[tuple[str, str, bool]]:
    if _DECIMAL.fullmatch(gold) and len(gold.split(".")[1]) != 3:
        yield gold.replace(".", ","), gold, True
        yield _changed(gold).replace(".", ","), gold, False
        yield gold.replace(".", ", "), gold, False  # a comma and a space: a list


def _thousands(gold: str) -> Iterator[tuple[str, str, bool]]:
    if _INTEGER.fullmatch(gold) and abs(int(gold)) >= 1000:
        for separator in (",\\! ", "\\,", "{,}", ",\\!"):
            yield _grouped(gold, separator), gold, True
        yield _grouped(_changed(gold), ",\\! "), gold, False
        yield _grouped(gold, ",\\! ").replace(",\\! ", ".", 1), gold, False  # a decimal point instead


def _percent(gold: str) -> Iterator[tuple[str, str, bool]]:
    if _INTEGER.fullmatch(gold) or _DECIMAL.fullmatch(gold):
        yield f"{gold}\\%", gold, True
        yield gold, f"{gold}\\%", True
        yield f"{_changed(gold)}\\%", gold, False
        if _INTEGER.fullmatch(gold) and int(gold) % 100:
            yield f"{gold}\\%", str(Fraction(int(gold), 100)), False  # stripped, not converted


def _chain(gold: str) -> Iterator[tuple[str, str, bool]]:
    if _INTEGER.fullmatch(gold) and 4 <= int(gold) < 10_000:
        value = int(gold)
        c = 2 - value % 2
        b = (value - c) // 2
        yield f"y = 2 \\cdot {b} + {c} = {value}", gold, True
        yield f"2 \\cdot {b} + {c} = {value}", gold, True
        yield f"y = 2 \\cdot {b} + {c + 1} = {value + 1}", gold, False  # the last side is wrong
        yield f"y = 2 \\cdot {b} + {c} = {value}", str(value - 1), False
        yield f"y = 2 \\cdot {b} + {c + 1} = {value}", gold, False  # contradicts itself: states nothing


def _interval_relation(gold: str) -> Iterator[tuple[str, str, bool]]:
    match = _INTERVAL.fullmatch(gold.replace("\\left", "").replace("\\right", ""))
    if match and int(match.group(2)) < int(match.group(3)):
        opening, low, high, closing = match.groups()
        left, right = ("<" if opening == "(" else "\\le"), ("<" if closing == ")" else "\\le")
        relation = f"{low} {left} t {right} {high}"
        yield relation, gold, True
        yield f"t \\in {opening}{low}, {high}{closing}", relation, True
        flipped = "\\le" if left == "<" else "<"
        yield f"{low} {flipped} t {right} {high}", gold, False
        yield f"t \\in {opening}{low}, {int(high) + 1}{closing}", relation, False


def _several_answers(gold: str) -> Iterator[tuple[str, str, bool]]:
    items = [item.strip() for item in re.split(r",\s*(?![^()]*\))", gold)]
    thousands = all(re.fullmatch(r"\d{3}", item) for item in items[1:])  # 58,500 is one number
    if len(items) >= 2 and not thousands and all(_SIMPLE_ITEM.fullmatch(i) for i in items) and len(set(items)) == len(items):
        reordered = items[::-1]
        yield " \\text{ or } ".join(reordered), gold, True
        yield "\\{" + ", ".join(reordered) + "\\}", gold, True
        yield "$, $".join(f"\\boxed{{{item}}}" for item in reordered), gold, True
        yield ", ".join(reordered[:-1] + [_changed(reordered[-1])]), gold, False  # one element changed
        yield " \\text{ or } ".join(reordered[:-1]), gold, False  # one missing


def _approximate(gold: str) -> Iterator[tuple[str, str, bool]]:
    match = _FRACTION.fullmatch(gold)
    if match and int(match.group(3)) > 1:
        value = Fraction(int(match.group(2)), int(match.group(3))) * (-1 if match.group(1) else 1)
        terminates = all(p in (2, 5) for p in _prime_factors(value.denominator))
        rounded = f"{float(value):.2f}"
        if not terminates and len(rounded.lstrip("-0.")) >= 2:
            yield gold, rounded, True  # the gold is the rounding of an exact answer
            yield gold, f"{float(value) + 0.01:.2f}", False
            yield rounded, gold, False  # a rounded answer for an exact gold: a rounding (our convention)


def _past_the_turn(gold: str) -> Iterator[tuple[str, str, bool]]:
    if len(gold) < 40:
        other = "-17" if gold != "-17" else "19"
        marker = _TURNS[sum(map(ord, gold)) % len(_TURNS)]  # one chat format per gold, spread over them
        yield f"\\boxed{{{gold}}}{marker}\\boxed{{{other}}}", gold, True
        yield f"\\boxed{{{other}}}{marker}\\boxed{{{gold}}}", gold, False


def _multiline(gold: str) -> Iterator[tuple[str, str, bool]]:
    if _INTEGER.fullmatch(gold) and int(gold) >= 10:
        yield f"\n$$\n{gold}\n$$", gold, True
        yield f"\n$$\n{gold[:-1]}\n{gold[-1]}\n$$", gold, False
        if len(gold) >= 4:
            yield f"\n$$\n{gold[:-3]}\n{gold[-3:]}\n$$", gold, False


CLASSES: dict[str, Callable[[str], Iterator[tuple[str, str, bool]]]] = {
    "decimal_comma": _decimal_comma, "thousands": _thousands, "percent": _percent, "chain": _chain,
    "interval_relation": _interval_relation, "several_answers": _several_answers,
    "approximate": _approximate, "past_the_turn": _past_the_turn, "multiline": _multiline,
}  # fmt: skip
_RAW = {"past_the_turn", "multiline"}  # written as they stand, not in a response style


def convention_cases(golds: list[str], seed: int = 0) -> list[dict]:
    """Every class's cases for every gold they apply to, each in a response style chosen at random."""
    rng = random.Random(seed)
    cases = []
    for gold in golds:
        for name, make in CLASSES.items():
            for answer, case_gold, expected in make(gold):
                text = answer if name in _RAW else rng.choice(_STYLES).format(answer=answer)
                if name == "multiline":
                    text = "So the number of ways is" + text
                cases.append({"completion": f"<SOLUTION>{text}</SOLUTION>", "gold": case_gold,
                              "expected": expected, "category": name})  # fmt: skip
    return cases


def _changed(answer: str) -> str:
    """``answer`` with its last digit changed (``3.75`` → ``3.76``, ``(2, 5)`` → ``(2, 6)``)."""
    at = max(i for i, char in enumerate(answer) if char.isdigit())
    return answer[:at] + str((int(answer[at]) + 1) % 10) + answer[at + 1 :]


def _grouped(integer: str, separator: str) -> str:
    sign, digits = ("-", integer[1:]) if integer.startswith("-") else ("", integer)
    groups = []
    while digits:
        groups.insert(0, digits[-3:])
        digits = digits[:-3]
    return sign + separator.join(groups)


def _prime_factors(n: int) -> set[int]:
    factors, p = set(), 2
    while p * p <= n:
        while n % p == 0:
            factors.add(p)
            n //= p
        p += 1
    return factors | ({n} if n > 1 else set())
