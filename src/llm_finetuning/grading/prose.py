"""Reading the answer out of prose inside an answer slot: math spans, sentences, "the result is".

A slot may hold a sentence or a whole worked solution instead of a bare answer (step 4 of the rules in
``extract``). ``slot_answer`` reads it, first rule that applies:

1. "X is the answer" → X; a leading "Answer" / "Hence" / "So", or a label and colon ("Total: $56"),
   is dropped. An answer cut out of math with its dollars inside out (``8, 6$ or $4``) is its math.
2. Math without prose (``$$ 14 $$``, ``\\( 14 \\)``, ``$x=3$, $y=4$``) → the math, unless a value
   follows the last math span (``$3x = 12$ Therefore, x = 4.``: a final statement, step 4).
3. A long slot (a worked solution) that stops mid-sentence or mid-formula states nothing.
4. Otherwise the *final statement*: the last sentence holding a value (a digit, math, a number word
   from "two" up, a choice "(B)"), so "I hope it is correct." is passed over. In it: what follows the
   last "the result/value/solution is" or "we get", else the last "so"/"hence"/"thus"/"therefore"
   that a value follows; a clause after the answer (", attained when …", ", which …", "because …") is
   dropped. A math span that names the quantity, then "is" and a value, gives the value ("The
   largest $k$ is 27" → 27; "is at least 27" states nothing). Then its last group of math spans
   (spans that only "and"/"or"/commas separate form one group, read as a list; a display on lines of its
   own belongs to its sentence); else, in prose, what follows its last "is"/"are"/"equals"/"="/":" (a
   number and the noun phrase it counts is the number: "there are 12 ways to choose them" → 12); else its
   one value if it has exactly one and does not hedge or bound it ("maybe 7", "at least 5") or operate on it
   ("12 times the radius"); else, in a long slot, its last value.
5. Prose with no value at all (``Monday``, ``no solution``) is the answer as written.

Everything is linear in the text's length: spans are found with ``str.find`` moving forward, and
sentences are split once.

    >>> slot_answer("Hence, there are 12 handshakes in total.")
    '12'
    >>> slot_answer("We get $x = 2$ and $x = -3$. I hope it is correct.")
    'x = 2, x = -3'
"""

from __future__ import annotations

import bisect
import re

from .words import FRACTION_WORDS, SCALE_WORDS, unit_name

MAX_TEXT = 4_000  # prose is read in at most the last this many characters (the last paragraphs)
LONG = 150  # a slot longer than this is a worked solution: its final statement's last number counts
_CONNECTOR = re.compile(
    r"(?:\s|\$|\\[\[\]()]|\\q?quad|\\[,;:!]|[,;&]|\\\\|\\(?:text|mathrm)\s*\{\s*(?:and|or|,)?\s*\}"
    r"|\b(?:and|or)\b|[A-Za-z](?:_\{?\w{1,3}\}?)?\s*=)*"
)
_SPAN_OPEN = re.compile(r"(?<!\\)\$\$|(?<!\\)\$|\\\[|\\\(")
_SPAN_CLOSE = {"$$": re.compile(r"(?<!\\)\$\$"), "$": re.compile(r"(?<!\\)\$"),
               "\\[": re.compile(r"\\\]"), "\\(": re.compile(r"\\\)")}  # fmt: skip
