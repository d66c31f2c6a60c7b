"""Matrix arithmetic written out in an answer: ``A + B``, ``AB``, ``3A``, ``A^{-1}``, ``A^T`` with the
matrices as ``pmatrix``/``bmatrix`` literals, evaluated by sympy in the grader's worker process.

``to_python(text)`` turns a normalised answer that holds matrix literals and arithmetic around them into
a sympy expression over ``Matrix(rows, columns, (entries))``, or gives ``None`` when it is not one (a
single literal is a plain matrix, compared by structure in ``compare``). Each literal's entries, and
the arithmetic around the literals (each literal stands in as a variable ``M_{i}``), go through
``expr.to_python``, so the result holds only the safe vocabulary plus ``Matrix``. A transpose
(``^T``, ``^{\\top}``) is applied to its literal here. Guards keep the work small: at most
``MAX_MATRICES`` literals of at most ``MAX_SIZE`` rows and columns, and powers that are integers of at
most ``MAX_POWER``; a determinant (``vmatrix``) is not arithmetic and is left alone.

``equal(a, b, timeout)`` asks the worker (``symbolic.equal(…, relation="matrix")``) whether two such
expressions are the same matrix: same shape (a vector may be a row or a column), every entry equal.
Anything sympy cannot do (a product of mismatched shapes, a singular inverse) is "not equal".

    >>> to_python("2\\\\begin{pmatrix}1&0\\\\\\\\0&1\\\\end{pmatrix}")
    '2*Matrix(2,2,(1,0,0,1,))'
    >>> to_python("\\\\begin{pmatrix}1&2\\\\end{pmatrix}^T"), to_python("\\\\begin{pmatrix}1&2\\\\end{pmatrix}")
    ('Matrix(2,1,(1,2,))', None)
"""

from __future__ import annotations

import ast
import re

from . import expr, symbolic

MAX_MATRICES = 6
MAX_SIZE = 8  # rows and columns of one literal
MAX_POWER = 64  # |n| in A^n
_LITERAL = re.compile(r"\\begin\{([pbB]?matrix)\}((?:(?!\\(?:begin|end)\{).)*)\\end\{\1\}")
_TRANSPOSE = re.compile(r"\^(?:\{(?:T|\\top|\\intercal)\}|T|\\top)")
_PLACEHOLDER = re.compile(r"\bv_M_(\d+)\b")


def to_python(text: str) -> str | None:
    """``text`` as a sympy matrix expression (see the module docstring), or ``None``."""
    literals = list(_LITERAL.finditer(text)) if "\\begin{" in text else []
    if not literals or len(literals) > MAX_MATRICES or "M_" in text:
        return None
    if len(literals) == 1 and literals[0].span() == (0, len(text)):
        return None  # one matrix, no arithmetic
    pieces, matrices, at = [], [], 0
    for index, literal in enumerate(literals):
        rows = _rows(literal.group(2))
        if rows is None or literal.start() < at:
            return None
        pieces.append(text[at : literal.start()] + f"M_{{{index}}}")
        at = literal.end()
        transpose = _TRANSPOSE.match(text, at)
        if transpose:
            rows, at = [list(column) for column in zip(*rows)], transpose.end()
        matrices.append(matrix(rows))
    python = expr.to_python("".join(pieces) + text[at:])
    if python is None or not _small_powers(python):
        return None
    python = _PLACEHOLDER.sub(lambda m: matrices[int(m.group(1))], python)
    return None if expr.too_big_for_sympy(python) else python


def matrix(rows: list[list[str]]) -> str:
    """Rows of ``expr.to_python`` entries as a sympy ``Matrix``; a list of single entries is a column.

    >>> matrix([["1", "2"], ["3", "4"]]), matrix([["5"], ["6"]])
    ('Matrix(2,2,(1,2,3,4,))', 'Matrix(2,1,(5,6,))')
    """
    flat = "".join(entry + "," for row in rows for entry in row)  # a tuple, of one entry too
    return f"{expr.MATRIX}({len(rows)},{len(rows[0])},({flat}))"


def entries(items: list[str]) -> list[str] | None:
    """Normalised entries as ``expr.to_python`` expressions, or ``None`` if one is not an expression."""
    found = [expr.to_python(item) for item in items]
    return None if None in found or len(found) > MAX_SIZE * MAX_SIZE else found


def equal(pred: str, gold: str, timeout: float) -> bool:
    """Whether sympy finds the two matrix expressions the same matrix within ``timeout``."""
    return symbolic.equal(pred, gold, timeout, relation="matrix") is True


def _rows(body: str) -> list[list[str]] | None:
    rows = [row.split("&") for row in body.split("\\\\") if row]
    if not rows or len(rows) > MAX_SIZE or len({len(row) for row in rows}) != 1 or len(rows[0]) > MAX_SIZE:
        return None
    converted = [entries(row) for row in rows]
    return None if None in converted else converted


def _small_powers(python: str) -> bool:
    """Every power in the arithmetic is a small integer (``A^{-1}``, ``A^3``), never a variable."""
    try:
        tree = ast.parse(python, mode="eval")
    except (SyntaxError, RecursionError, ValueError, MemoryError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            power = expr.exact_value(ast.unparse(node.right))
            if power is None or power.denominator != 1 or abs(power) > MAX_POWER:
                return False
    return True
