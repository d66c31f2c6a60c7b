"""GRPO's rollouts: what generates them and what that implies for the loss.

kinds.py       one ``RolloutKind`` per way of generating (model.generate, Unsloth's engine, TRL's colocated
               engine, a TRL server), with what each implies as attributes; the backend chooses, the plan holds
importance.py  whether GRPO corrects for the engine's probabilities (TRL's importance-sampling correction), and
               what log-probs the engine reports: one rule, every backend

The engines' life (start, weights, sleep, teardown) is ``vllm_engine/``'s; the correction's patches of TRL are
``training/importance.py``'s.
"""

from .importance import ImportanceSampling, importance_sampling
from .kinds import ROLLOUTS, RolloutKind

__all__ = ["ROLLOUTS", "ImportanceSampling", "RolloutKind", "importance_sampling"]
