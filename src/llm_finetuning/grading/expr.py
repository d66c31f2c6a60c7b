"""One math answer (already normalised LaTeX, no commas or relations) as a Python expression.

``to_python`` translates a small, closed subset of LaTeX into a Python/sympy expression string
(``\\frac{a}{b}`` → ``((a)/(b))``, ``2x`` → ``2*v_x``, ``\\sqrt[3]{x}`` → ``root(v_x,3)``, ``5!`` →
``factorial(5)``, ``\\cos 2x`` → ``cos(2*v_x)``); anything outside the subset gives ``None``. The
output only ever holds numbers, operators, brackets, commas, the names in ``symbolic.SAFE_NAMES`` and
``v_<letters>`` variables, so handing it to sympy's ``parse_expr`` (which calls ``eval``) is safe even
for hostile model output.

``exact_value`` then evaluates the expression with ``fractions.Fraction`` when it is plain rational
arithmetic (integers, decimals, fractions, powers, factorials): microseconds, and exact, so
``2^{100}`` written out matches while ``1.0001`` never matches ``1``. Powers, factorials and binomials
past ``MAX_BITS`` are refused, so ``9^{9^{9^9}}`` or ``1000000!`` cost nothing. ``too_big_for_sympy``
is the matching guard before numeric or symbolic comparison.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from fractions import Fraction

MAX_LATEX_CHARS = 2000  # longer "answers" are prose or attacks; compared as strings only
MAX_DEPTH = 40  # nested groups
MAX_BITS = 20_000  # exact results above ~6,000 digits are refused
MAX_FACTORIAL = 2_000
MAX_SYMPY_EXPONENT = 1_000
MAX_SCIENTIFIC_EXPONENT = 1_000  # 1e999999 would build a million-digit integer
MAX_SYMBOLIC_CHOOSE = 50  # binom(n, k) with a variable n is a polynomial of degree k
CACHE_SIZE = 4096  # to_python and exact_value are pure: one grading converts the same sides many times

FUNCTIONS = {
    "sin": "sin", "cos": "cos", "tan": "tan", "sec": "sec", "csc": "csc", "cot": "cot",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsec": "asec", "arccsc": "acsc",
    "arccot": "acot", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "ln": "log", "log": "log",
    "exp": "exp",
}  # fmt: skip
CONSTANTS = {"pi": "pi", "infty": "oo", "infinity": "oo", "e": "E", "i": "I"}
CALLS = ("sqrt", "root", "factorial", "binomial", "Abs")  # emitted for \sqrt, \sqrt[n], !, \binom, |x|
GREEK = {
    "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta",
    "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "phi", "varphi", "chi", "psi", "omega",
    "Gamma", "Delta", "Theta", "Lambda", "Sigma", "Phi", "Psi", "Omega",
}  # fmt: skip
MATRIX = "Matrix"  # emitted by matrices.py for a matrix literal in arithmetic (A + B, 3A)
# Every name the grader emits; tests pin it equal to symbolic.SAFE_NAMES, the one safelist.
EMITTED_NAMES = frozenset({*FUNCTIONS.values(), *CONSTANTS.values(), *CALLS, MATRIX})

# Known commands first, longest first, so that "\\pir" (spaces removed from "\\pi r") reads as \\pi, r.
_KNOWN_COMMANDS = sorted(
    {"frac", "binom", "sqrt", "cdot", "times", "div", "overline", "bar", *FUNCTIONS, *CONSTANTS, *GREEK},
    key=len,
    reverse=True,
)
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+(?![\d.]))?|\.\d+)"
    r"|(?P<cmd>\\(?:" + "|".join(_KNOWN_COMMANDS) + r")|\\[A-Za-z]+)"
    r"|(?P<char>[A-Za-z{}()\[\]^_+\-*/!|']))"
)
_REPEATING = re.compile(r"(\d*)\.(\d*)$")


class _Unsupported(Exception):
    """The text is outside the LaTeX subset ``to_python`` understands."""


def to_python(latex: str) -> str | None:
    """``latex`` as a Python expression over ``NAMES`` and ``v_*`` variables, or ``None``.

    >>> to_python("2\\\\frac{1}{2}x^2")
    '(5/2)*v_x**(2)'
    """
    return None if len(latex) > MAX_LATEX_CHARS else _to_python(latex)  # the cache holds short keys only


@functools.lru_cache(maxsize=CACHE_SIZE)
def _to_python(latex: str) -> str | None:
    try:
        parser = _Parser(_tokens(latex))
        out = parser.sequence(stop=None, depth=0)
        return out if out and parser.at == len(parser.tokens) else None
    except (_Unsupported, RecursionError, ValueError, ZeroDivisionError, OverflowError):
        return None


def _tokens(latex: str) -> list[tuple[str, str]]:
    tokens, at = [], 0
    latex = latex.rstrip()
    while at < len(latex):
        match = _TOKEN.match(latex, at)
        if not match:
            raise _Unsupported(latex[at])
        tokens.append((match.lastgroup, match.group(match.lastgroup)))
        at = match.end()
    return tokens


class _Parser:
    """Recursive descent over the tokens; ``sequence`` emits atoms joined by operators, inserting
    ``*`` where LaTeX multiplies by juxtaposition."""

    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens, self.at = tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise _Unsupported("unexpected end")
        self.at += 1
        return self.tokens[self.at - 1]

    def sequence(self, stop: str | None, depth: int) -> str:
        if depth > MAX_DEPTH:
            raise _Unsupported("too deep")
        parts: list[str] = []
        last_was_atom = False
        while self.peek() is not None and self.peek() != stop:
            token = self.peek()
            if token in ("+", "-", "*", "/", "\\cdot", "\\times", "\\div"):
                self.take()
                op = {"\\cdot": "*", "\\times": "*", "\\div": "/"}.get(token, token)
                if op in "*/" and not last_was_atom:
                    raise _Unsupported("operator without a left operand")
                parts.append(op)
                last_was_atom = False
                continue
            atom = self.postfix(self.atom(depth), depth)
            if last_was_atom:
                parts.append("*")
            parts.append(atom)
            last_was_atom = True
        if stop is not None:
            if self.peek() != stop:
                raise _Unsupported(f"missing {stop}")
            self.take()
        if not parts or not last_was_atom:
            raise _Unsupported("empty or dangling operator")
        return "".join(parts)

    def group(self, depth: int) -> str:
        """A ``{...}`` argument, or a single token (``\\frac12``)."""
        if self.peek() == "{":
            self.take()
            return "(" + self.sequence("}", depth + 1) + ")"
        kind, text = self.take()
        if kind == "num" and text.isdigit() and len(text) > 1:  # \frac12: one digit per argument
            self.at -= 1
            self.tokens[self.at] = (kind, text[1:])
            return text[0]
        if kind == "num":
            return _number(text)
        return self.postfix_free_atom(kind, text, depth)

    def atom(self, depth: int) -> str:
        kind, text = self.take()
        if kind == "num" and self.peek() == "\\frac" and text.isdigit():
            return self.mixed_number(text, depth)
        if kind == "num" and self.peek() in ("\\overline", "\\bar"):
            self.take()
            return _repeating(text, self.group(depth))
        if kind == "num":
            return _number(text)
        return self.postfix_free_atom(kind, text, depth)

    def postfix_free_atom(self, kind: str, text: str, depth: int) -> str:
        closers = {"(": ")", "[": "]", "{": "}"}
        if text in closers:
            return "(" + self.sequence(closers[text], depth + 1) + ")"
        if text == "|":
            return "Abs(" + self.sequence("|", depth + 1) + ")"
        if kind == "char" and text.isalpha():
            return CONSTANTS.get(text, "v_" + text) if text in "ei" else "v_" + text
        if kind != "cmd":
            raise _Unsupported(text)
        name = text[1:]
        if name == "frac":
            return f"(({self.group(depth)})/({self.group(depth)}))"
        if name == "binom":
            return f"binomial({self.group(depth)},{self.group(depth)})"
        if name == "sqrt":
            return self.root(depth)
        if name in FUNCTIONS:
            return self.function(FUNCTIONS[name], depth)
        if name in CONSTANTS:
            return CONSTANTS[name]
        if name in GREEK:
            return "v_" + name
        raise _Unsupported(text)

    def root(self, depth: int) -> str:
        if self.peek() == "[":
            self.take()
            index = self.sequence("]", depth + 1)
            return f"root({self.group(depth)},{index})"
        return f"sqrt({self.group(depth)})"

    def function(self, name: str, depth: int) -> str:
        power = base = None
        if name == "log" and self.peek() == "_":
            self.take()
            base = self.group(depth)
        if self.peek() == "^":
            self.take()
            power = self.group(depth)
        argument = self.argument(depth)
        call = f"{name}({argument},{base})" if base else f"{name}({argument})"
        return f"{call}**({power})" if power else call

    def argument(self, depth: int) -> str:
        """A function's argument: a bracketed group, or the juxtaposed factors that follow
        (``\\cos 2x`` is ``cos(2x)``; ``\\sin x \\cos x`` stops at the next function)."""
        opening = self.peek()
        factors = [self.postfix(self.atom(depth), depth)]
        if opening in ("(", "[", "{", "|"):
            return factors[0]
        while self.at < len(self.tokens) and self._is_factor(self.tokens[self.at]):
            factors.append(self.postfix(self.atom(depth), depth))
        return "*".join(factors)

    @staticmethod
    def _is_factor(token: tuple[str, str]) -> bool:
        kind, text = token
        if kind == "num" or (kind == "char" and text.isalpha()):
            return True
        return kind == "cmd" and (text[1:] in CONSTANTS or text[1:] in GREEK)

    def mixed_number(self, whole: str, depth: int) -> str:
        self.take()  # \frac
        numerator, denominator = self.group(depth), self.group(depth)
        if not (numerator.strip("()").isdigit() and denominator.strip("()").isdigit()):
            return f"{whole}*(({numerator})/({denominator}))"
        value = int(whole) + Fraction(int(numerator.strip("()")), int(denominator.strip("()")))
        return f"({value.numerator}/{value.denominator})"

    def postfix(self, atom: str, depth: int) -> str:
        while self.peek() in ("^", "!", "_", "'"):
            _, text = self.take()
            if text == "!":
                atom = f"factorial({atom})"
            elif text == "^":
                atom = f"{atom}**({self.group(depth)})"
            elif text == "_" and atom.startswith("v_") and atom.isidentifier():
                atom = atom + "_" + re.sub(r"\W", "", self.group(depth))
            else:
                raise _Unsupported(text)
        return atom


def _number(text: str) -> str:
    exponent = text.lower().partition("e")[2]
    if exponent and abs(int(exponent)) > MAX_SCIENTIFIC_EXPONENT:
        raise _Unsupported("exponent too large")
    value = Fraction(text)
    return str(value.numerator) if value.denominator == 1 else f"({value.numerator}/{value.denominator})"


def _repeating(prefix: str, repeated: str) -> str:
    """``0.1\\overline{6}`` → ``1/6``: the digits before, then ``repeated`` forever."""
    match, digits = _REPEATING.match(prefix), repeated.strip("()")
    if not match or not digits.isdigit():
        raise _Unsupported("repeating decimal")
    whole, fixed = match.group(1) or "0", match.group(2)
    value = Fraction(int(whole + fixed), 10 ** len(fixed))
    value += Fraction(int(digits), (10 ** len(digits) - 1) * 10 ** len(fixed))
    return f"({value.numerator}/{value.denominator})"


def exact_value(expression: str) -> Fraction | None:
    """The rational value of a ``to_python`` expression, or ``None`` when it is not plain rational
    arithmetic or its result would exceed ``MAX_BITS``."""
    return _exact_value(expression) if len(expression) <= 4 * MAX_LATEX_CHARS else _evaluated(expression)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _exact_value(expression: str) -> Fraction | None:
    return _evaluated(expression)


def _evaluated(expression: str) -> Fraction | None:
    try:
        return _evaluate(ast.parse(expression, mode="eval").body)
    except (_Unsupported, ZeroDivisionError, OverflowError, ValueError, RecursionError, MemoryError):
        return None


def _evaluate(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            return _power(left, right)
        operation = {ast.Add: "__add__", ast.Sub: "__sub__", ast.Mult: "__mul__", ast.Div: "__truediv__"}
        if type(node.op) in operation:
            return _bounded(getattr(left, operation[type(node.op)])(right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = [_evaluate(a) for a in node.args]
        if node.func.id == "factorial" and len(args) == 1:
            return Fraction(math.factorial(_small_natural(args[0])))
        if node.func.id == "binomial" and len(args) == 2:
            return Fraction(math.comb(_small_natural(args[0]), _small_natural(args[1])))
    raise _Unsupported(type(node).__name__)


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1:
        raise _Unsupported("irrational power")
    if base in (0, 1, -1):
        return base ** int(exponent) if exponent >= 0 or base != 0 else _raise_zero()
    bits = max(abs(base.numerator), base.denominator).bit_length()
    if abs(exponent) * bits > MAX_BITS:
        raise _Unsupported("power too large")
    return base ** int(exponent)


def _raise_zero() -> Fraction:
    raise ZeroDivisionError


def _small_natural(value: Fraction) -> int:
    if value.denominator != 1 or not 0 <= value <= MAX_FACTORIAL:
        raise _Unsupported("factorial argument")
    return int(value)


def _bounded(value: Fraction) -> Fraction:
    if max(abs(value.numerator), value.denominator).bit_length() > MAX_BITS:
        raise _Unsupported("too large")
    return value


def too_big_for_sympy(expression: str) -> bool:
    """True when sympy might spend unbounded time: towers, large integer exponents, factorials of
    anything but a small literal. A cheap syntactic check, made before any work is sent to sympy."""
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            exponent = exact_value(ast.unparse(node.right))
            if exponent is None and any(
                isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) for n in ast.walk(node.right)
            ):
                return True
            if exponent is not None and abs(exponent) * _inner_degree(node.left) > MAX_SYMPY_EXPONENT:
                return True  # also ((x+1)^{50})^{50}: the exponents multiply
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("factorial", "binomial"):
            # n! needs a small literal n; binom(n, k) only a small literal k (it is a polynomial in n)
            if _symbolic(node.args[-1]):
                continue  # n! or binom(2n, n) with a variable n: sympy cannot evaluate it, only rewrite it
            values = [exact_value(ast.unparse(a)) for a in node.args]
            bound = MAX_FACTORIAL if values[0] is not None else MAX_SYMBOLIC_CHOOSE
            if any(v is None or v.denominator != 1 or not 0 <= v <= bound for v in values[-1:]):
                return True
            if len(values) == 2 and _huge_choose(node.args[0], values[0], values[1]):
                return True
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, int)
            and node.value.bit_length() > MAX_BITS
        ):
            return True
    return False


def _huge_choose(top: ast.AST, n: Fraction | None, k: Fraction) -> bool:
    """``binom(n, k)`` whose value would pass ``MAX_BITS`` (about ``k`` times the bits of ``n``), or whose
    constant ``n`` is itself past exact arithmetic (``\\binom{\\binom{10^{1000}}{2000}}{50}``)."""
    if n is None:
        return not _symbolic(top)
    return k * max(abs(n.numerator), n.denominator).bit_length() > MAX_BITS


def _symbolic(node: ast.AST) -> bool:
    """Whether ``node`` holds a variable."""
    return any(isinstance(n, ast.Name) and n.id.startswith("v_") for n in ast.walk(node))


def _inner_degree(node: ast.AST) -> Fraction:
    """The largest product of literal exponents along nested powers inside ``node`` (1 if none)."""
    best = Fraction(1)
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.BinOp) and isinstance(child.op, ast.Pow):
            exponent = exact_value(ast.unparse(child.right))
            inner = abs(exponent) if exponent is not None else Fraction(1)
            best = max(best, inner * _inner_degree(child.left))
        else:
            best = max(best, _inner_degree(child))
    return best
