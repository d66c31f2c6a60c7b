"""Floating-point verdicts on two ``expr.to_python`` expressions, before any sympy.

Each expression is evaluated (complex double precision) at three fixed points, every variable at its
own value there. Two expressions that differ clearly at some point are different (``False``); two that
agree to twelve digits at every point (or are both zero to rounding) and hold no literal or power too
large or too small for double precision to resolve are the same expression (``True``: ``\\sqrt{8}``
and ``2\\sqrt{2}``, ``1 - 2\\sin^2 x`` and ``\\cos 2x``). When double precision cannot resolve them
(a 13-digit decimal against ``\\sqrt{2}``, ``\\pi + 10^{-20}`` against ``\\pi``) and neither has
variables or trigonometry, both are evaluated again with 60-digit decimals. Anything else is left to
sympy (``None``). Distinct expressions that agree to twelve digits at three unrelated points do not
occur in answers; and unlike sympy, this needs no worker process, so the verdict is instant and the
same in a cold process as in a warm one. ``written_to_double`` says whether a long decimal is a
rational printed to double precision (``0.1428571428571428`` for ``\\frac{1}{7}``).

    >>> verdict("sqrt(8)", "2*sqrt(2)"), verdict("v_x**(2)", "v_x*v_x"), verdict("(157/50)", "pi")
    (True, True, False)
"""

from __future__ import annotations

import ast
import cmath
import decimal
import math
import re
import zlib
from decimal import Decimal
from fractions import Fraction

from .expr import MAX_FACTORIAL

POINTS = (0.7310585786, 1.4142135623 + 0.5j, -0.3183098862 + 1.2247448714j)  # arbitrary
DIFFERENT = 1e-9  # relative difference that is certainly not rounding
SAME = 1e-12  # relative agreement taken as identity
ZERO = 1e-13  # both this close to zero (sin(pi) and 0): the same, when built from resolvable literals
RESOLVABLE = 1e8  # literals and powers beyond this magnitude (or below its inverse) defeat doubles
FUNCTIONS = {
    "sqrt": cmath.sqrt, "exp": cmath.exp, "sin": cmath.sin, "cos": cmath.cos, "tan": cmath.tan,
    "asin": cmath.asin, "acos": cmath.acos, "atan": cmath.atan, "sinh": cmath.sinh, "cosh": cmath.cosh,
    "tanh": cmath.tanh, "Abs": abs, "sec": lambda x: 1 / cmath.cos(x), "csc": lambda x: 1 / cmath.sin(x),
    "cot": lambda x: 1 / cmath.tan(x), "asec": lambda x: cmath.acos(1 / x),
    "acsc": lambda x: cmath.asin(1 / x), "acot": lambda x: cmath.atan(1 / x),
    "root": lambda x, n: x ** (1 / n), "log": lambda x, b=None: cmath.log(x) / (cmath.log(b) if b is not None else 1),
    "factorial": lambda x: _gamma(x + 1), "binomial": lambda n, k: _binomial(n, k),
}  # fmt: skip
CONSTANTS = {"pi": math.pi, "E": math.e, "I": 1j}
DOUBLE_DIGITS = 12  # a decimal with this many significant digits is a value written out, not a rounding
DOUBLE_ERROR = Fraction(1, 2**51)  # a few units of a double's rounding, relative
_DECIMAL = re.compile(r"^-?(\d*)\.(\d+)(?:[eE]([+-]?\d+))?$")


_LANCZOS = (
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
    -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
    1.5056327351493116e-7,
)  # fmt: skip


def _gamma(z: complex) -> complex:
    """The gamma function at a complex point (Lanczos, g = 7: about 15 digits), so ``n!`` with a
    variable ``n`` has a floating-point verdict: ``(n+1)!/n!`` against ``n+1``."""
    if z.real == int(z.real) and not z.imag and 0 < z.real <= 171:
        return complex(math.factorial(int(z.real) - 1))
    if z.real < 0.5:
        return cmath.pi / (cmath.sin(cmath.pi * z) * _gamma(1 - z))
    z -= 1
    total = _LANCZOS[0] + sum(c / (z + i) for i, c in enumerate(_LANCZOS[1:], start=1))
    t = z + 7.5
    return cmath.sqrt(2 * cmath.pi) * t ** (z + 0.5) * cmath.exp(-t) * total


def _binomial(n: complex, k: complex) -> complex:
    """``n choose k``: ``n (n-1) … (n-k+1) / k!`` for a natural ``k`` (any ``n``), else with gamma."""
    if k.imag or k.real != int(k.real) or not 0 <= k.real <= 2_000:
        return _gamma(n + 1) / (_gamma(k + 1) * _gamma(n - k + 1))
    k = int(k.real)
    product = complex(1)
    for i in range(k):
        product *= n - i
    return product / math.factorial(k)


