"""Answer formats the grader reads, one table per format, each with near-miss negatives: equations
with a number on one side, Minerva-style closing lines, leaked chat-template markers, LaTeX-spaced
thousands, intervals written as relations, unordered solution sets, gold answers that name their
quantity, decimals printed to double precision, and matrix arithmetic (docs/grader.md)."""

import pytest

from llm_finetuning.grading import grade, is_equivalent, warm_up

A = "\\begin{pmatrix}3 & 1 \\\\ 0 & 2\\end{pmatrix}"
B = "\\begin{pmatrix}1 & 0 \\\\ 5 & 1\\end{pmatrix}"


def matrix(*rows: str) -> str:
    return "\\begin{pmatrix}" + " \\\\ ".join(rows) + "\\end{pmatrix}"


# (format, answer, gold, expected)
ANSWERS = [
    ("equation", "4m - n", "9 = 4m - n", False),
    ("equation", "4m - n = 9", "9 = 4m - n", True),
    ("equation", "n = 4m - 9", "9 = 4m - n", True),
    ("equation", "9", "9 = 4m - n", False),
    ("equation", "0 = r^2 - 3r", "r^2 - 3r", False),
    ("equation", "\\frac{12}{4} = 3", "3", True),
    ("thousands", "45,\\!678", "45678", True),
    ("thousands", "7\\,000\\,000", "7000000", True),
    ("thousands", "7\\,000\\,000", "700000", False),
    ("thousands", "(2\\,000, 3\\,500)", "(2000, 3500)", True),
    ("interval", "x \\in [-2, 9]", "-2 \\le x \\le 9", True),
    ("interval", "-2 < x \\le 9", "x \\in [-2, 9]", False),
    ("interval", "1 < k(s) < 4", "(1, 4)", True),
    ("interval", "1 < k(s) < 4", "1 < s < 4", False),
    ("interval", "2 \\le |u| \\le 5", "[-5, -2] \\cup [2, 5]", True),
    ("interval", "2 \\le |u| \\le 5", "[2, 5]", False),
    ("interval", "-3 \\le 2t + 1 < 7", "[-2, 3)", True),
    ("interval", "4 \\ge |z|", "[-4, 4]", True),
    ("solution set", "(3, 8), (8, 3)", "(8, 3) or (3, 8)", True),
    ("solution set", "(3, 8)", "(8, 3) or (3, 8)", False),
    ("solution set", "9, 7, 2", "9, 7$ or $2", True),
    ("solution set", "9, 7", "9, 7$ or $2", False),
    ("solution set", "(1, 3), (4, 3)", "p=1, q=3; p=4, q=3", True),
    ("solution set", "(3, 1), (3, 4)", "p=1, q=3; p=4, q=3", False),
    ("solution set", "p=1, q=3 \\text{ or } p=4, q=3", "(4, 3), (1, 3)", True),
    ("solution set", "p=1, q=3 \\text{ or } p=3, q=4", "(4, 3), (1, 3)", False),
    ("named gold", "5:12", "V_A : V_B = 5 : 12", True),
    ("named gold", "12:5", "V_A : V_B = 5 : 12", False),
    ("named gold", "\\frac{4}{9}", "[PQR] : [XYZ] = 4 : 9", True),
    ("named gold", "2:7", "\\frac{CF}{FD} = \\frac{2}{7}", True),
    ("named gold", "\\frac{7}{2}", "\\frac{CF}{FD} = \\frac{2}{7}", False),
    ("double", "0.4166666666666667", "\\frac{5}{12}", True),
    ("double", "0.416666666667", "\\frac{5}{12}", True),
    ("double", "0.41666666666", "\\frac{5}{12}", False),
    ("double", "0.4167", "\\frac{5}{12}", False),
    ("double", "0.4166666666666667", "\\frac{5}{11}", False),
    ("double", "1.4142135623730951", "\\sqrt{2}", False),
    ("double", "\\frac{5}{12}", "0.4166666666666667", True),
    ("matrix", A + B, matrix("8 & 1", "10 & 2"), True),
    ("matrix", B + A, matrix("8 & 1", "10 & 2"), False),
    ("matrix", "2" + A, matrix("6 & 2", "0 & 4"), True),
    ("matrix", A + " + " + B, matrix("4 & 1", "5 & 3"), True),
    ("matrix", A + " + " + B, matrix("4 & 1", "5 & 4"), False),
    ("matrix", matrix("2 & 1", "5 & 3") + "^{-1}", matrix("3 & -1", "-5 & 2"), True),
    ("matrix", A + "^T", matrix("3 & 0", "1 & 2"), True),
    ("matrix", matrix("1", "2") + " - " + matrix("3", "5"), "(-2, -3)", True),
    ("matrix", matrix("1 & 2") + " + " + matrix("1", "2"), "(2, 4)", False),
    ("matrix", matrix("2", "5") + "^T" + matrix("3", "1"), "11", True),  # a 1 x 1 result is its entry
    ("matrix", matrix("2", "5") + matrix("3", "1") + "^T", "11", False),  # the outer product
]

