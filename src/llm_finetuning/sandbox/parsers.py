"""Model text is parsed, never evaluated: what a worker gives third-party code in place of ``eval``, ``exec``
and sympy's ``parse_expr``.

Several of reasoning-gym's verifiers ``eval`` the answer (a list written as a Python literal) or hand it to
sympy's ``parse_expr``, which ``eval``\\ s generated Python with every builtin in reach; a user's reward may do
the same. In the copy of a worker that runs a call (``serve.py``), ``install`` puts parsers in their place, so
the verifier's own scoring logic runs unchanged on data. In the modules declared to read model text
(``reads_model_text``: reasoning-gym, a user's reward module, math-verify):

- ``literal_eval`` is ``eval``: Python literals (numbers, strings, bytes, lists, tuples, sets, dicts, True,
  False, None) and arithmetic on numbers, bounded in size; a name, a call, an attribute, a subscript, a lambda
  or a comprehension is refused with ``ValueError``, a code object (or arithmetic on what is not a number) with
  ``TypeError``;
- ``refuse_exec`` is ``exec`` and ``ast_only_compile`` is ``compile``: nothing runs;

and everywhere in the worker:

- ``parse_expr`` is sympy's, minus the evaluation: sympy's own tokenizer and transformations turn the text into
  Python source as before, which is then read as a syntax tree and built node by node (``_SympyBuilder``):
  numbers, names from the caller's dictionaries or sympy's namespace, arithmetic and comparisons, and calls of
  sympy's math only (its expression classes, ``sympy.functions``, matrices, ``symbols``). A Python builtin
  (``__import__``, ``getattr``, ``open``, ``eval``), an attribute or a subscript is refused with ``ValueError``.
  ``sympify`` and ``S`` reach it too: they import ``parse_expr`` when called.

    >>> literal_eval("[1, 2, -3]"), literal_eval("(0x3a + 7) << 2")
    ([1, 2, -3], 260)
    >>> literal_eval("__import__('os').getcwd()")
    Traceback (most recent call last):
    ...
    ValueError: the sandbox reads literals only: Call refused
"""

from __future__ import annotations

import ast
import builtins
import operator
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["ast_only_compile", "install", "literal_eval", "parse_expr", "reads_model_text", "refuse_exec",
           "replacements"]

_MAX_EXPONENT = 10_000
_MAX_BITS = 1 << 20  # the largest integer arithmetic may make here (a million bits)
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitOr: operator.or_,
           ast.BitXor: operator.xor, ast.BitAnd: operator.and_, ast.MatMult: operator.matmul}  # fmt: skip
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert, ast.Not: operator.not_}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}  # fmt: skip
_NUMBER = (int, float, complex)


def literal_eval(source: Any, globals: Any = None, locals: Any = None) -> Any:
    """``eval`` for text that may be a model's: its literal value, or ``ValueError``."""
    if isinstance(source, (bytes, bytearray)):
        source = bytes(source).decode("utf-8")
    if not isinstance(source, str):
        raise TypeError(f"the sandbox reads literals only: a {type(source).__name__} refused")
    return _Literal().visit(ast.parse(source.lstrip(" \t"), mode="eval").body)


def refuse_exec(*args: Any, **kwargs: Any) -> None:
    """``exec``: code does not run here."""
    raise PermissionError("the sandbox runs no code: exec refused")


class _Literal(ast.NodeVisitor):
    def generic_visit(self, node: ast.AST) -> Any:
        raise ValueError(f"the sandbox reads literals only: {type(node).__name__} refused")

    def visit_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def visit_List(self, node: ast.List) -> list:
        return [self.visit(item) for item in node.elts]

    def visit_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.visit(item) for item in node.elts)

    def visit_Set(self, node: ast.Set) -> set:
        return {self.visit(item) for item in node.elts}

    def visit_Dict(self, node: ast.Dict) -> dict:
        if any(key is None for key in node.keys):
            raise ValueError("the sandbox reads literals only: ** refused")
        return {self.visit(key): self.visit(value) for key, value in zip(node.keys, node.values)}

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        return _UNARY[type(node.op)](_number(self.visit(node.operand)))

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        left, right = _number(self.visit(node.left)), _number(self.visit(node.right))
        _bounded(type(node.op), left, right)
        return _BINARY[type(node.op)](left, right)


