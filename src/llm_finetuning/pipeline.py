"""The whole run as one story: ``run(config, options) -> summary``, the programmatic API behind the CLI.

    >>> from llm_finetuning.config import PipelineConfig
    >>> from llm_finetuning.pipeline import RunOptions, run
    >>> summary = run(PipelineConfig.from_yaml("configs/tiny.yaml"), RunOptions())   # doctest: +SKIP

The steps are numbered in ``run`` and ``Run.steps`` below, in the order they happen. Finished phases are
recorded in ``run_state.json``, so ``--resume`` skips them and continues an unfinished phase from its newest
complete checkpoint. Nothing here imports trl or transformers before the backend is chosen: Unsloth, when it
is the backend, must be imported first.

Under ``accelerate launch`` (or ``torchrun``) every rank runs this same story on its own device: the process
group is formed first, every step runs on every rank, the main process alone writes files (the others wait
where they need one), and evaluations are shared out and gathered (``evaluation/sharding.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .config import PipelineConfig, RewardSpec
from .data import GRPOData, load_grpo_data, load_sft_data
from .errors import TrainingInterrupted
from .evaluation.evaluator import Evaluator, difficulty_scalars
from .evaluation.judge import CompletionJudge
from .grading import use_grader
from .model import ModelManager
from .model.card import CARD_FILE, model_card
from .model.hardware import free_memory
from .reporting.run_outputs import RunRecorder
from .reporting.trackers import Trackers
from .rewards import build_rewards
from .rollout import EngineOwner
from .rollout.engines import HFEngine
from .rollout.server import wait_for_server
from .runtime.atomic_io import write_text_atomic
from .runtime.distributed import (
    barrier,
    full_weights,
    is_main_process,
    is_partitioned,
    join_process_group,
    main_process_first,
    rank,
    run_on_main,
)
from .runtime.heap import HeapTrimmer, bound_onednn_cache, onednn_cache_capacity
from .runtime.logging_setup import library_warnings_hidden, setup_logging
from .runtime.peak_memory import PeakMemory
from .runtime.run_lock import RunLock
from .session import RunPlan, Session
from .session.checks import check_config
from .session.run_files import check_processes, finish_outputs, start_outputs
from .tasks import start_judges
from .training.arguments import check_trainer_settings
from .training.selection import GRPOWatch

logger = logging.getLogger(__name__)


@dataclass
class RunOptions:
    """What the command line says beyond the config."""

    skip_sft: bool = False  # continue from <output_dir>/sft/final (or the base model)
    skip_grpo: bool = False  # stop after SFT
    resume: bool = False  # continue unfinished phases from their newest complete checkpoint
    preflight: bool | None = None  # one worst-case step per phase first; None = on a CUDA GPU only
    verbose: bool = False  # the libraries' own progress bars, log lines and messages, as they come


def run(config: PipelineConfig, options: RunOptions | None = None, *, rewards: list[Any] | None = None,
        sft_dataset: Any = None, grpo_dataset: Any = None) -> dict[str, Any]:  # fmt: skip
    """Run the pipeline; return the summary (also written to ``<output_dir>/summary.json``).

    From Python, ``rewards`` adds reward functions (callables with TRL's signature, weight 1) to the config's, and
    ``sft_dataset`` / ``grpo_dataset`` (``datasets.Dataset``) stand in for the config's datasets, shaped by the
    same rules (their format detected from the columns, or the config's ``format``)."""
    options = options or RunOptions()
    config = check_config(_with_objects(config, rewards, sft_dataset, grpo_dataset))  # names its owners know
    started = time.perf_counter()
    # 0. the process group (a multi-process launch); the output folder locked for this run before anything is
    #    written there (a second run is refused); logging, threads, the resolved config, a fresh (or resumed)
    #    summary; the backend is imported before anything pulls in trl/transformers
    launch = join_process_group()
    output_dir = Path(config.output_dir)
    lock = run_on_main(lambda: RunLock.take(output_dir))
    try:
        return _run_locked(config, options, output_dir, launch, started, lock)
    finally:
        if lock is not None:
            lock.release()


def _run_locked(config: PipelineConfig, options: RunOptions, output_dir: Path, launch: Any, started: float,
                lock: RunLock | None) -> dict[str, Any]:  # fmt: skip
    setup_logging(config.log_level, output_dir, rank=rank(), verbose=options.verbose)
    if lock is not None:
        lock.say_if_taken_over()
    use_grader(config.grader)  # whose verdict rewards and evaluations use, in this process
    if config.num_threads is not None:  # CPU numerics depend on the thread count: fix it, don't inherit it
        torch.set_num_threads(config.num_threads)
    bound_onednn_cache()  # before the model's first matmul: what oneDNN keeps live stays small
    recorder = run_on_main(lambda: start_outputs(config, output_dir, sft=not options.skip_sft,
                                                 grpo=not options.skip_grpo, resume=options.resume))
    if not is_main_process():  # the main process has reset (or kept) the files: read the same state
        recorder = RunRecorder.start(output_dir, resume=options.resume, writes=False)
    session = Session.open(config, main=is_main_process(),
                           check=lambda backend: check_processes(backend, recorder, launch))  # fmt: skip
    if not options.skip_grpo and session.plan.trl_server:
        run_on_main(lambda: wait_for_server(config.grpo_training))  # fail now, not when GRPO starts
    trackers = Trackers.start(config, output_dir, writes=is_main_process())
    story = Run(config, recorder, session, trackers)
    try:
        story.steps(options)
    except (TrainingInterrupted, KeyboardInterrupt):  # stopped in a phase (a checkpoint saved) or outside one
        finish_outputs(recorder, trackers, time.perf_counter() - started, complete=False)
        raise
    finally:
        story.free()  # the model and any vLLM engine go with the run, not with the process
    summary = finish_outputs(recorder, trackers, time.perf_counter() - started, complete=True)
    if is_main_process():
        recorder.print_table()
        if hidden := library_warnings_hidden():
            logger.info("(%d warnings of the libraries are in training.log; --verbose shows them here)", hidden)
    return summary


def _with_objects(config: PipelineConfig, rewards: list[Any] | None, sft: Any, grpo: Any) -> PipelineConfig:
    """The config with Python objects in it: in-memory datasets by name (``data.loader.in_memory``), callables among
    the rewards."""
    from .data.loader import in_memory

    data = config.data
    for key, dataset in (("sft", sft), ("grpo", grpo)):
        if dataset is not None:
            spec = getattr(data, key)
            generated = spec.format in ("synthetic", "reasoning_gym")  # the config's generator: not these rows
            named = dataclasses.replace(spec, name=in_memory(key, dataset), format="auto" if generated else spec.format)
            data = dataclasses.replace(data, **{key: named})
    reward_config = config.rewards
    if rewards:
        extra = [RewardSpec(name=reward) for reward in rewards]  # a callable name: rewards/plugin.py
        reward_config = dataclasses.replace(reward_config, rewards=[*reward_config.rewards, *extra])
    return config.replace(data=data, rewards=reward_config)


class Run:
    """One run's steps in order, over its session (the plan, the model, every vLLM engine, what evaluation
    generates with) and the GRPO data and evaluators the steps share."""

    def __init__(self, config: PipelineConfig, recorder: RunRecorder, session: Session,
                 trackers: Trackers | None = None) -> None:  # fmt: skip
        self.config, self.recorder, self.session = config, recorder, session
        self.trackers = trackers or Trackers({})
        self.reward_funcs, self.reward_weights = build_rewards(config.rewards, config.prompt)
        self.judge = CompletionJudge(config.prompt, self.reward_funcs, self.reward_weights)  # every verdict of the run
        check_trainer_settings(config, session.plan)  # before minutes of loading, not after SFT
        self.grpo_data: GRPOData | None = None
        self.evaluator: Evaluator | None = None
        self._sft_data: Any = None
        self.selector: Evaluator | None = None  # evaluation.selection_samples: what the evaluations in GRPO score
        self.watch = GRPOWatch()  # what the evaluations during GRPO decide (start_grpo_watch makes the run's)
        self.memory = PeakMemory.start()  # each part's peak resident memory, engines and workers included
        self.trimmer = HeapTrimmer.start(config.heap_trim_interval)  # free heap pages back to the system

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        """A part of the run whose peak memory summary.json records (``memory``), as soon as it ends."""
        with self.memory.part(name):
            yield
        trimmed = self.trimmer.interval if self.trimmer.running else None
        self.recorder.set(memory={**self.memory.record(), "heap_trimmed_every_s": trimmed,
                                  "onednn_primitive_cache": onednn_cache_capacity()})  # fmt: skip

    def steps(self, options: RunOptions) -> None:
        import transformers  # after the backend (pipeline.run imported Unsloth first when it is the backend)

        from .training.expert_iteration import PHASE as ITERATION

        transformers.set_seed(self.config.seed)
        state = self.recorder.state
        sft_done_earlier = options.resume and state.is_done("sft")
        sft_now = not options.skip_sft and not sft_done_earlier
        grpo_now = not options.skip_grpo and not (options.resume and state.is_done("grpo"))
        iterate_now = self.config.expert_iteration.rounds > 0 and not (options.resume and state.is_done(ITERATION))
        with self.part("load"):
            self.load_model()  # 1. the model (a builtin demo model is built first)
        self.prepare_grpo_data()  # 2. GRPO data and the held-out problems every evaluation uses
        if self.plan.cuda if options.preflight is None else options.preflight:
            self.preflight(sft_now, grpo_now)  # 2'. one worst-case step per phase: an OOM now, not hours in
        if sft_now:
            if self.config.evaluation.eval_before_sft:
                self.evaluate("before_sft", -1)  # 3. the untouched model
            with self.part("sft"):
                self.train_sft(options.resume)  # 4. SFT, save sft/final, free the trainer's memory
        else:
            self.continue_from_sft(record_skip=not sft_done_earlier)  # 4'. sft/final (or the base model)
        after_sft = sft_now or ((grpo_now or iterate_now) and not self.recorder.has_eval("after_sft"))  # kept on resume
        if after_sft and (iterate_now or not grpo_now):
            self.evaluate("after_sft", 0)  # 5. after SFT
        if iterate_now:
            with self.part(ITERATION):
                self.train_expert_iteration()  # 5''. expert iteration, its adapter saved after every round
            after_sft = False  # GRPO starts from this evaluation's weights
        if self.config.expert_iteration.rounds > 0 and not self.recorder.has_eval("after_expert_iteration"):
            self.evaluate("after_expert_iteration", 0)  # (also when it was done before a stop)
        if grpo_now:
            with self.part("grpo"):  # 5'. after SFT = GRPO step 0, once GRPO's trainer has started its engine
                steps = self.train_grpo(options.resume, evaluate_first=after_sft)  # 6. GRPO, save the adapter
            self.evaluate("after_grpo", steps)  # 7. the trained model
        elif not options.skip_grpo:
            self.finish_grpo_earlier(state.load()["grpo"].get("steps", 0))  # 6'. GRPO had finished

    @property
    def plan(self) -> RunPlan:
        return self.session.plan

    @property
    def manager(self) -> ModelManager:
        return self.session.manager

    @property
    def engines(self) -> EngineOwner:
        return self.session.engines  # every vLLM engine of the run: ours, TRL's or Unsloth's

    @property
    def engine(self) -> Any:
        return self.session.engine  # what evaluations generate with (generation.engines)

    def load_model(self) -> None:
        plan = self.session.load().plan  # with what depends on the model: the shared-token passes
        precision = plan.precision
        logger.info("precision: %s weights, %s autocast (%s)", precision["weights"], precision["autocast"] or "no",
                    precision["reason"])  # fmt: skip
        logger.info("GRPO rollouts: %s (%s)", plan.rollouts, plan.rollouts_reason)
        logger.info("GRPO log-probs: shared prompt %s; SFT: shared prefix %s", plan.shared_prompt.reason,
                    plan.shared_prefix.reason)  # fmt: skip
        self.recorder.set(**plan.record(), chat_template=self.manager.template.record())
        if self.session.deepspeed_config is not None:  # did ZeRO-3 partition the weights as they loaded?
            self.recorder.summary["processes"]["weights_partitioned"] = is_partitioned(self.manager.model)

    def prepare_grpo_data(self) -> None:
        """Built even with --skip-grpo: its validation split holds the problems every evaluation scores."""
        with main_process_first():  # downloads and dataset caches are made once
            self.grpo_data = load_grpo_data(self.config, self.manager.tokenizer)
        validation = self.grpo_data.validation
        if not self.config.evaluation.enabled:
            return
        if validation is None or len(validation) == 0:
            logger.warning("no validation split (train_validation_split = 1.0): evaluations are skipped")
            return
        self.evaluator = Evaluator.from_config(
            self.config, validation, self.judge, self.grpo_data.max_completion_length
        )
        self.selector = Evaluator.for_selection(self.config, validation, self.judge,
                                                self.grpo_data.max_completion_length)  # fmt: skip
        _, reason = self.session.open_engine(trains=True)  # evaluation shares TRL's engine where GRPO has one
        self.recorder.set(engine=self.engine.name, engine_reason=reason)

    def preflight(self, sft_now: bool, grpo_now: bool) -> None:
        from .training.preflight import run_preflight

        run_preflight(self.config, self.plan, self.manager, self.engines, self.sft_data() if sft_now else None,
                      self.grpo_data if grpo_now else None, self.reward_funcs, self.reward_weights)  # fmt: skip

    def sft_data(self) -> Any:
        """The SFT dataset, loaded once (the preflight and SFT share it); the main process builds any cache first."""
        if self._sft_data is None:
            with main_process_first():
                self._sft_data = load_sft_data(self.config, self.manager.tokenizer)
        return self._sft_data

    def evaluate(self, stage: str, step: int, *, model: Any = None, during_grpo: bool = False) -> None:
        """Score ``model`` (default: the manager's, its whole weights gathered under ZeRO-3) on every rank.

        Its sample answers go to metrics.jsonl. A stage evaluation (before/after a phase) is recorded in the
        summary with its sampled figure and its sample answers; one during
        GRPO goes to metrics.jsonl only, greedy, and keeps an engine of ours for the next (GRPO's memory holds
        it); outside GRPO an engine of ours is shut down after the evaluation, so SFT never holds one.
        """
        evaluator = self.selector if during_grpo and self.selector is not None else self.evaluator
        if evaluator is None:
            return
        started = time.perf_counter()  # the engine's start counts: a user waits for it as for the answers
        with self.part("evaluation"), full_weights(self.manager.model) if model is None else contextlib.nullcontext(model) as current:
            engine = self.engine
            if isinstance(engine, HFEngine) and current is not self.manager.model:  # the trainer's unwrapped model
                engine = HFEngine(self.manager, model=current)
            evaluation = evaluator.evaluate(engine, stage, include_sampled=not during_grpo)
        seconds = round(time.perf_counter() - started, 2)
        self.recorder.metrics.write("eval", step, {"stage": stage, **evaluation.figures, "seconds": seconds,
                                                   **difficulty_scalars(evaluation.figures)})
        self.recorder.record_samples(stage, step, evaluation.samples)
        self.trackers.evaluation(stage, step, evaluation.figures, [] if during_grpo else evaluation.samples)
        if during_grpo:
            self.watch.observe(step, evaluation.figures, self.save)
        else:
            self.recorder.record_eval(stage, evaluation.figures, evaluation.samples)
            self.engines.release_own()
            run_on_main(lambda: self.write_card(stage))

    def write_card(self, stage: str) -> None:
        """The model card of the weights the stage scored, into their save (``model/card.py``)."""
        folder = {"after_sft": self.config.sft_adapter_path, "after_grpo": self.config.grpo_adapter_path,
                  "after_expert_iteration": self.config.expert_iteration_adapter_path}.get(stage)  # fmt: skip
        if folder is not None and folder.is_dir():
            write_text_atomic(folder / CARD_FILE, model_card(self.recorder.summary, self.config.to_dict(), stage))

    def finish_grpo_earlier(self, steps: int) -> None:
        """GRPO finished in an earlier run of this one (run_state.json): evaluate its adapter unless that was done
        too (the run was stopped between the save and the evaluation)."""
        if self.recorder.has_eval("after_grpo"):
            logger.info("GRPO already finished (run_state.json); nothing to resume")
            return
        with full_weights(self.manager.model, modifier_rank=0):
            self.manager.load_adapter(self.config.grpo_adapter_path)
        self.evaluate("after_grpo", steps)

    def train_sft(self, resume: bool) -> None:
        from .training.sft import SFTPhase

        if self.config.sft_training.init_adapter:  # more SFT on trained weights (a resume's checkpoint overrides them)
            with full_weights(self.manager.model, modifier_rank=0):
                self.manager.load_adapter(self.config.sft_training.init_adapter)
        phase = SFTPhase(self.config, self.plan, self.manager, self.sft_data(), self.recorder.metrics)
        result = phase.run(resume=resume, run_id=self.recorder.run_id)
        self.save(self.config.sft_adapter_path)
        self.recorder.record_phase("sft", result)
        self.recorder.state.mark_done("sft", steps=result.steps)  # last: "done" means the summary has it all
        del phase  # hand memory over to GRPO: the trainer, optimizer and data go now
        self._sft_data = None
        free_memory()

    def continue_from_sft(self, record_skip: bool) -> None:
        """Start from ``sft/final`` (a resumed run whose expert iteration has saved a round: from its adapter); a
        resumed run keeps the SFT figures it recorded when SFT ran."""
        sft_final = self.start_adapter()
        if sft_final.is_dir():
            with full_weights(self.manager.model, modifier_rank=0):
                self.manager.load_adapter(sft_final)
        else:
            logger.warning("no SFT adapter at %s: GRPO starts from the base model", sft_final)
        if record_skip:
            self.recorder.record_skipped("sft")

    def start_adapter(self) -> Path:
        """The adapter the phase after SFT starts from: expert iteration's, once this run has saved a round of it."""
        from .training.expert_iteration import PHASE as ITERATION

        iterated = self.recorder.state.load().get(ITERATION, {}).get("rounds")
        return self.config.expert_iteration_adapter_path if iterated else self.config.sft_adapter_path

    def train_expert_iteration(self) -> None:
        """Expert iteration on GRPO's training problems (``training/expert_iteration.py``), recorded as a phase."""
        from .training.expert_iteration import PHASE as ITERATION
        from .training.expert_iteration import ExpertIteration

        engine = self.engine or self.session.open_engine(trains=True)[0]  # none yet when evaluation is off
        phase = ExpertIteration(self.config, self.plan, self.manager, engine, self.grpo_data.train, self.judge,
                                self.grpo_data.max_completion_length, self.recorder.metrics, self.save)  # fmt: skip
        result = phase.run(self.recorder.state, release_engine=self.engines.release_own)
        self.recorder.record_phase(ITERATION, result)
        self.recorder.state.mark_done(ITERATION, **result.settings, steps=result.steps)  # last, as for the others

    def train_grpo(self, resume: bool, evaluate_first: bool) -> int:
        """GRPO; with ``evaluate_first``, the after-SFT evaluation between the trainer's build and its first step,
        on the engine the trainer started (TRL's, in a single-process run with vLLM rollouts): the run starts one
        engine, not one for the evaluation and another for GRPO."""
        from .training.grpo import GRPOPhase

        # the workers that judge GRPO's problems (reasoning-gym's verifier imports for seconds) start while the
        # trainer starts its engine, mostly one thread's work, not beside SFT's or the evaluation's two
        start_judges(self.grpo_data.train)
        if self.config.grpo_training.difficulty_band is not None:
            self.keep_problems_within_band()

        def before_training() -> None:
            if evaluate_first:
                self.evaluate("after_sft", 0)
            self.start_grpo_watch()

        phase = GRPOPhase(
            self.config, self.plan, self.manager, self.engines, self.grpo_data, self.reward_funcs, self.reward_weights,
            self.recorder.metrics, judge=self.judge,
            evaluate=lambda model, step: self.evaluate(f"grpo_step_{step}", step, model=model, during_grpo=True),
            before_training=before_training,
        )  # fmt: skip
        result = phase.run(resume=resume, run_id=self.recorder.run_id)
        if self.watch.best is not None:
            result.settings["kept_step"] = self.keep_best_weights(result.steps)
        save_path = self.config.grpo_adapter_path
        self.save(save_path)
        self.recorder.record_phase("grpo", result)
        self.recorder.set(save_path=str(save_path))
        self.recorder.state.mark_done("grpo", steps=result.steps)  # last: "done" means the summary has it all
        return result.steps

    def start_grpo_watch(self) -> None:
        """Where GRPO starts, on the problems its evaluations score: after SFT's figure, or (with
        ``evaluation.selection_samples``) an evaluation of its own as step 0; and, with ``keep_best``, the choice an
        earlier attempt of this run made."""
        from .training.selection import BestWeights

        if self.config.grpo_training.keep_best:
            self.watch = GRPOWatch(BestWeights.load(Path(self.config.output_dir) / "grpo" / "best",
                                                    self.start_adapter(), self.recorder.run_id))  # fmt: skip
        evals = self.recorder.summary["eval"]
        after_sft = evals.get("after_expert_iteration") or evals.get("after_sft")  # where GRPO starts
        if self.selector is not None:
            self.evaluate("grpo_step_0", 0, during_grpo=True)
        elif after_sft:
            self.watch.observe(0, after_sft, self.save)

    def keep_best_weights(self, last_step: int) -> int:
        """The last step scored like the others; the best of them loaded into the model. Returns its step."""
        best = self.watch.best
        if best.step < last_step:  # a resumed run may have scored it already
            self.evaluate(f"grpo_step_{last_step}", last_step, during_grpo=True)
        if best.step != last_step:
            with full_weights(self.manager.model, modifier_rank=0):
                self.manager.load_adapter(best.weights())
            logger.info("keep_best: the adapter of step %d (greedy %.3f) is kept, not the last step's", best.step,
                        best.accuracy)  # fmt: skip
        return best.step

    def keep_problems_within_band(self) -> None:
        """GRPO's training problems cut to those the starting policy sometimes solves (``training/difficulty.py``)."""
        from .training.difficulty import keep_within_band

        def scorer(problems: Any, samples: int) -> Evaluator:
            return Evaluator.from_config(self.config, problems, self.judge, self.grpo_data.max_completion_length,
                                         limit=len(problems), sampled_k=samples, rollouts=True)  # fmt: skip

        folder = Path(self.config.output_dir) / "grpo"
        with full_weights(self.manager.model) as model:
            engine = self.engine if not isinstance(self.engine, HFEngine) else HFEngine(self.manager, model=model)
            kept, record = keep_within_band(self.config, self.grpo_data.train, scorer, engine, folder,
                                            self.recorder.run_id)  # fmt: skip
        self.grpo_data.train = kept
        self.recorder.set(grpo_problems=record)
        self.engines.release_own()

    def free(self) -> None:
        """End the run's vLLM engines, then drop the model (``Session.free``); stop watching and trimming the
        memory."""
        self.memory.stop()
        self.trimmer.stop()
        self.session.free()

    def save(self, path: Path) -> None:
        """The main process saves the whole weights (gathered under ZeRO-3); the others wait until it has."""
        with full_weights(self.manager.model):
            run_on_main(lambda: self.manager.save_adapter(path))
        barrier()
