"""GRPO on problems the model sometimes solves: training problems kept by their pass rate with the starting policy.

A group teaches through the differences between its completions. On a problem the policy never solves, or always
solves, every completion is equally right, the correctness part of the advantages is zero, and what is left is the
shaping rewards' noise. Scoring each training problem's pass rate first (``grpo_training.difficulty_samples``
samples at GRPO's own sampling settings, on the first ``difficulty_pool`` training problems) and keeping those whose
rate lies in ``grpo_training.difficulty_band`` puts GRPO's steps where the expected improvement is (its lower bound
grows with the variance of the per-prompt success, p (1 - p)). The kept problems are written to
``<output_dir>/grpo/difficulty.json``, which a resumed run reads instead of sampling again, and recorded in
``summary.json`` with how the pass rates fell.
"""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..errors import DataError
from ..runtime.atomic_io import write_json_atomic
from ..runtime.distributed import full_weights

__all__ = ["keep_within_band", "narrow_to_band"]

logger = logging.getLogger(__name__)

FILE = "difficulty.json"
_EDGES = (0.0, 0.25, 0.5, 0.75, 1.0)


def narrow_to_band(config: PipelineConfig, grpo_data: Any, judge: Any, session: Any, recorder: Any) -> None:
    """The run's GRPO training problems (``grpo_data.train``) cut to those the starting policy sometimes solves,
    scored on the session's evaluation engine; the record goes to ``summary.json`` (``grpo_problems``)."""
    from ..evaluation.evaluator import Evaluator
    from ..rollout.engines import HFEngine

    def scorer(problems: Any, samples: int) -> Evaluator:
        return Evaluator.from_config(config, problems, judge, grpo_data.max_completion_length, limit=len(problems),
                                     sampled_k=samples, rollouts=True)  # fmt: skip

    manager = session.manager
    with full_weights(manager.model) as model:
        engine = session.engine if not isinstance(session.engine, HFEngine) else HFEngine(manager, model=model)
        grpo_data.train, record = keep_within_band(config, grpo_data.train, scorer, engine,
                                                   Path(config.output_dir) / "grpo", recorder.run_id)  # fmt: skip
    recorder.set(grpo_problems=record)
    session.engines.release_own()


def keep_within_band(config: PipelineConfig, train: Any, evaluator_for: Any, engine: Any, folder: Path,
                     run_id: str | None) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    """``train`` cut to the problems whose pass rate is within the band, and the record of how.
    ``evaluator_for(problems, samples)`` builds the scorer; ``engine`` generates (the run's evaluation engine)."""
    section = config.grpo_training
    low, high = section.difficulty_band
    saved = _read(folder / FILE, run_id, section.difficulty_band)
    if saved is None:
        pool = train.select(range(min(section.difficulty_pool, len(train))))
        logger.info("GRPO problems by pass rate: scoring %d training problems, %d samples each (difficulty_band)",
                    len(pool), section.difficulty_samples)  # fmt: skip
        rows = evaluator_for(pool, section.difficulty_samples).score(engine, "pass rates", sampled=True)
        rates = [sum(row["correct"]) / len(row["correct"]) for row in rows]
        kept = [index for index, rate in enumerate(rates) if low <= rate <= high]
        saved = {"run_id": run_id, "band": [low, high], "scored": len(rates), "kept": kept,
                 "pass_rates": _histogram(rates), "mean_pass_rate": round(sum(rates) / max(len(rates), 1), 4)}
        write_json_atomic(folder / FILE, saved)  # the main process's; every rank computed the same
    if not saved["kept"]:
        raise DataError(
            f"grpo_training.difficulty_band: no training problem has a pass rate in [{low}, {high}] (of "
            f"{saved['scored']} scored: {saved['pass_rates']}); widen the band or train SFT longer"
        )
    logger.info("GRPO problems by pass rate: kept %d of %d in [%s, %s] (mean pass rate %.3f; %s)",
                len(saved["kept"]), saved["scored"], low, high, saved["mean_pass_rate"],
                ", ".join(f"{k}: {v}" for k, v in saved["pass_rates"].items()))  # fmt: skip
    record = {key: saved[key] for key in ("band", "scored", "pass_rates", "mean_pass_rate")}
    return train.select(saved["kept"]), {**record, "kept": len(saved["kept"])}


def _read(path: Path, run_id: str | None, band: list[float]) -> dict[str, Any] | None:
    """The kept problems of this run and band, when an earlier attempt of it scored them."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return saved if saved.get("run_id") == run_id and saved.get("band") == list(band) else None


def _histogram(rates: list[float]) -> dict[str, int]:
    """How many problems had a pass rate of exactly 0, in each quarter between, and exactly 1."""
    counts = {"0": sum(rate == 0 for rate in rates)}
    for lower, upper in itertools.pairwise(_EDGES):
        counts[f"{lower}-{upper}"] = sum(lower < rate <= upper and rate < 1 for rate in rates)
    counts["1"] = sum(rate == 1 for rate in rates)
    return counts
