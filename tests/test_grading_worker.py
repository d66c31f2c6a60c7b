"""No verdict depends on timing: a cold process judges as a warm one; the sympy worker starts when a
grader is built, in the background, or when a comparison first needs it; the one sympy name safelist.

The cold runs are fresh Python processes, so nothing this test process has warmed up can help them.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llm_finetuning.grading import expr, is_equivalent, numeric, symbolic, warm_up

TINY_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "tiny.yaml"

# Comparisons past exact rational arithmetic: settled by the floating-point verdict ...
NUMERIC = [
    ("(x+1)^2", "x^2+2x+1", True),
    (r"\sqrt{8}", r"2\sqrt{2}", True),
    (r"1 - 2\sin^2 x", r"\cos 2x", True),
    (r"\frac{\sqrt{6}+\sqrt{2}}{4}", r"\cos\frac{\pi}{12}", True),
    ("2x+2y=10", "x+y=5", True),
    ("1.4142135623731", r"\sqrt{2}", False),
    (r"\pi + 10^{-20}", r"\pi", False),
    (r"\sin x \cos x", r"\sin 2x", False),
]
# ... and those only sympy settles (trigonometry of values double precision cannot resolve).
SYMPY_ONLY = [
    (r"\sin^2(10^{-9}) + \cos^2(10^{-9})", "1", True),
    (r"\tan(10^{-9})", r"\frac{\sin(10^{-9})}{\cos(10^{-9})}", True),
    (r"\sin(10^{-9})", "10^{-9}", False),
]


def run_cold(code: str, stdin: str = "") -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], input=stdin, capture_output=True, text=True, timeout=300, check=True
    )
    return result.stdout.strip()


def test_the_sympy_only_cases_do_need_sympy():
    for pred, gold, _ in SYMPY_ONLY:
        assert numeric.verdict(expr.to_python(pred), expr.to_python(gold)) is None


def test_a_cold_process_returns_the_warm_verdicts():
    cases = NUMERIC + SYMPY_ONLY
    code = (
        "import json, sys\n"
        "from llm_finetuning.grading import is_equivalent\n"
        "print(json.dumps([is_equivalent(p, g) for p, g, _ in json.load(sys.stdin)]))"
    )
    cold = json.loads(run_cold(code, json.dumps(cases)))
    warm_up()
    warm = [is_equivalent(pred, gold) for pred, gold, _ in cases]
    assert cold == warm == [expected for _, _, expected in cases]


def test_comparisons_settled_without_sympy_start_no_worker_process():
    code = (
        "import json, sys\n"
        "from llm_finetuning.grading import is_equivalent, symbolic\n"
        "verdicts = [is_equivalent(p, g) for p, g, _ in json.load(sys.stdin)]\n"
        "print(json.dumps([verdicts, symbolic.started()]))"
    )
    verdicts, started = json.loads(run_cold(code, json.dumps(NUMERIC)))
    assert verdicts == [expected for _, _, expected in NUMERIC] and started is False


def test_start_worker_returns_before_the_worker_is_ready_and_the_first_comparison_waits_for_it():
    code = (
        "from llm_finetuning.grading import start_worker, symbolic, is_equivalent\n"
        "start_worker()\n"
        "print(symbolic.started(), symbolic._WORKER.ready())\n"
        "print(is_equivalent(r'\\sin^2(10^{-9}) + \\cos^2(10^{-9})', '1'), symbolic._WORKER.ready())"
    )
    assert run_cold(code).splitlines() == ["True False", "True True"]


@pytest.mark.parametrize(
    ("call", "started"),
    [
        ("build_rewards([{'name': 'accuracy'}])", True),
        ("build_rewards([{'name': 'match_format_exactly'}, {'name': 'r1_zero'}])", True),
        ("build_rewards([{'name': 'match_format_exactly'}, {'name': 'check_numbers'}])", False),
        ("validate_reward_specs([{'name': 'accuracy'}])", False),
    ],
)
def test_build_rewards_starts_the_worker_when_a_reward_grades(call, started):
    code = (
        "from llm_finetuning.rewards import build_rewards, validate_reward_specs\n"
        "from llm_finetuning.grading import symbolic\n"
        f"{call}\n"
        "print(symbolic.started())"
    )
    assert run_cold(code) == str(started)


def test_the_evaluators_scoring_starts_the_worker_before_it_generates(tiny_base):
    code = (
        "from types import SimpleNamespace\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "from llm_finetuning.config import PromptConfig\n"
        "from llm_finetuning.evaluation.evaluator import Evaluator\n"
        "from llm_finetuning.evaluation.judge import CompletionJudge\n"
        "from llm_finetuning.grading import symbolic\n"
        "from llm_finetuning.model.template import apply_chat_template_to\n"
        "from llm_finetuning.rollout import SamplingSettings\n"
        "from llm_finetuning.rollout.engines import HFEngine\n"
        f"base = {str(tiny_base)!r}\n"
        "tokenizer = apply_chat_template_to(AutoTokenizer.from_pretrained(base), PromptConfig())\n"
        "engine = HFEngine(SimpleNamespace(model=AutoModelForCausalLM.from_pretrained(base), tokenizer=tokenizer))\n"
        "seen, generate = [], engine.generate\n"
        "engine.generate = lambda *args, **kwargs: seen.append(symbolic.started()) or generate(*args, **kwargs)\n"
        "problems = [{'prompt': [{'role': 'user', 'content': 'What is 1 + 4?'}], 'answer': '5'}]\n"
        "greedy = SamplingSettings(greedy=True, max_new_tokens=4)\n"
        "evaluator = Evaluator(problems, CompletionJudge(PromptConfig()), greedy)\n"
        "before = symbolic.started()\n"
        "evaluator.score(engine, 'check')\n"
        "print(before, seen)"
    )
    # graded problems: the grader's worker is started as the generation begins, not at the first verdict
    assert run_cold(code).splitlines()[-1] == "False [True]"


def test_there_is_one_sympy_name_safelist_and_every_name_in_it_can_be_evaluated():
    assert expr.EMITTED_NAMES == symbolic.SAFE_NAMES
    # Matrix arithmetic goes to the worker only; every other name also has a floating-point value.
    assert symbolic.SAFE_NAMES - {"oo", expr.MATRIX} <= set(numeric.FUNCTIONS) | set(numeric.CONSTANTS)
    assert symbolic._parse("sqrt(v_x)+asec(2)") is not None
    with pytest.raises(ValueError, match="outside the expression vocabulary"):
        symbolic._parse("__import__('os')")


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="reads the worker's limits from /proc")
def test_the_worker_runs_under_its_memory_limit_and_still_compares():
    symbolic.start(wait=True)
    limits = Path(f"/proc/{symbolic._WORKER.pid}/limits").read_text().splitlines()
    address_space = next(line for line in limits if line.startswith("Max address space"))
    soft, hard = address_space.split()[3:5]
    assert soft == hard and int(soft) > symbolic.MEMORY_HEADROOM_BYTES  # sympy's import plus the headroom
    assert symbolic.equal("sin(v_x)**2 + cos(v_x)**2", "1", timeout=10.0) is True