def verdict(left: str, right: str) -> bool | None:
    """``False`` when the expressions clearly differ, ``True`` when they are numerically identical,
    ``None`` when floating point cannot tell (see the module docstring)."""
    identical = True
    for point in POINTS:
        a, a_precise = _value(left, point)
        b, b_precise = _value(right, point)
        if a is None or b is None:  # beyond double range (a 400-digit integer): decimals may still tell
            return _precise_verdict(left, right)
        if abs(a - b) > DIFFERENT * max(1.0, abs(a), abs(b)):
            return False
        scale = max(abs(a), abs(b))
        if not (a_precise and b_precise and (abs(a - b) <= SAME * scale if scale > 1e-6 else scale < ZERO)):
            identical = False
    return True if identical else _precise_verdict(left, right)


def written_to_double(decimal_text: str, value: Fraction, other_text: str, exact: Fraction) -> bool:
    """Whether the decimal ``decimal_text`` (of value ``value``) is the rational ``exact`` (written
    ``other_text``, not itself a decimal) printed to the precision of a double: twelve or more
    significant digits, and either within a few units of a double's rounding of ``exact``
    (``0.30000000000000004`` for ``\\frac{3}{10}``) or ``exact`` cut or rounded at its last digit
    (``0.1428571428571428`` or ``0.142857142857`` for ``\\frac{1}{7}``). A shorter decimal is a
    rounding and stays different (``0.1429``).

    >>> written_to_double("0.1428571428571428", Fraction("0.1428571428571428"), "\\\\frac{1}{7}", Fraction(1, 7))
    True
    >>> written_to_double("0.14285714", Fraction("0.14285714"), "\\\\frac{1}{7}", Fraction(1, 7))
    False
    """
    match = _DECIMAL.match(decimal_text)
    if match is None or _DECIMAL.match(other_text) or value == exact:
        return False
    if len((match.group(1) + match.group(2)).lstrip("0")) < DOUBLE_DIGITS:
        return False
    error = abs(value - exact)
    if error <= DOUBLE_ERROR * abs(exact):
        return True
    last_digit = Fraction(10) ** (int(match.group(3) or 0) - len(match.group(2)))
    return error < last_digit and (exact / last_digit).denominator != 1


def rounded_gold(gold_text: str, answer_text: str, answer: str, exact: Fraction | None) -> bool:
    """Whether the gold, a decimal (``0.67``), is the exact answer's value rounded at the gold's last
    digit (``\\frac{2}{3}``, ``\\sqrt{2}`` for ``1.414``): the gold gives the precision it was
    rounded to, and an exact answer carries every digit. Only for a gold of two or more significant
    digits (``0.3`` is too coarse to stand for ``\\frac13``), an answer written without a decimal point
    and without variables, and a value whose decimal expansion does not terminate (a terminating one,
    ``\\frac{99}{100}``, is compared exactly: it is not ``1.0``). The other way round a decimal answer is
    a rounding and stays different from the exact gold (``0.67`` is not ``\\frac23``).

    >>> rounded_gold("0.67", "\\frac{2}{3}", "(2)/(3)", Fraction(2, 3)), rounded_gold("0.66", "\\frac23", "(2)/(3)", Fraction(2, 3))
    (True, False)
    >>> rounded_gold("1.0", "\\frac{99}{100}", "(99)/(100)", Fraction(99, 100))
    False
    """
    match = _DECIMAL.match(gold_text)
    if match is None or match.group(3) or "." in answer_text or "v_" in answer:
        return False
    if len((match.group(1) + match.group(2)).lstrip("0")) < 2:
        return False
    if exact is not None and _terminates(exact):
        return False
    value = _exact_decimal(answer)
    if value is None:
        return False
    half_unit = Decimal(5).scaleb(-len(match.group(2)) - 1)
    return abs(value - Decimal(gold_text)) <= half_unit


def _terminates(value: Fraction) -> bool:
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    return denominator == 1


def _exact_decimal(expression: str) -> Decimal | None:
    """A constant expression's value to 60 digits (without trigonometry), else to double precision."""
    with decimal.localcontext(_PRECISION):
        try:
            return +_decimal(ast.parse(expression, mode="eval").body)
        except Exception:  # noqa: BLE001  (trigonometry, domain errors: double precision below)
            value = constant_value(expression)
    return Decimal(value.real) if value is not None and abs(value.imag) < 1e-12 else None


def proportional(left: str, right: str) -> bool | None:
    """Whether the equations ``left = 0`` and ``right = 0`` are the same up to a constant factor:
    ``True``/``False`` when floating point settles it, ``None`` otherwise."""
    ratios = []
    for point in POINTS:
        a, a_precise = _value(left, point)
        b, b_precise = _value(right, point)
        if a is None or b is None or not (a_precise and b_precise) or min(abs(a), abs(b)) < 1e-6:
            return None
        ratios.append(a / b)
    spread = max(abs(r - ratios[0]) for r in ratios) / abs(ratios[0])
    if spread > 1e-6:
        return False
    return True if spread <= SAME * 100 else None


def constant_value(expression: str) -> complex | None:
    """The value of a constant expression in double precision, or ``None`` when it cannot be
    evaluated or is not finite (bounded like every evaluation here: huge powers are refused)."""
    return _value(expression, POINTS[0])[0]


