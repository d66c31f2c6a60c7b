"""Every grader rule that strips a label, a side of an equation, a unit or a wrapper, pinned by a
near-miss negative: stripping must never make two different statements equal (docs/grader.md,
"Rules that strip, and why they cannot make different statements equal"). Each negative comes with a
positive twin, so a rule cannot pass by refusing everything."""

import pytest

from llm_finetuning.grading import grade, is_equivalent

LONG_MATRIX = (  # longer than a worked solution's threshold, but math alone
    "\\begin{pmatrix} \\frac{1}{3} & -\\frac{2}{5} & \\frac{4}{7} \\\\ \\frac{8}{9} & -\\frac{10}{11} & \\frac{12}{13}"
    " \\\\ \\frac{14}{15} & \\frac{16}{17} & -\\frac{19}{20} \\end{pmatrix}"
)

# (rule, answer, gold, expected)
ANSWERS = [
    ("leading variable", "x = 2y", "2", False),
    ("leading variable", "y = 2x - 1", "2x - 1", True),
    ("constant side", "5 = 3c + d", "3c + d", False),
    ("constant side", "3c + d", "5 = 3c + d", False),
    ("constant side", "3c + d = 5", "5 = 3c + d", True),
    ("constant side", "y = 4^2 = 16", "16", True),
    ("constant side", "t = 4 = 5", "5", False),
    ("gold label", "11", "a + 2b = 11", False),
    ("gold label", "11", "BC = 11", True),
    ("gold label", "4:9", "3a : b = 4 : 9", False),
    ("gold label", "\\frac{2}{7}", "\\frac{CF}{FD} = \\frac{2}{7}", True),
    ("answer label", "2a + b = 11", "11", False),
    ("answer label", "a + b = 11", "11", True),
    ("two labels", "PQ = 6", "QR = 6", False),
    ("two labels", "QR = 6", "QR = 6.0", True),
    ("two labels", "\\frac{FD}{CF} = \\frac{2}{7}", "\\frac{CF}{FD} = \\frac{2}{7}", False),
    ("word labels", "\\text{base } 9, \\text{ height } 4", "\\text{base } 4, \\text{ height } 9", False),
    ("word labels", "height 4, base 9", "base 9, height 4", True),
    ("units", "7 \\text{ mm}", "7 \\text{ cm}", False),
    ("units", "7 \\text{ cm}", "7", True),
    ("units", "7 \\text{ centimeters}", "7 \\text{ cm}", True),
    ("degrees and percent", "30^\\circ", "\\frac{\\pi}{6}", False),
    ("degrees and percent", "40\\%", "0.4", False),
    ("degrees and percent", "40\\%", "40", True),
    ("spacing", "4\\,6", "46", False),
    ("spacing", "4\\,600", "4600", True),
    ("approx", "\\approx 2.72", "e", False),
    ("approx", "e \\approx 2.72", "e", True),
    ("choice", "\\textbf{(B)}\\ 17", "18", False),
    ("choice", "\\textbf{(B)}\\ 17", "B", True),
    ("restriction", "x - 1, x = 1", "x - 1", False),
    ("restriction", "x - 1, \\ x \\neq 1", "x - 1", True),
    ("set builder", "\\{t \\mid t < 2\\}", "(-\\infty, 2]", False),
    ("set builder", "\\{t \\mid t < 2\\}", "(-\\infty, 2)", True),
    ("congruence", "3^{20} \\equiv 4 \\pmod{5}", "1", False),
    ("congruence", "3^{20} \\equiv 1 \\pmod{5}", "1", True),
    ("base", "1101_3", "1101_2", False),
    ("base", "1101", "1101_2", True),
    ("one-element set", "\\{3, 4\\}", "3", False),
    ("one-element set", "\\{3\\}", "3", True),
    ("function value", "g(x) \\le 5", "x \\le 5", False),
    ("function value", "g(x) \\le 5", "(-\\infty, 5]", True),
    ("wrapper", "\\text{5 or 6}", "5", False),
    ("wrapper", "\\text{5}", "5", True),
    ("math cut out", "3", "3$ or $5", False),
    ("math cut out", "5, 3", "3$ or $5", True),
    ("labelled solutions", "(2, 1), (4, 3)", "a=1, b=2; a=3, b=4", False),
    ("labelled solutions", "(1, 2), (3, 4)", "a=1, b=2; a=3, b=4", True),
]

# (rule, completion, gold, expected)
COMPLETIONS = [
    ("leaked turn", "\\boxed{8}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n\\boxed{9}", "9", False),
    ("leaked turn", "\\boxed{8}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n\\boxed{9}", "8", True),
    ("named quantity", "<SOLUTION>Final Answer: The least $m$ is at least 8.</SOLUTION>", "8", False),
    ("named quantity", "<SOLUTION>Final Answer: The least $m$ is 8.</SOLUTION>", "8", True),
    ("qualifier", "<SOLUTION>The minimum is $4$, attained at $x = 2$.</SOLUTION>", "2", False),
    ("qualifier", "<SOLUTION>The minimum is $4$, attained at $x = 2$.</SOLUTION>", "4", True),
    ("conclusion", "<SOLUTION>There are 4 red and 6 blue marbles, so 10 in all.</SOLUTION>", "4", False),
    ("conclusion", "<SOLUTION>There are 4 red and 6 blue marbles, so 10 in all.</SOLUTION>", "10", True),
    ("lead-in", "<SOLUTION>Total: 56 or 57</SOLUTION>", "56", False),
    ("lead-in", "<SOLUTION>Total: 56</SOLUTION>", "56", True),
    ("worked solution", "<SOLUTION>\\boxed{20}</SOLUTION>", LONG_MATRIX, False),
    ("worked solution", f"<SOLUTION>{LONG_MATRIX}</SOLUTION>", LONG_MATRIX, True),
    ("boxes before the last", "<SOLUTION>\\boxed{3}, \\boxed{4}</SOLUTION>", "3", False),
    ("boxes before the last", "<SOLUTION>\\boxed{3}, \\boxed{4}</SOLUTION>", "4", True),
]  # fmt: skip


@pytest.mark.parametrize(("rule", "answer", "gold", "expected"), ANSWERS)
def test_a_stripping_rule_never_makes_different_answers_equal(rule, answer, gold, expected):
    assert is_equivalent(answer, gold) is expected, rule


@pytest.mark.parametrize(("rule", "completion", "gold", "expected"), COMPLETIONS)
def test_reading_the_answer_out_of_prose_never_takes_another_value(rule, completion, gold, expected):
    assert grade(completion, gold) is expected, rule


def test_every_stripping_rule_has_a_negative_and_a_positive():
    for table in (ANSWERS, COMPLETIONS):
        rules = {row[0] for row in table}
        for rule in rules:
            verdicts = {row[-1] for row in table if row[0] == rule}
            assert verdicts == {True, False}, rule
