"""A sandbox service for tests/test_sandbox.py: it evaluates the Python expression it is sent, as a task
verifier that ``eval``\\ s an answer does."""

from llm_finetuning.sandbox import Service


def _evaluate(expression: str) -> str:
    return repr(eval(expression))  # the point: what a hostile answer would reach


SERVICE = Service(handle=_evaluate, headroom_bytes=256 << 20)
