"""Answer extraction: the answer slot of a completion, and the final answer inside a slot or a gold text.

One set of functions serves the model's answer, the gold answer and the data layer (which takes its
gold answers from here), so the two sides of every comparison are read by the same rules.

**The model's own turn** (``own_turn``): a chat-template marker leaked into the text
(``<|im_end|>``, ``<|eot_id|>``, ``<|endoftext|>``, ``<|im_start|>user`` …) ends it; what follows is
a turn written for someone else and is never read.

**The slot** (``answer_slot``), first found wins: the last ``<SOLUTION>…</SOLUTION>`` (tags
configurable), the last ``<answer>…</answer>``; a slot that opens but never closes (a cut-off
completion) gives ``None``, unless the turn's end marker closes it. Without tags the whole completion
is searched, but only for explicit markers (below, steps 1–3): there is no fallback to the last number
of a text. A reasoning block is passed over: the answer follows the last ``</think>``, and a
``<think>`` that never closes (cut off while reasoning) gives no answer; a whole tagged completion
inside a slot is read from its ``<answer>…</answer>``.

**The final answer in a slot** (``final_answers``), first rule that applies:

1. ``\\boxed{…}``/``\\fbox{…}`` (nested braces; ``\\boxed 5`` too): the last *run* of boxes, i.e. the
   last box and the boxes just before it that only connectors separate (``\\boxed{4}, \\boxed{7}``,
   ``$\\boxed{1}$ and $\\boxed{2}$``, ``x = \\boxed{1} or x = \\boxed{2}``). A run of several is
   compared as a set when the gold lists several answers, and only its last box otherwise. An
   unbalanced last box (cut off) gives no answer.
2. ``#### N``: the rest of that line.
3. "final answer is", "the answer is", "Answer:" (last one): what follows, to the end of the sentence
   (or the display math that follows). When it comes after the last box and states a value, it
   overrides the box ("\\boxed{120}. Wait, … the answer is actually 60").
4. Inside a slot only: the answer its prose states (``prose.slot_answer``: "X is the answer", "the
   result is X", math delimiters around a bare answer, the final statement of a worked solution);
   a bare answer is itself.

A trailing full stop is dropped. Everything is linear in the text's length.

    >>> final_answers("Hence $y \\\\leq 4$ is the answer.")
    ['y \\\\leq 4']
    >>> final_answers("so $\\\\boxed{(1, 5)}$ and $\\\\boxed{(5, 1)}$.")
    ['(1, 5)', '(5, 1)']
"""

from __future__ import annotations

import math
import re

from .prose import is_connector, slot_answer, spans_or_text, tidy

MAX_RUN = 16  # boxes in one run; more is a list of intermediate results, not an answer
_BOX_NAMES = ("\\boxed", "\\fbox")
_BARE_BOX = re.compile(r"[ \t]+([^\s${}]+)")
# possessive runs (*+): adjacent runs of spaces must not backtrack into each other (quadratic on long runs)
_ANSWER_PHRASE = re.compile(
    r"(?:\b(?:final\s+answer|the\s+answer)[ \t*]*+(?:is\b|:)"
    r"|(?:^|\n)[ \t#*]*+(?:\\text(?:bf|it)\{)?(?:final\s+)?answer[ \t*]*+\}?[ \t]*+(?::|\n))"
    r"[ \t*]*+:?\}?",
    re.IGNORECASE,
)
_END_MARK = re.compile(r"(?:\$?\\(?:blacksquare|square|Box|qed)\$?|∎|□|Q\.?E\.?D\.?)\s*$")  # end of a proof
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n")
_FILLER = re.compile(
    r"^(?:actually|indeed|clearly|simply|just|exactly|now|then|therefore)\b,?\s*", re.IGNORECASE
)
_HAS_VALUE = re.compile(r"\d|\\[a-zA-Z]")
_NUMBER = re.compile(r"-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)")  # thousands separators allowed: 1,234.5
_TURN_MARKER = re.compile(  # chat-template markers that end a turn or begin the next one, of the common families
    r"<(?:\|(?:im_end|im_start|eot_id|eot|eom_id|start_header_id|endoftext|end_of_text|end|user|system|assistant"
    r"|start|return|end_of_turn|END_OF_TURN_TOKEN|START_OF_TURN_TOKEN|prompter|start_of_role|end_of_role)\|"
    r"|(?:end|start)_of_turn|end_of_utterance|/s|eos)>"
    r"|<｜(?:end▁of▁sentence|begin▁of▁sentence|User|Assistant)｜>"  # DeepSeek's full-width bars
    r"|\[/?INST\]"
    # a plain-text chat transcript or instruction format going on to its next turn, at a line start
    r"|\n[ \t]*+(?:(?:Human|User|USER|Assistant|ASSISTANT)[ \t]*+:"
    r"|\#{2,3}[ \t]*+(?:Human|User|Instruction|Input|Response)[ \t]*+:?[ \t]*+\n)"
)
_OWN_HEADER = re.compile(  # the model's own turn header, when the completion repeats it
    r"^\s*(?:<\|begin_of_text\|>|<s>|<bos>|<｜begin▁of▁sentence｜>)?\s*(?:<\|im_start\|>\s*assistant"
    r"|<\|start_header_id\|>\s*assistant\s*<\|end_header_id\|>|<start_of_turn>\s*model|<\|assistant\|>"
    r"|<｜Assistant｜>|(?:Assistant|ASSISTANT)[ \t]*:|\#{2,3}[ \t]*Response[ \t]*:)?"
)