def _value(expression: str, point: complex) -> tuple[complex | None, bool]:
    """The expression's value at ``point`` (``None`` if it cannot be evaluated or is not finite) and
    whether double precision resolves it."""
    precise = [True]
    try:
        value = complex(_evaluate(ast.parse(expression, mode="eval").body, point, precise))
    except Exception:  # noqa: BLE001  (overflow, domain errors, unsupported nodes: no verdict)
        return None, False
    return (value if cmath.isfinite(value) else None), precise[0]


_PRECISION = decimal.Context(prec=60, Emax=10_000, Emin=-10_000, traps=[decimal.InvalidOperation,
                              decimal.DivisionByZero, decimal.Overflow])  # fmt: skip
_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899")
_DECIMAL_FUNCTIONS = {
    "sqrt": lambda x: x.sqrt(_PRECISION), "exp": lambda x: x.exp(_PRECISION), "Abs": abs,
    "log": lambda x, b=None: x.ln(_PRECISION) / (b.ln(_PRECISION) if b is not None else 1),
    "root": lambda x, n: _PRECISION.power(x, 1 / n), "factorial": lambda x: _decimal_factorial(x),
    "binomial": lambda n, k: _decimal_binomial(n, k),
}  # fmt: skip


def _small_natural(value: Decimal) -> int:
    """``value`` as an int when it is a natural number up to ``MAX_FACTORIAL``; ValueError otherwise (so
    ``(10^9)!`` and ``\\binom{\\binom{10^{1000}}{2000}}{50}`` never reach exact integer arithmetic)."""
    if value != value.to_integral_value() or not 0 <= value <= MAX_FACTORIAL:
        raise ValueError("outside the factorial range")
    return int(value)


def _decimal_factorial(x: Decimal) -> Decimal:
    return Decimal(math.factorial(_small_natural(x)))


def _decimal_binomial(n: Decimal, k: Decimal) -> Decimal:
    """``n (n-1) … (n-k+1) / k!`` in the 60-digit context: bounded by ``k``, whatever the size of ``n`` (a
    product past the context's exponent range overflows, which is no verdict)."""
    count = _small_natural(k)
    product = Decimal(1)
    for i in range(count):
        product *= n - i
    return product / math.factorial(count)


def _precise_verdict(left: str, right: str) -> bool | None:
    """Constant expressions without trigonometry, compared with 60-digit decimals."""
    with decimal.localcontext(_PRECISION):
        try:
            a = _decimal(ast.parse(left, mode="eval").body)
            b = _decimal(ast.parse(right, mode="eval").body)
        except Exception:  # noqa: BLE001  (variables, trigonometry, domain errors: no verdict)
            return None
        difference, scale = abs(a - b), max(Decimal(1), abs(a), abs(b))
    if difference <= scale * Decimal("1e-50"):
        return True
    return False if difference > scale * Decimal("1e-40") else None


def _decimal(node: ast.AST) -> Decimal:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return Decimal(node.value)
    if isinstance(node, ast.Name) and node.id in ("pi", "E"):
        return _PI if node.id == "pi" else Decimal(1).exp()
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _decimal(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow):
        left, right = _decimal(node.left), _decimal(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > 10_000:
                raise OverflowError("exponent")
            return left ** int(right) if right == int(right) else _PRECISION.power(left, right)
        operations = {ast.Add: Decimal.__add__, ast.Sub: Decimal.__sub__, ast.Mult: Decimal.__mul__,
                      ast.Div: Decimal.__truediv__}  # fmt: skip
        return operations[type(node.op)](left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return Decimal(_DECIMAL_FUNCTIONS[node.func.id](*[_decimal(a) for a in node.args]))
    raise ValueError(type(node).__name__)


def _variable(name: str, point: complex) -> complex:
    """A value for variable ``name`` at ``point``, different for different names."""
    code = zlib.crc32(name.encode())
    scale, shift = 0.5 + (code & 0xFFFF) / 65536, ((code >> 16) & 0xFFFF) / 65536 - 0.5
    return point * scale + shift * (0.3 + 0.7j)


def _evaluate(node: ast.AST, point: complex, precise: list[bool]) -> complex:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        if abs(node.value) > RESOLVABLE:
            precise[0] = False
        return complex(node.value)
    if isinstance(node, ast.Name):
        if node.id.startswith("v_"):
            return _variable(node.id, point)
        return complex(CONSTANTS[node.id])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand, point, precise)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, point, precise), _evaluate(node.right, point, precise)
        if isinstance(node.op, ast.Pow):
            if abs(right) > 1e4:
                raise OverflowError("probe exponent")
            value = left**right
            if value and not 1 / RESOLVABLE < abs(value) < RESOLVABLE and abs(left) != 0:
                precise[0] = False
            return value
        operations = {ast.Add: complex.__add__, ast.Sub: complex.__sub__, ast.Mult: complex.__mul__,
                      ast.Div: complex.__truediv__}  # fmt: skip
        return operations[type(node.op)](left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return complex(FUNCTIONS[node.func.id](*[_evaluate(a, point, precise) for a in node.args]))
    raise ValueError(type(node).__name__)
