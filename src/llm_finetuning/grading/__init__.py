"""The math answer grader shared by training rewards and evaluation."""

from .extract import extract_answer, grade, is_equivalent, warm_up

__all__ = ["extract_answer", "grade", "is_equivalent", "warm_up"]