def answer_slot(
    completion: str, solution_start: str = "<SOLUTION>", solution_end: str = "</SOLUTION>"
) -> tuple[str, bool] | None:
    """``(text, in_slot)``: a tag slot's contents (``in_slot``) or the whole completion; ``None``
    when a slot opens but never closes. Only the model's own turn is read (``own_turn``); the end of
    that turn also closes a slot left open in it."""
    completion, ended = own_turn(completion)
    for opening, closing in ((solution_start, solution_end), ("<answer>", "</answer>")):
        if opening and closing and opening in completion:
            start = completion.rfind(opening) + len(opening)
            end = completion.find(closing, start)
            if end < 0 and not ended:
                return None
            return completion[start : end if end >= 0 else len(completion)], True
    return completion, False


def own_turn(text: str) -> tuple[str, bool]:
    """``(the model's own turn, whether a marker ended it)``: a leading role header of its own is
    dropped, and so is everything from the first chat-template marker on (``<|im_end|>``,
    ``<|eot_id|>``, ``<|endoftext|>``, ``<|im_start|>user`` …): what follows is a turn the model
    went on to write for someone else, and an answer there is not its answer.

    >>> own_turn("<|im_start|>assistant\\nIt is 15.<|im_end|>\\n<|im_start|>user\\nAnd 27?")
    ('It is 15.', True)
    """
    if "<" not in text and "\n" not in text and "[" not in text:
        return text, False
    start = _OWN_HEADER.match(text).end()  # matches at least the empty string
    marker = _TURN_MARKER.search(text, start)
    return (text[start : marker.start()] if marker else text[start:]).strip(), marker is not None


def final_answers(text: str, in_slot: bool = True) -> list[str]:
    """The final answer(s) in ``text`` by the rules in the module docstring; ``[]`` when none.
    Several only for a run of boxes."""
    text = after_reasoning(own_turn(text)[0].strip())
    if text is None:
        return []
    text = _END_MARK.sub("", text).rstrip()
    if "<answer>" in text:  # a whole tagged completion placed in a slot
        inner = answer_slot(text, "", "")
        return final_answers(inner[0], in_slot) if inner else []
    phrase = _answer_phrase(text)
    if any(name in text for name in _BOX_NAMES):
        last_box = max(text.rfind(name) for name in _BOX_NAMES)
        if phrase is None or phrase[0] < last_box or not _HAS_VALUE.search(phrase[1]):
            run = boxed_run(text)
            return [tidy(box) for box in run if box.strip()] if run else []
        return spans_or_text(phrase[1])  # "\boxed{120}. Wait, … the answer is actually 60."
    if "####" in text:
        answer = after_hashes(text)
        return [tidy(answer)] if answer else []
    if phrase is not None:
        return spans_or_text(phrase[1]) if phrase[1] else []
    if not in_slot:
        return []
    answer = slot_answer(text)
    return [answer] if answer else []


def boxed_run(text: str) -> list[str] | None:
    """The contents of the last run of boxes (see the module docstring); ``None`` when the last box is
    unbalanced or there is none.

    >>> boxed_run("\\\\boxed{1} then \\\\boxed{x^{2}}"), boxed_run("\\\\boxed{4}, \\\\boxed{7}")
    (['x^{2}'], ['4', '7'])
    """
    start = max(text.rfind(name) for name in _BOX_NAMES)
    box = _box_at(text, start, len(text)) if start >= 0 else None
    if box is None:
        return None
    run, limit = [box[0]], start
    while len(run) < MAX_RUN:
        previous = max(text.rfind(name, 0, limit) for name in _BOX_NAMES)
        box = _box_at(text, previous, limit) if previous >= 0 else None
        if box is None or not is_connector(text[box[1] : limit]):
            break
        run.insert(0, box[0])
        limit = previous
    return run


def last_boxes(text: str, count: int) -> list[str]:
    """The contents of the last ``count`` balanced boxes, in order, wherever they are (for a gold that
    lists several answers given in separate places: "(a) \\boxed{5} … (b) \\boxed{7}")."""
    boxes, limit = [], len(text)
    for _ in range(2 * MAX_RUN):  # bounded: a text of unbalanced boxes must stay linear
        if len(boxes) >= min(count, MAX_RUN):
            break
        start = max(text.rfind(name, 0, limit) for name in _BOX_NAMES)
        if start < 0:
            break
        box = _box_at(text, start, limit)
        if box is not None:
            boxes.insert(0, tidy(box[0]))
        limit = start
    return boxes