def _number(value: Any) -> Any:
    if not isinstance(value, _NUMBER):
        raise TypeError(f"the sandbox does arithmetic on numbers only, not on {type(value).__name__}")
    return value


def _bounded(op: type, left: Any, right: Any) -> None:
    """Refuse integer arithmetic whose result would pass ``_MAX_BITS`` (``9**9**9``, ``1 << 10**9``)."""
    if not (isinstance(left, int) and isinstance(right, int)):
        return
    if op is ast.Pow and right > 0 and (right > _MAX_EXPONENT or left.bit_length() * right > _MAX_BITS):
        raise ValueError("the sandbox refuses a power this large")
    if op is ast.LShift and right > _MAX_BITS:
        raise ValueError("the sandbox refuses a shift this large")


def parse_expr(s: str, local_dict: dict | None = None, transformations: Any = None,
               global_dict: dict | None = None, evaluate: bool = True) -> Any:  # fmt: skip
    """sympy's ``parse_expr`` (same arguments, same result on math) with the evaluation replaced by
    ``_SympyBuilder``."""
    from sympy.parsing import sympy_parser

    if local_dict is None:
        local_dict = {}
    elif not isinstance(local_dict, dict):
        raise TypeError("expecting local_dict to be a dict")
    if global_dict is None:
        global_dict = _sympy_namespace()
    elif not isinstance(global_dict, dict):
        raise TypeError("expecting global_dict to be a dict")
    transformations = _transformations(sympy_parser, transformations)
    code = sympy_parser.stringify_expr(s, local_dict, global_dict, transformations)
    tree = ast.parse(code, mode="eval") if evaluate else sympy_parser.evaluateFalse(code)
    try:
        return _SympyBuilder(local_dict, global_dict).visit(tree.body)
    finally:
        for name in local_dict.pop(sympy_parser.null, ()):
            local_dict[name] = sympy_parser.null


def _transformations(sympy_parser: Any, given: Any) -> tuple:
    if given is None:
        return sympy_parser.standard_transformations
    if given == "all":
        return sympy_parser.T[:]
    if given == "implicit":
        return sympy_parser.T[:6]
    if isinstance(given, str):
        raise ValueError("unknown transformation group name")  # noqa: TRY004 - sympy's own error
    return given


_NAMESPACE: dict[str, Any] = {}


def _sympy_namespace() -> dict[str, Any]:
    """What sympy's ``parse_expr`` evaluates in by default (``from sympy import *``, builtin functions, max and
    min as Max and Min): the transformations read it to tell names of functions from symbols; the builder
    calls only the math in it."""
    if not _NAMESPACE:
        import types

        import sympy

        _NAMESPACE.update({name: getattr(sympy, name) for name in sympy.__all__})
        _NAMESPACE.update({name: value for name, value in vars(builtins).items()
                           if isinstance(value, types.BuiltinFunctionType)})  # fmt: skip
        _NAMESPACE.update(max=sympy.Max, min=sympy.Min)
    return dict(_NAMESPACE)


def _callable_math(function: Any) -> bool:
    """sympy's math: its expression classes (``Symbol``, ``Integer``, ``sin``, ``Add``, ``Function``), an
    expression applied as a function, ``sympy.functions`` (``sqrt``, ``root``), matrices, ``symbols``."""
    import sympy

    if isinstance(function, type):
        return issubclass(function, (sympy.Basic, sympy.MatrixBase))
    if isinstance(function, sympy.Basic):
        return True
    module = getattr(function, "__module__", None) or ""
    return module.startswith("sympy.functions.") or function is sympy.symbols


