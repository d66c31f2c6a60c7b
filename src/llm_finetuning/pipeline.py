"""The whole run as one story: ``run(config, options) -> summary``, the programmatic API behind the CLI.

    >>> from llm_finetuning.config import PipelineConfig
    >>> from llm_finetuning.pipeline import RunOptions, run
    >>> summary = run(PipelineConfig.from_yaml("configs/tiny.yaml"), RunOptions())   # doctest: +SKIP

The steps are numbered in ``run`` and ``Run.steps`` below, in the order they happen. Finished phases are
recorded in ``run_state.json``, so ``--resume`` skips them and continues an unfinished phase from its newest
complete checkpoint (``session/resume.py`` says which steps are left). Nothing here imports trl or transformers
before the backend is chosen: Unsloth, when it is the backend, must be imported first.

Under ``accelerate launch`` (or ``torchrun``) every rank runs this same story on its own device: the process
group is formed first, every step runs on every rank, the main process alone writes files (the others wait
where they need one), and evaluations are shared out and gathered (``evaluation/sharding.py``).

Where each part lives: the evaluations and what they record, ``evaluation/stages.py``; the choice of GRPO's
best weights, ``training/selection.py`` (inside the GRPO phase); the difficulty band, ``training/difficulty.py``;
memory, ``reporting/run_memory.py``; the run's files at its start and end, ``session/run_files.py``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch

from .config import PipelineConfig
from .data import GRPOData, load_grpo_data, load_sft_data
from .errors import TrainingInterrupted
from .evaluation.judge import CompletionJudge
from .evaluation.stages import StageEvaluations
from .grading import use_grader
from .model.hardware import free_memory
from .reporting.run_memory import RunMemory
from .reporting.run_outputs import RunRecorder
from .reporting.trackers import Trackers
from .rewards import build_rewards
from .rollout.server import wait_for_server
from .runtime import distributed
from .runtime.heap import bound_onednn_cache
from .runtime.logging_setup import library_warnings_hidden, setup_logging
from .runtime.run_lock import RunLock
from .session import Session
from .session.checks import check_config
from .session.objects import with_objects
from .session.resume import PhasesLeft, RunOptions
from .session.run_files import check_processes, finish_outputs, start_outputs
from .tasks import start_judges
from .training.arguments import check_trainer_settings
from .training.phase import load_weights, save_weights

__all__ = ["Run", "RunOptions", "run"]

logger = logging.getLogger(__name__)

def run(config: PipelineConfig, options: RunOptions | None = None, *, rewards: list[Any] | None = None,
        sft_dataset: Any = None, grpo_dataset: Any = None) -> dict[str, Any]:  # fmt: skip
    """Run the pipeline; return the summary (also written to ``<output_dir>/summary.json``).

    From Python, ``rewards`` adds reward functions (callables with TRL's signature, weight 1) to the config's, and
    ``sft_dataset`` / ``grpo_dataset`` (``datasets.Dataset``) stand in for the config's datasets, shaped by the
    same rules (their format detected from the columns, or the config's ``format``)."""
    options = options or RunOptions()
    config = check_config(with_objects(config, rewards, sft_dataset, grpo_dataset))  # names its owners know
    started = time.perf_counter()
    # 0. the process group (a multi-process launch); the output folder locked for this run before anything is
    #    written there (a second run is refused)
    launch = distributed.join_process_group()
    output_dir = Path(config.output_dir)
    lock = distributed.run_on_main(lambda: RunLock.take(output_dir))
    try:
        return _run_locked(config, options, output_dir, launch, started, lock)
    finally:
        if lock is not None:
            lock.release()


def _run_locked(config: PipelineConfig, options: RunOptions, output_dir: Path, launch: Any, started: float,
                lock: RunLock | None) -> dict[str, Any]:  # fmt: skip
    # 0'. logging, threads, the grader, the resolved config, a fresh (or resumed) summary; the session imports the
    #     backend before anything pulls in trl/transformers; the trackers
    setup_logging(config.log_level, output_dir, rank=distributed.rank(), verbose=options.verbose)
    if lock is not None:
        lock.say_if_taken_over()
    use_grader(config.grader)  # whose verdict rewards and evaluations use, in this process
    if config.num_threads is not None:  # CPU numerics depend on the thread count: fix it, don't inherit it
        torch.set_num_threads(config.num_threads)
    bound_onednn_cache()  # before the model's first matmul: what oneDNN keeps live stays small
    recorder = distributed.run_on_main(lambda: start_outputs(config, output_dir, sft=not options.skip_sft,
                                                             grpo=not options.skip_grpo, resume=options.resume))
    if not distributed.is_main_process():  # the main process has reset (or kept) the files: read the same state
        recorder = RunRecorder.start(output_dir, resume=options.resume, writes=False)
    session = Session.open(config, main=distributed.is_main_process(),
                           check=lambda backend: check_processes(backend, recorder, launch))  # fmt: skip
    if not options.skip_grpo and session.plan.trl_server:
        distributed.run_on_main(lambda: wait_for_server(config.grpo_training))  # fail now, not when GRPO starts
    trackers = Trackers.start(config, output_dir, writes=distributed.is_main_process())
    story = Run(config, recorder, session, trackers)
    try:
        story.steps(PhasesLeft.of(config, options, recorder), options.preflight)
    except (TrainingInterrupted, KeyboardInterrupt):  # stopped in a phase (a checkpoint saved) or outside one
        finish_outputs(recorder, trackers, time.perf_counter() - started, complete=False)
        raise
    finally:
        story.free()  # the model and any vLLM engine go with the run, not with the process
    summary = finish_outputs(recorder, trackers, time.perf_counter() - started, complete=True)
    if distributed.is_main_process():
        recorder.print_table()
        if hidden := library_warnings_hidden():
            logger.info("(%d warnings of the libraries are in training.log; --verbose shows them here)", hidden)
    return summary


class Run:
    """One run's steps in order, over its session (the plan, the model, every vLLM engine, what evaluation
    generates with), its evaluations and the GRPO data the steps share."""

    def __init__(self, config: PipelineConfig, recorder: RunRecorder, session: Session,
                 trackers: Trackers | None = None) -> None:  # fmt: skip
        self.config, self.recorder, self.session = config, recorder, session
        self.reward_funcs, self.reward_weights = build_rewards(config.rewards, config.prompt)
        self.judge = CompletionJudge(config.prompt, self.reward_funcs, self.reward_weights)  # every verdict of the run
        check_trainer_settings(config, session.plan)  # before minutes of loading, not after SFT
        self.memory = RunMemory(recorder, config.heap_trim_interval)  # each part's peak, engines included
        self.evaluations = StageEvaluations(config, session, self.judge, recorder, trackers or Trackers({}),
                                            self.memory)  # fmt: skip
        self.grpo_data: GRPOData | None = None
        self._sft_data: Any = None

    def steps(self, left: PhasesLeft, preflight: bool | None) -> None:
        import transformers  # after the backend (pipeline.run imported Unsloth first when it is the backend)

        transformers.set_seed(self.config.seed)
        with self.memory.part("load"):
            self.load_model()  # 1. the model (a builtin demo model is built first)
        with distributed.main_process_first():  # 2. GRPO data, with the held-out problems every evaluation scores
            self.grpo_data = load_grpo_data(self.config, self.session.manager.tokenizer)  # (also for --skip-grpo)
        self.evaluations.prepare(self.grpo_data.validation, self.grpo_data.max_completion_length)
        if self.session.plan.cuda if preflight is None else preflight:  # 2'. one worst-case step per phase: an
            self.preflight(left)  # OOM now, not hours in
        if left.sft:
            if self.config.evaluation.eval_before_sft:
                self.evaluations.evaluate("before_sft", -1)  # 3. the untouched model
            with self.memory.part("sft"):
                self.train_sft(left.resume)  # 4. SFT, save sft/final, free the trainer's memory
        else:
            self.load_weights(left.start_adapter(), missing="GRPO starts from the base model")  # 4'. sft/final
            if left.record_sft_skipped:
                self.recorder.record_skipped("sft")
        if left.evaluate_after_sft and not left.evaluate_in_grpo:
            self.evaluations.evaluate("after_sft", 0)  # 5. after SFT (in GRPO: once its engine has started)
        if left.expert_iteration:
            with self.memory.part("expert_iteration"):
                self.train_expert_iteration()  # 5'. expert iteration, its adapter saved after every round
        if self.config.expert_iteration.rounds > 0 and not self.recorder.has_eval("after_expert_iteration"):
            self.evaluations.evaluate("after_expert_iteration", 0)  # (also when it was done before a stop)
        if left.grpo:
            with self.memory.part("grpo"):
                steps = self.train_grpo(left)  # 6. GRPO (after SFT = its step 0), save the adapter
            self.evaluations.evaluate("after_grpo", steps)  # 7. the trained model
        elif left.grpo_finished_earlier and not self.recorder.has_eval("after_grpo"):  # 6'. stopped before it
            self.load_weights(self.config.grpo_adapter_path)
            self.evaluations.evaluate("after_grpo", left.grpo_steps_earlier)

    def load_model(self) -> None:
        plan = self.session.load().plan  # with what depends on the model: the shared-token passes
        for line in plan.described():
            logger.info(line)
        self.recorder.set(**plan.record(), chat_template=self.session.manager.template.record())
        if self.session.deepspeed_config is not None:  # did ZeRO-3 partition the weights as they loaded?
            partitioned = distributed.is_partitioned(self.session.manager.model)
            self.recorder.summary["processes"]["weights_partitioned"] = partitioned

    def load_weights(self, adapter: Path, missing: str | None = None) -> None:
        """An adapter saved earlier into the model (every rank; under ZeRO-3 into its gathered weights)."""
        if missing is not None and not adapter.is_dir():
            logger.warning("no adapter at %s: %s", adapter, missing)
            return
        load_weights(self.session.manager, adapter)

    def sft_data(self) -> Any:
        """The SFT dataset, loaded once (the preflight and SFT share it); the main process builds any cache first."""
        if self._sft_data is None:
            with distributed.main_process_first():
                self._sft_data = load_sft_data(self.config, self.session.manager.tokenizer)
        return self._sft_data

    def preflight(self, left: PhasesLeft) -> None:
        from .training.preflight import run_preflight

        run_preflight(self.config, self.session.plan, self.session.manager, self.session.engines,
                      self.sft_data() if left.sft else None, self.grpo_data if left.grpo else None, self.reward_funcs,
                      self.reward_weights)  # fmt: skip

    def train_sft(self, resume: bool) -> None:
        from .training.sft import SFTPhase

        if self.config.sft_training.init_adapter:  # more SFT on trained weights (a resume's checkpoint overrides them)
            self.load_weights(Path(self.config.sft_training.init_adapter))
        phase = SFTPhase(self.config, self.session.plan, self.session.manager, self.sft_data(), self.recorder.metrics)
        self.finish_phase("sft", phase.run(resume=resume, run_id=self.recorder.run_id), self.config.sft_adapter_path)
        del phase  # hand memory over to GRPO: the trainer, optimizer and data go now
        self._sft_data = None
        free_memory()

    def train_expert_iteration(self) -> None:
        """Expert iteration on GRPO's training problems (``training/expert_iteration.py``), recorded as a phase."""
        from .training.expert_iteration import PHASE, ExpertIteration

        engine = self.session.engine or self.session.open_engine(trains=True)[0]  # none yet when evaluation is off
        phase = ExpertIteration(self.config, self.session.plan, self.session.manager, engine, self.grpo_data.train,
                                self.judge, self.grpo_data.max_completion_length, self.recorder.metrics,
                                lambda path: save_weights(self.session.manager, path))  # fmt: skip
        result = phase.run(self.recorder.state, release_engine=self.session.engines.release_own)
        self.recorder.record_phase(PHASE, result)
        self.recorder.state.mark_done(PHASE, **result.settings, steps=result.steps)  # last, as for the others

    def train_grpo(self, left: PhasesLeft) -> int:
        """GRPO, with its evaluations (``left.evaluate_in_grpo``: the after-SFT one between the trainer's build and
        its first step, on the engine the trainer started: the run starts one engine, not two)."""
        from .training.difficulty import narrow_to_band
        from .training.grpo import GRPOPhase

        # the workers that judge GRPO's problems (reasoning-gym's verifier imports for seconds) start while the
        # trainer starts its engine, mostly one thread's work, not beside SFT's or the evaluation's two
        start_judges(self.grpo_data.train)
        if self.config.grpo_training.difficulty_band is not None:
            narrow_to_band(self.config, self.grpo_data, self.judge, self.session, self.recorder)
        phase = GRPOPhase(self.config, self.session.plan, self.session.manager, self.session.engines, self.grpo_data,
                          self.reward_funcs, self.reward_weights, self.recorder.metrics, judge=self.judge,
                          evaluations=self.evaluations, start_adapter=left.start_adapter(),
                          evaluate_first=left.evaluate_in_grpo,
                          sft_rows=self.sft_data() if self.config.grpo_training.sft_anchor > 0 else None)  # fmt: skip
        result = phase.run(resume=left.resume, run_id=self.recorder.run_id)
        self.recorder.set(save_path=str(self.config.grpo_adapter_path))
        self.finish_phase("grpo", result, self.config.grpo_adapter_path)
        return result.steps

    def finish_phase(self, name: str, result: Any, save: Path) -> None:
        save_weights(self.session.manager, save)
        self.recorder.record_phase(name, result)
        self.recorder.state.mark_done(name, steps=result.steps)  # last: "done" means the summary has it all

    def free(self) -> None:
        """Stop watching the memory; end the run's vLLM engines, then drop the model (``Session.free``)."""
        self.memory.stop()
        self.session.free()