# (format, completion, gold, expected)
COMPLETIONS = [
    ("closing line", "<SOLUTION>So $x = 9/2$.\n\nFinal Answer: The final answer is $\\frac{9}{2}$. I hope it is correct.</SOLUTION>", "4.5", True),
    ("closing line", "<SOLUTION>Final Answer: The smallest $n$ is 14.</SOLUTION>", "14", True),
    ("closing line", "<SOLUTION>Final Answer: The smallest $n$ is 14.</SOLUTION>", "41", False),
    ("closing line", "Hence $\\boxed{14}$.\nFinal Answer: The final answer is $14$. I hope it is correct.", "14", True),
    ("closing line", "Hence $\\boxed{14}$.\nFinal Answer: The final answer is $15$. I hope it is correct.", "14", False),
    ("chat marker", "So $\\boxed{11}$.<|im_end|>\n<|im_start|>user\nAnd for 12?", "11", True),
    ("chat marker", "So $\\boxed{11}$.<|im_end|>\n<|im_start|>user\nAnd for 12?<|im_end|>\n<|im_start|>assistant\n$\\boxed{12}$", "12", False),
    ("chat marker", "<SOLUTION>6<|eot_id|>", "6", True),
    ("chat marker", "<SOLUTION>Let me see.<|im_end|><|im_start|>user\nThe answer is 6</SOLUTION>", "6", False),
    ("chat marker", "<|im_start|>assistant\nThe answer is $\\boxed{6}$.<|endoftext|>", "6", True),
    ("thousands", "The total is $\\boxed{45,\\!678}$ dollars.", "45678", True),
    ("thousands", "$\\boxed{4\\,6}$", "46", False),
    ("solution set", "<SOLUTION>The pairs are $(3, 8)$ and $(8, 3)$.</SOLUTION>", "(8, 3) or (3, 8)", True),
    ("solution set", "<SOLUTION>\\boxed{\\{4, 9\\}}</SOLUTION>", "\\boxed{4}, \\boxed{9}", True),
    ("solution set", "<SOLUTION>\\boxed{\\{4, 10\\}}</SOLUTION>", "\\boxed{4}, \\boxed{9}", False),
    ("solution set", "<SOLUTION>\\boxed{p=1, q=3; \\ p=4, q=3}</SOLUTION>", "(1, 3), (4, 3)", True),
]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def warm_worker():
    warm_up()  # matrix arithmetic goes to the sympy worker: its import is not what is tested


@pytest.mark.parametrize(("kind", "answer", "gold", "expected"), ANSWERS)
def test_answer_formats(kind, answer, gold, expected):
    assert is_equivalent(answer, gold) is expected, kind


@pytest.mark.parametrize(("kind", "completion", "gold", "expected"), COMPLETIONS)
def test_completion_formats(kind, completion, gold, expected):
    assert grade(completion, gold) is expected, kind


def test_matrix_arithmetic_the_guards_refuse_is_not_equal_and_returns_at_once():
    power = matrix("1 & 1", "0 & 1") + "^{1000}"  # past MAX_POWER: never sent to sympy
    assert is_equivalent(power, matrix("1 & 1000", "0 & 1")) is False
    symbolic_power = matrix("1 & 1", "0 & 1") + "^{n}"
    assert is_equivalent(symbolic_power, matrix("1 & n", "0 & 1")) is False
