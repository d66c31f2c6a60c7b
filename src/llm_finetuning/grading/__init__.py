"""The math answer grader shared by training rewards and evaluation: extract, normalise, compare.

    >>> from llm_finetuning.grading import grade
    >>> grade("so the area is 14/4 <SOLUTION>\\\\frac{7}{2}</SOLUTION>", "3.5")
    True

Modules, one job each: ``extract`` (the answer slot and the final answer in it, for completions,
gold answers and the data layer), ``prose`` (the answer a sentence states), ``normalize`` and
``words`` (string rewrites that make equal answers look alike), ``compare`` (structure: lists,
tuples, equations), ``labels`` (which side of an equation only names the quantity), ``relations``
(inequalities as intervals), ``matrices`` (matrix arithmetic), ``expr`` (LaTeX to a safe expression,
exact rational values, size guards), ``numeric`` (floating-point verdicts), ``symbolic`` (sympy in a
killable worker, and the one list of names it may evaluate) and ``judge`` (``grade``,
``is_equivalent``, ``start_worker``, ``warm_up``). The full rule set is in docs/grader.md.
"""

from .extract import extract_answer, gold_answer
from .judge import GRADERS, grade, is_equivalent, start_worker, use_grader, warm_up

__all__ = ["GRADERS", "extract_answer", "gold_answer", "grade", "is_equivalent", "start_worker", "use_grader",
           "warm_up"]
