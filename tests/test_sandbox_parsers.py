"""The parsers a call's copy of a worker puts where third-party code would evaluate model text
(sandbox/parsers.py): literals and math read as Python and sympy read them, code refused."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import sympy
from sympy.parsing.sympy_parser import parse_expr as sympys_parse_expr

from llm_finetuning.sandbox.parsers import literal_eval, parse_expr

LITERALS = ["[1, 2, 3]", "[[1, 0], [0, 1]]", "['a', 'b']", "(1, 'x', None, True)", "{'k': [1.5, -2]}", "{1, 2}",
            "-7", "3.25", "1e3", "2+3j", "0x3a", "(0x3a + 0x4b) << 2", "7 // 2", "2 ** 10", "~5 & 0xff", "  [1]",
            "b'bytes'", "'q' 'r'"]  # fmt: skip
NOT_LITERALS = ["__import__('os').getcwd()", "open('/etc/hostname')", "x", "[].__class__", "(lambda: 1)()",
                "[i for i in range(3)]", "f'{1}'", "{**{}}", "[*[1]]", "9 ** 9 ** 9", "1 << (1 << 40)",
                "'a' * 10", "[1] + [2]", "(x := 1)", "1 if 1 else 2"]  # fmt: skip
MATH = ["2*x + 1", "x**2 - 3*x + sin(y)", "sqrt(8)/2", "Rational(3, 4) + 1/3", "3.5*x - 0.25", "exp(I*pi)",
        "factorial(5) + binomial(6, 2)", "Abs(-x)", "log(x, 2)", "x < 3", "Eq(x, 2)", "f(x) + 1", "(1, 2, x)",
        "x^2", "2x", "Max(x, 1)", "-(x + 1)*(x - 1)", "0.[3]", "4!"]  # fmt: skip
HOSTILE_MATH = ["__import__('os').system('true')", "getattr(x, 'func')", "x.func", "open('/etc/hostname')",
                "eval('1')", "(lambda: 1)()", "[c for c in 'ab']", "Symbol('x').__class__", "exec('1')",
                "compile('1', 'f', 'eval')", "vars()", "globals()", "lambdify(x, 'x')", "preview(x)",
                "sympify('__import__(\"os\")')", "x[0]"]  # fmt: skip


@pytest.mark.parametrize("text", LITERALS)
def test_literals_and_arithmetic_read_as_pythons_eval_reads_them(text):
    assert literal_eval(text) == eval(text)


@pytest.mark.parametrize("text", NOT_LITERALS)
def test_names_calls_attributes_and_huge_numbers_are_refused(text):
    with pytest.raises((ValueError, TypeError)):
        literal_eval(text)


def test_a_code_object_is_refused():
    with pytest.raises(TypeError):
        literal_eval(compile("1", "<test>", "eval"))


@pytest.mark.parametrize("text", MATH)
@pytest.mark.parametrize(("transformations", "evaluate"), [(None, True), ("all", True), (None, False)])
def test_math_parses_to_what_sympys_parse_expr_makes(text, transformations, evaluate):
    if transformations is None and text in ("x^2", "2x"):
        pytest.skip("needs the implicit transformations")
    options = {"evaluate": evaluate, **({"transformations": transformations} if transformations else {})}
    assert sympy.srepr(parse_expr(text, **options)) == sympy.srepr(sympys_parse_expr(text, **options))


def test_the_callers_dictionaries_are_honoured_as_sympys_are():
    x = sympy.Symbol("x", positive=True)
    assert parse_expr("sqrt(x**2) + C", local_dict={"x": x, "C": sympy.Symbol("C")}) == x + sympy.Symbol("C")
    assert parse_expr("2*v_x", local_dict={"v_x": sympy.Symbol("v_x")}, global_dict={"Integer": sympy.Integer}) == (
        2 * sympy.Symbol("v_x"))
    with pytest.raises(NameError):
        parse_expr("sin(1)", global_dict={"Integer": sympy.Integer})  # as sympy: a name the dictionaries lack


@pytest.mark.parametrize("text", HOSTILE_MATH)
def test_math_that_is_code_is_refused(text):
    with pytest.raises((ValueError, TypeError, NameError, SyntaxError, sympy.SympifyError)):
        parse_expr(text)


def test_installed_the_parsers_stand_where_model_text_is_read_and_sympy_still_runs_its_own_code():
    """In a fresh process: a module declared to read model text evaluates literals only; ``sympify`` parses
    without eval; sympy's polynomial arithmetic, which runs code it writes with ``exec``, still works."""
    code = (
        "import json, sympy, types, sys\n"
        "from llm_finetuning.sandbox import parsers\n"
        "reader = types.ModuleType('model_text_reader'); sys.modules['model_text_reader'] = reader\n"
        "exec('def read(text):\\n    return eval(text)', reader.__dict__)\n"
        "parsers.reads_model_text('model_text_reader')\nparsers.install(parsers.replacements())\n"
        "out = {'literal': reader.read('[1, 2]')}\n"
        "try:\n    reader.read(\"__import__('os').getcwd()\")\n    out['code'] = 'ran'\n"
        "except ValueError:\n    out['code'] = 'refused'\n"
        "try:\n    sympy.sympify(\"__import__('os').getcwd()\")\n    out['sympify'] = 'ran'\n"
        "except Exception:\n    out['sympify'] = 'refused'\n"
        "x = sympy.Symbol('x')\nout['polys'] = str(sympy.Poly(x**2 + 1, x) * sympy.Poly(x - 1, x))\n"
        "out['simplify'] = str(sympy.simplify(sympy.sin(x)**2 + sympy.cos(x)**2))\n"
        "print(json.dumps(out))\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(ran.stdout) == {"literal": [1, 2], "code": "refused", "sympify": "refused",
                                      "polys": "Poly(x**3 - x**2 + x - 1, x, domain='ZZ')", "simplify": "1"}  # fmt: skip