def last_boxed(text: str) -> str | None:
    """The contents of the last ``\\boxed{…}``/``\\fbox{…}`` (nested braces; ``\\boxed 5`` gives
    ``5``), or ``None`` when there is none or it never closes.

    >>> last_boxed("so $\\\\boxed{\\\\frac{1}{2}}$.")
    '\\\\frac{1}{2}'
    """
    run = boxed_run(text)
    return run[-1].strip() or None if run else None


def _box_at(text: str, start: int, stop: int) -> tuple[str, int] | None:
    """``(contents, end)`` of the box whose name starts at ``start``, closing before ``stop``."""
    at = start + (len("\\boxed") if text.startswith("\\boxed", start) else len("\\fbox"))
    brace = at
    while brace < stop and text[brace] in " \t":
        brace += 1
    if brace >= stop or text[brace] != "{":
        bare = _BARE_BOX.match(text, at, stop)  # "\boxed 5"
        return (bare.group(1).rstrip(".,"), bare.end()) if bare else None
    depth = 0
    for index in range(brace, stop):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[brace + 1 : index].strip(), index + 1
    return None


def after_hashes(text: str) -> str | None:
    """The rest of the line after the last ``####`` (GSM8K's answer line), or ``None`` if empty."""
    line = text[text.rfind("####") + 4 :].strip().split("\n", 1)[0]
    return tidy(line) or None


def _answer_phrase(text: str) -> tuple[int, str] | None:
    """``(position, what follows)`` for the last "the answer is"-style phrase ("" when nothing
    follows), or ``None``. A filler word after the phrase ("the answer is actually 60") is skipped."""
    offset = max(0, len(text) - 20_000)
    match = None
    for match in _ANSWER_PHRASE.finditer(text, offset):
        pass
    if match is None:
        return None
    rest = _FILLER.sub("", text[match.end() :].lstrip(), count=1)
    if rest.startswith(("\\[", "$$")):  # a display equation holds the answer, across lines
        end = rest.find("\\]" if rest.startswith("\\[") else "$$", 2)
        return match.start(), rest[: end + 2] if end >= 0 else ""
    end = _SENTENCE_END.search(rest)
    return match.start(), (rest[: end.start()] if end else rest).strip()


def after_reasoning(text: str) -> str | None:
    """``text`` without a reasoning block: what follows the last ``</think>`` when anything does;
    ``None`` when a ``<think>`` never closes (a completion cut off while still reasoning).

    >>> after_reasoning("<think>2 + 2 = 4</think> The sum is 4."), after_reasoning("<think>2 + 2 =")
    (' The sum is 4.', None)
    """
    closed = text.rfind("</think>")
    if text.rfind("<think>") > closed:
        return None
    rest = text[closed + len("</think>") :] if closed >= 0 else ""
    return rest if rest.strip() else text


def extract_answer(
    completion: str, solution_start: str = "<SOLUTION>", solution_end: str = "</SOLUTION>"
) -> str | None:
    """The completion's final answer as text (a run of boxes joined by ", "), or ``None``.

    >>> extract_answer("x = 2 or 3 ... \\\\boxed{\\\\frac{1}{2}}")
    '\\\\frac{1}{2}'
    >>> extract_answer("<SOLUTION>42") is None
    True
    """
    if not isinstance(completion, str):
        return None
    slot = answer_slot(completion, solution_start, solution_end)
    answers = final_answers(*slot) if slot else []
    return ", ".join(answers) if answers else None


def gold_answer(text: str) -> str | None:
    """A gold text (a bare answer, a GSM8K ``… #### 72`` solution, a MATH solution with ``\\boxed{}``)
    reduced to its answer by the same rules as a completion's slot; the data layer's extraction.

    >>> gold_answer("Natalia sold 48 + 24 = 72 clips.\\n#### 72"), gold_answer("$\\\\boxed{(1, 5)}$")
    ('72', '(1, 5)')
    """
    answers = final_answers(text, in_slot=True)
    return ", ".join(answers) if answers else None


def first_number(text: str, start: int = 0) -> float | None:
    """The first number in ``text[start:]`` with thousands separators removed, or ``None``.

    >>> first_number("so x = 1,234.5 and 7")
    1234.5
    """
    match = _NUMBER.search(text, start)
    return parse_number(match.group()) if match else None


def parse_number(text: str) -> float | None:
    """``text`` as a finite number (thousands separators allowed: ``1,234``), or ``None``.

    >>> parse_number("1,234"), parse_number("3e4"), parse_number("nan"), parse_number("\\\\frac12")
    (1234.0, 30000.0, None, None)
    """
    try:
        value = float(text.strip().replace(",", ""))
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def is_numeric(answer: str) -> bool:
    """A finite number, thousands separators allowed (``1,234``, ``-0.5``, ``3e4``); the SFT filter's rule."""
    return parse_number(answer) is not None