_WORD = re.compile(r"(?<![\\A-Za-z])(?!(?:and|or)\b)[A-Za-z][a-z]+")  # "It", "is"; not PQ, x, \frac
_ENVIRONMENT = re.compile(r"\\(?:begin|end)\{[A-Za-z*]+\}")
_ANY_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_LEAD_IN = re.compile(
    r"^(?:\**\s*(?:final\s+)?answer\s*\**\s*:?\s*\**|(?:hence|thus|so|therefore|then)\b,?)\s*", re.IGNORECASE
)
_IS_THE_ANSWER = re.compile(r"(?<!\s)\s+(?:is|are)\s+(?:the|our)\s+(?:final\s+)?answers?\b", re.IGNORECASE)
_RESULT_PHRASE = re.compile(
    r"\b(?:result|value|solution|answer)\s+(?:is|equals|=)\s*:?\s*|\bwe\s+(?:get|obtain|have)\s*:?\s*",
    re.IGNORECASE,
)
_SUBJECT_COPULA = re.compile(r"\s*(?:is|are|was|equals|=)\s+", re.IGNORECASE)
_COPULA = re.compile(r"\s(?:is|are|was|equals|=)\s|:\s", re.IGNORECASE)
_COUNTED = re.compile(  # a number and the noun phrase it counts, not an operation or a list
    r"\s*(-?\d[\d,]*(?:\.\d+)?)\s+(?!(?:or|and|to|times|plus|minus|by|of|out|per|divided|multiplied|percent"
    r"|over|x)\b)([A-Za-z]{2,})"
)
_DIGIT = re.compile(r"\d")
_OPERATION = re.compile(  # "12 times the radius", "3 plus $x$": an operation on the value, not the value
    r"\d\s+(?:times|plus|minus|divided\s+by|multiplied\s+by|over)\s+(?:(?:the|a|an|its|this|that)\b|[\d$\\])",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n")
_DISPLAY = ("$$", "\\[")
_BLANKS = re.compile(r"[ \t\r]*")
_NUMBER_WORDS = (  # "one" is left out: "one of the roots", "the one above" are not values
    r"(?:zero|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen"
    r"|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)"
)
_HAS_VALUE = re.compile(rf"\d|\b{_NUMBER_WORDS}\b|\b{FRACTION_WORDS}\b|\([A-E]\)", re.IGNORECASE)  # (B): a choice
_CONCLUSION = re.compile(r"(?:^|[,;]\s*|\s)(?:so|hence|thus|therefore|giving|i\.e\.),?\s+", re.IGNORECASE)
_SCALE_WORDS = f"(?:{'|'.join(sorted(SCALE_WORDS))})"
_VALUE = re.compile(  # a number in digits or in words ("one hundred and five", "two thirds")
    rf"-?\d[\d,]*(?:\.\d+)?|\b{FRACTION_WORDS}\b|\b(?:{_NUMBER_WORDS}|one(?=[ -]+{_SCALE_WORDS}))"
    rf"(?:(?:[ -]+|\s+and\s+)(?:{_NUMBER_WORDS}|one|{_SCALE_WORDS}))*\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(  # a statement that hedges or bounds its value states no value ("at least 5")
    r"\b(?:maybe|perhaps|possibly|probably|not sure|I guess|I think|either|about|around|roughly|nearly"
    r"|almost|at (?:least|most)|(?:more|less|fewer|greater|smaller|larger) than|up to|over|under|not)\b",
    re.IGNORECASE,
)
_CUT_OFF = re.compile(r"[A-Za-z,;:(+\-=/^_{&\\]\s*$")  # a text ending mid-sentence or mid-formula
_LABEL_COLON = re.compile(r"^(?:[A-Za-z]+[ \t]+){0,3}[A-Za-z]+[ \t]*:[ \t]*(?=\S)")  # "Total: $56"
_QUALIFIER = re.compile(  # a clause after the answer: ", attained when $x = 1$", " because …"
    r",\s*(?:attained|achieved|obtained|reached|occurring|which(?!\s+(?:is|are|equals|gives))|where|when"
    r"|whenever|with\s+equality)\b"
    r"|,?(?<!\s)\s+(?:since|because)\b",
    re.IGNORECASE,
)


_REASON_IN_PARENS = re.compile(  # "14 (since 2*7 = 14)": a reason in brackets that ends the text
    r"\s*\((?:since|because|as|by|from|using|via|which|i\.e\.|check)\b(?:[^()]|\([^()]*\))*\)\W*$", re.IGNORECASE
)


def slot_answer(text: str) -> str | None:
    """The answer a slot's prose states, by the rules in the module docstring; ``None`` if empty."""
    long = len(text.strip()) > LONG
    cut = _cut_from_math(text.strip())
    if cut is not None:
        return cut
    text = _LEAD_IN.sub("", text[-MAX_TEXT:].strip(), count=1)
    labelled = _LABEL_COLON.match(text)
    ratio = labelled and text[labelled.end()].isalpha() and ":" in text[labelled.end() :]  # "AB : BC : CA = …"
    if labelled and _HAS_VALUE.search(text, labelled.end()) and not ratio:
        text = text[labelled.end() :]
    head = _IS_THE_ANSWER.search(text)
    if head:
        return _joined(spans_or_text(_LEAD_IN.sub("", text[: head.start()], count=1)))
    if not _is_prose(_without_spans(text)) and not _value_after_math(text):
        return _joined(spans_or_text(text))
    if long and _CUT_OFF.search(text):  # a worked solution that stops mid-sentence states nothing
        return None
    statement = _final_statement(text)
    if statement is None:
        return tidy(text) or None
    return _statement_answer(statement, long)


def _cut_from_math(text: str) -> str | None:
    """An answer cut out of math with its delimiters inside out (``8, 6$ or $4``: it begins and ends
    inside math) is the math it holds (``8, 6, 4``); ``None`` for anything else."""
    if "$" not in text or text.startswith("$") or text.endswith("$") or "$$" in text or text.count("$") % 2:
        return None
    if _ANY_WORD.search(text, 0, text.find("$")):  # prose before the first dollar: not math cut out
        return None
    wrapped = f"${text}$"
    groups = math_spans(wrapped)
    if len(groups) != 1 or not is_connector(_without_spans(wrapped)):
        return None
    return ", ".join(tidy(span) for span in groups[0])


def _statement_answer(statement: str, long: bool) -> str | None:
    """The answer a final statement gives (step 3 of the module docstring)."""
    phrase = None
    for phrase in _RESULT_PHRASE.finditer(statement):
        pass
    if phrase is None:  # "4 red and 6 blue balls, so 10 balls in total": what the statement concludes
        for phrase in _CONCLUSION.finditer(statement):
            pass
        if phrase is not None and not _HAS_VALUE.search(statement, phrase.end()):
            phrase = None
    if phrase is not None:
        statement = statement[phrase.end() :]
    statement = without_qualifier(statement)
    subject = _after_subject(statement)
    if subject is not None:  # "The largest $k$ is 27": the math names the quantity, the value follows
        return None if _HEDGE.search(subject) else tidy(subject) or None
    groups = math_spans(statement)
    if groups:
        return ", ".join(tidy(span) for span in groups[-1])
    if _is_prose(statement):
        copula = None
        for copula in _COPULA.finditer(statement):
            pass
        if copula is not None:
            rest = statement[copula.end() :]
            counted = _COUNTED.match(rest)  # "there are 12 ways to choose the three books": 12
            if counted and not _HEDGE.search(rest) and not _DIGIT.search(rest, counted.end(1)):
                unit = counted.group(2) if unit_name(counted.group(2)) else ""  # kept to compare units
                return f"{counted.group(1)} {unit}".strip()
            return tidy(rest) or None
        values = _VALUE.findall(statement)
        # "She has 17 marbles left."
        single = len(values) == 1 and not _HEDGE.search(statement) and not _OPERATION.search(statement)
        if values and (long or single):
            return values[-1]
    return tidy(statement) or None


def without_qualifier(text: str) -> str:
    """``text`` up to a clause that follows its answer (", attained when …", ", which …", a closing
    "(since 2 \\cdot 7 = 14)"), when a value comes before that clause."""
    clause = _QUALIFIER.search(text) or _REASON_IN_PARENS.search(text, max(0, len(text) - 200))
    return text[: clause.start()] if clause and _HAS_VALUE.search(text, 0, clause.start()) else text


def spans_or_text(text: str) -> list[str]:
    """The last group of math spans when ``text`` has words besides its math, or math spans and
    connectors only; else prose is read as a final statement ("The total is 12 apples.") and
    anything else is the whole text."""
    text = without_qualifier(text[-MAX_TEXT:])
    groups, outside = math_spans(text), _without_spans(text)
    if groups and (_ANY_WORD.search(outside) or is_connector(outside)) and _after_subject(text) is None:
        return [", ".join(tidy(span) for span in groups[-1])]
    answer = _statement_answer(text, long=False) if _is_prose(text) else tidy(text)  # "The total is 12."
    return [answer] if answer else []


def math_spans(text: str) -> list[list[str]]:
    """The contents of the math spans in ``text``, grouped where only connectors separate them."""
    groups: list[list[str]] = []
    last_end = None
    for start, end, content in _span_ranges(text):
        if last_end is not None and groups and is_connector(text[last_end:start]):
            groups[-1].append(content)
        else:
            groups.append([content])
        last_end = end
    return groups


def _span_ranges(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, contents)`` of each non-empty span, in order; an unclosed one ends the search."""
    ranges, at = [], 0
    while (opener := _SPAN_OPEN.search(text, at)) is not None:
        closer = _SPAN_CLOSE[opener.group()].search(text, opener.end())
        if closer is None:
            break
        content = text[opener.end() : closer.start()].strip()
        if content:
            ranges.append((opener.start(), closer.end(), content))
        at = closer.end()
    return ranges


def _without_spans(text: str) -> str:
    pieces, at = [], 0
    for start, end, _ in _span_ranges(text):
        pieces.append(text[at:start])
        at = end
    return "".join(pieces) + text[at:]


def _final_statement(text: str) -> str | None:
    """The last sentence holding a digit or math; a sentence end inside a math span does not count."""
    spans = _span_ranges(text)
    starts = [start for start, _, _ in spans]
    display = {at for start, end, _ in spans if text.startswith(_DISPLAY, start) for at in (start, end)}
    ends, inside = [], 0
    for match in _SENTENCE_END.finditer(text):
        while inside < len(spans) and spans[inside][1] <= match.start():
            inside += 1
        if not (inside < len(spans) and spans[inside][0] <= match.start()) and not _beside(text, match, display):
            ends.append(match.end())
    bounds = [0, *ends, len(text)]
    for start, end in zip(reversed(bounds[:-1]), reversed(bounds[1:])):
        sentence = text[start:end].strip()
        if _HAS_VALUE.search(sentence) or bisect.bisect_left(starts, start) < bisect.bisect_left(starts, end):
            return sentence
    return None


def _beside(text: str, line_end: re.Match, display: set[int]) -> bool:
    """Whether a line break only sets a display equation (``$$…$$``, ``\\[…\\]``) on its own lines:
    the display belongs to the sentence around it ("The values are\\n$$12$$\\nand\\n$$13$$")."""
    if line_end.group() != "\n":
        return False
    after = _BLANKS.match(text, line_end.end()).end()
    before = line_end.start()
    while before and text[before - 1] in " \t\r":  # a run of spaces touches at most two line ends: linear
        before -= 1
    return after in display or before in display


def _after_subject(statement: str) -> str | None:
    """What follows "is"/"are"/"equals"/"=" right after the last math span, when it starts with a
    value ("The largest $k$ is 27" → "27"; "$p$ is the chance of 2 heads" states nothing here)."""
    spans = _span_ranges(statement)
    copula = _SUBJECT_COPULA.match(statement, spans[-1][1]) if spans else None
    rest = statement[copula.end() :] if copula else ""
    return rest if _VALUE.match(rest) or rest.startswith(("$", "\\(")) else None


def _value_after_math(text: str) -> bool:
    """Whether a value follows the last math span ("$3x = 12$ Therefore, x = 4."): a later statement."""
    spans = _span_ranges(text)
    return bool(spans) and _HAS_VALUE.search(text, spans[-1][1]) is not None


def _is_prose(text: str) -> bool:
    """Two or more words (not LaTeX commands or environment names, single letters, labels such as
    ``PQ``, "and"/"or"): a long matrix is math, not a worked solution to read for its last value."""
    if "\\begin{" in text:
        text = _ENVIRONMENT.sub(" ", text)
    return len(_WORD.findall(text)) >= 2


def is_connector(between: str) -> bool:
    """Whether the text between two answers only joins them (``, ``, ``and``, ``$ or $x =``)."""
    return len(between) <= 60 and _CONNECTOR.fullmatch(between) is not None


def tidy(answer: str) -> str:
    """Surrounding space, ``**`` emphasis and a sentence's full stop removed."""
    answer = answer.strip().strip("*").strip()
    if answer.endswith(".") and not answer.endswith(".."):
        answer = answer[:-1].rstrip().rstrip("*").rstrip()  # "**12**."
    return answer


def _joined(answers: list[str]) -> str | None:
    return ", ".join(answers) if answers else None
