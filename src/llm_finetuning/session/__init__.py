"""A run's decisions and what it works with, made and opened in one place.

plan.py     ``RunPlan``: backend, precision, GRPO's rollouts, the importance-sampling correction, the KL
            reference and the shared-token passes, decided once with their reasons (recorded in summary.json)
session.py  ``Session``: backend and libraries, the plan, the model, every vLLM engine and what evaluation
            generates with, opened in one order by the pipeline and every tool
"""

from .plan import RunPlan, SharedTokens, reference_record, shared_tokens
from .session import Session

__all__ = ["RunPlan", "Session", "SharedTokens", "reference_record", "shared_tokens"]