class _SympyBuilder(ast.NodeVisitor):
    """Builds the value of the Python source ``stringify_expr`` wrote, from sympy's math alone."""

    def __init__(self, local_dict: dict, global_dict: dict) -> None:
        self.local_dict, self.global_dict = local_dict, global_dict

    def generic_visit(self, node: ast.AST) -> Any:
        raise ValueError(f"the sandbox parses math only: {type(node).__name__} refused")

    def visit_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def visit_Name(self, node: ast.Name) -> Any:
        for names in (self.local_dict, self.global_dict):
            if node.id in names:
                return names[node.id]
        raise NameError(f"name {node.id!r} is not defined")

    def visit_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.visit(item) for item in node.elts)

    def visit_List(self, node: ast.List) -> list:
        return [self.visit(item) for item in node.elts]

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        return _UNARY[type(node.op)](self.visit(node.operand))

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        left, right = self.visit(node.left), self.visit(node.right)
        _bounded(type(node.op), left, right)
        return _BINARY[type(node.op)](left, right)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        value = None
        for item in node.values:
            value = self.visit(item)
            if bool(value) == isinstance(node.op, ast.Or):
                return value
        return value

    def visit_Compare(self, node: ast.Compare) -> Any:
        """Python's chain: ``a < b < c`` is ``a < b and b < c``; a single comparison is not made a bool."""
        left, result = self.visit(node.left), True
        for position, (op, comparator) in enumerate(zip(node.ops, node.comparators)):
            right = self.visit(comparator)
            result = _COMPARE[type(op)](left, right)
            if position < len(node.ops) - 1 and not result:
                return result
            left = right
        return result

    def visit_Call(self, node: ast.Call) -> Any:
        function = self.visit(node.func)
        if not _callable_math(function):
            raise ValueError(f"the sandbox parses math only: calling {getattr(function, '__name__', function)!r} refused")
        if any(isinstance(arg, ast.Starred) for arg in node.args) or any(k.arg is None for k in node.keywords):
            raise ValueError("the sandbox parses math only: * and ** refused")
        args = [self.visit(arg) for arg in node.args]
        return function(*args, **{keyword.arg: self.visit(keyword.value) for keyword in node.keywords})


_READS_TEXT: set[str] = set()  # module names (and their submodules) whose eval/exec/compile are replaced


def reads_model_text(*module_names: str) -> None:
    """Declare modules that run on model text (a task package, a user's reward module): in a call, their
    ``eval``, ``exec`` and ``compile`` are the parsers'. Only theirs: sympy and the standard library generate and
    run code of their own (sympy's polynomial arithmetic runs code it writes with ``exec``), which stays as it is."""
    _READS_TEXT.update(module_names)


def ast_only_compile(source: Any, filename: Any, mode: str, flags: int = 0, *args: Any, **kwargs: Any) -> Any:
    """``compile``: a syntax tree (``ast.parse``), never code."""
    if not flags & ast.PyCF_ONLY_AST:
        raise PermissionError("the sandbox runs no code: compile refused")
    return builtins.compile(source, filename, mode, flags, *args, **kwargs)


def replacements() -> list[tuple[dict, str, Callable[..., Any]]]:
    """What a call's copy assigns: ``eval``/``exec``/``compile`` in the modules that read model text, and sympy's
    ``parse_expr`` wherever this process keeps it (its module, ``sympy``, every module that imported the name).
    Computed by the worker before it forks (it walks every module), so a copy only assigns."""
    found: list[tuple[dict, str, Callable[..., Any]]] = []
    original = getattr(sys.modules.get("sympy.parsing.sympy_parser"), "parse_expr", None)
    if original is not None:
        _sympy_namespace()  # built here once, not in every copy that parses
    for name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        if any(name == prefix or name.startswith(prefix + ".") for prefix in _READS_TEXT):
            used = _names_used(namespace) & _EVALUATORS.keys()
            found += [(namespace, evaluator, _EVALUATORS[evaluator]) for evaluator in sorted(used)]
        if original is not None and original is not parse_expr:
            found += [(namespace, key, parse_expr) for key, value in list(namespace.items()) if value is original]
    return found


_EVALUATORS = {"eval": literal_eval, "exec": refuse_exec, "compile": ast_only_compile}


def _names_used(namespace: dict) -> set[str]:
    """The global names the code defined in a module refers to (its functions', classes' methods', nested code):
    a module that never says ``eval`` needs no parser in its place, and each assignment costs a call's copy a
    page of memory."""
    names: set[str] = set()
    own = [value for value in namespace.values() if getattr(value, "__module__", None) == namespace.get("__name__")]
    codes = [getattr(value, "__code__", None) for value in own]
    for value in own:
        if isinstance(value, type):
            codes += [getattr(getattr(member, "__func__", member), "__code__", None) for member in vars(value).values()]
    while codes:
        code = codes.pop()
        if code is not None:
            names.update(code.co_names)
            codes += [const for const in code.co_consts if hasattr(const, "co_names")]
    return names


def install(found: list[tuple[dict, str, Callable[..., Any]]]) -> None:
    """From now on, in this process, the parsers stand where ``replacements`` found the evaluators."""
    for namespace, name, replacement in found:
        namespace[name] = replacement
