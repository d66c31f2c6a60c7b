"""Which of a run's steps are left: all of them for a fresh run; for ``--resume``, those ``run_state.json`` does
not record as done (an unfinished phase continues from its newest complete checkpoint, in the phase itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import PipelineConfig
from ..reporting.run_outputs import RunRecorder, RunState

EXPERT_ITERATION = "expert_iteration"  # the phase's name in run_state.json and summary.json


@dataclass
class RunOptions:
    """What the command line says beyond the config."""

    skip_sft: bool = False  # continue from <output_dir>/sft/final (or the base model)
    skip_grpo: bool = False  # stop after SFT
    resume: bool = False  # continue unfinished phases from their newest complete checkpoint
    preflight: bool | None = None  # one worst-case step per phase first; None = on a CUDA GPU only
    verbose: bool = False  # the libraries' own progress bars, log lines and messages, as they come


@dataclass(frozen=True)
class PhasesLeft:
    """What this run still does, decided from the command line and what earlier attempts recorded."""

    config: PipelineConfig
    state: RunState
    resume: bool
    sft: bool  # SFT runs now
    record_sft_skipped: bool  # --skip-sft (not: SFT was done by an earlier attempt, whose figures are kept)
    expert_iteration: bool  # expert iteration runs now
    grpo: bool  # GRPO runs now
    evaluate_after_sft: bool  # the after-SFT evaluation is still to be made (kept from an earlier attempt)
    grpo_finished_earlier: bool  # GRPO is asked for and an earlier attempt finished it

    @classmethod
    def of(cls, config: PipelineConfig, options: RunOptions, recorder: RunRecorder) -> PhasesLeft:
        state, resume = recorder.state, options.resume
        sft_done_earlier = resume and state.is_done("sft")
        sft = not options.skip_sft and not sft_done_earlier
        grpo = not options.skip_grpo and not (resume and state.is_done("grpo"))
        iterate = config.expert_iteration.rounds > 0 and not (resume and state.is_done(EXPERT_ITERATION))
        return cls(config, state, resume, sft, record_sft_skipped=not sft and not sft_done_earlier,
                   expert_iteration=iterate, grpo=grpo,
                   evaluate_after_sft=sft or ((grpo or iterate) and not recorder.has_eval("after_sft")),
                   grpo_finished_earlier=not options.skip_grpo and not grpo)  # fmt: skip

    @property
    def evaluate_in_grpo(self) -> bool:
        """The after-SFT evaluation runs inside GRPO, once its trainer has started the engine it shares (GRPO's
        step 0); with expert iteration between them, before it."""
        return self.evaluate_after_sft and self.grpo and not self.expert_iteration

    @property
    def grpo_steps_earlier(self) -> int:
        return self.state.load().get("grpo", {}).get("steps", 0)

    def start_adapter(self) -> Path:
        """What the phase after SFT starts from: expert iteration's adapter once this run has saved a round of
        it, else SFT's."""
        iterated = self.state.load().get(EXPERT_ITERATION, {}).get("rounds")
        return self.config.expert_iteration_adapter_path if iterated else self.config.sft_adapter_path
