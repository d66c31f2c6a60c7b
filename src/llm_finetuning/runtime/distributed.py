"""Who this process is in a multi-process launch, and how processes take turns: rank, world size, barriers.

`accelerate launch` and `torchrun` start one process per device and tell each through its environment who it
is (RANK, WORLD_SIZE, LOCAL_RANK). ``read_launch()`` reads those facts without initialising anything;
``join_process_group()`` forms the process group (gloo on the CPU, NCCL on CUDA) through accelerate's
``PartialState``, the same code the trainers run, so it is called once at the start of a run, before the model
loads: from then on every rank knows its device, who writes, and who waits. The trainers' TrainingArguments
later find the group formed and reuse it (``PartialState`` only creates a group when none exists).

Only the main process writes shared files; the others wait for it:

    launch = join_process_group()                 # refuses a run that was asked for N processes but is alone
    with main_process_first():                    # main builds a cache first, the others then reuse it
        path = build_tiny_base(...)
    run_on_main(recorder.write_summary)           # main writes, every rank waits; a failure on main fails all

Ranks also agree on things together: ``any_rank`` (one SIGTERM stops every rank after the same step),
``gather_objects`` (evaluation shards), ``weights_checksum`` (are the replicas still identical?). Under
DeepSpeed ZeRO-3 ``deepspeed_config_before_load`` makes the DeepSpeed config known before the model loads, so
``from_pretrained`` partitions the weights as it reads them, and ``full_weights`` gathers them for generation.

Outside a launcher all of this is a no-op in a single process. Run the two-process checks with
``uv run pytest tests/test_distributed.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import torch
import torch.distributed as dist

from ..errors import PipelineError
from .hardware import visible_gpus

__all__ = ["Launch", "any_rank", "barrier", "deepspeed_config_before_load", "device_for", "full_weights",
           "gather_objects", "is_main_process", "is_partitioned", "join_process_group", "leave_process_group",
           "main_process_first", "process_record", "rank", "read_launch", "run_on_main", "weights_checksum",
           "world_size", "zero_stage"]

Launcher = Literal["accelerate", "torchrun", "mpirun", "other", "none"]
T = TypeVar("T")

# The variables accelerate's own CPU launch reads (accelerate.utils.environment.get_cpu_distributed_information).
_WORLD_SIZE = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
_RANK = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK")
_LOCAL_RANK = ("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK")


@dataclass(frozen=True)
class Launch:
    """The facts of this process's launch, as its environment states them."""

    launcher: Launcher
    world_size: int  # processes the launcher started, on every machine together
    rank: int  # this process among them; 0 is the main process, the one that writes
    local_rank: int  # this process among those on its machine: its GPU index
    started_alone: bool = False  # accelerate's --cpu/MULTI_CPU launcher was asked for several but started one
    gpus: int = 0  # CUDA GPUs this process sees (0: the ranks run on the CPU)

    @property
    def is_main_process(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


def read_launch(environ: Mapping[str, str] | None = None) -> Launch:
    """The launch described by ``environ`` (default ``os.environ``) on the GPUs this process sees; initialises
    nothing."""
    env = os.environ if environ is None else environ
    world = _first_int(env, _WORLD_SIZE, 1)
    # accelerate's simple launcher (used for --cpu and MULTI_CPU) sets MASTER_ADDR only when asked for more than
    # one process; without mpirun it then starts a single process that would train alone with world size 1.
    alone = "ACCELERATE_USE_CPU" in env and "MASTER_ADDR" in env and not any(k in env for k in _WORLD_SIZE)
    return Launch(_launcher(env), world, _first_int(env, _RANK, 0), _first_int(env, _LOCAL_RANK, 0), alone,
                  visible_gpus())


def _launcher(env: Mapping[str, str]) -> Launcher:
    if "ACCELERATE_MIXED_PRECISION" in env:  # every accelerate launcher sets it for its processes
        return "accelerate"
    if "TORCHELASTIC_RUN_ID" in env:
        return "torchrun"
    if any(key in env for key in _WORLD_SIZE[1:]):
        return "mpirun"
    return "other" if "WORLD_SIZE" in env else "none"


def _first_int(env: Mapping[str, str], keys: tuple[str, ...], default: int) -> int:
    for key in keys:
        if env.get(key, "").strip().lstrip("-").isdigit():
            return int(env[key])
    return default


def device_for(launch: Launch) -> torch.device:
    """This rank's device: ``cuda:LOCAL_RANK`` when there are GPUs, else the CPU."""
    if launch.gpus:
        return torch.device("cuda", launch.local_rank % launch.gpus)
    return torch.device("cpu")


def join_process_group(launch: Launch | None = None) -> Launch:
    """Form the process group of a multi-process launch (a no-op for one process) and check it is complete."""
    launch = launch or read_launch()
    if launch.started_alone:
        raise PipelineError(
            "accelerate launch was asked for several processes but started this one alone (its --cpu / MULTI_CPU "
            "launcher needs mpirun); launch with --config_file configs/accelerate/cpu.yaml or torchrun --nproc_per_node N"
        )
    if launch.is_distributed and not dist.is_initialized():
        from accelerate import PartialState

        if not launch.gpus:
            # accelerate names each CPU rank's device "cpu:0", which torch.load cannot map to: the Trainer
            # resuming a multi-process run loads optimizer.pt with map_location=args.device and fails.
            # Its PartialState (here and in every TrainingArguments) reads the device from this variable.
            os.environ.setdefault("ACCELERATE_TORCH_DEVICE", "cpu")
        PartialState(cpu=not launch.gpus)  # also sets this rank's CUDA device
    formed = dist.get_world_size() if dist.is_initialized() else 1
    if formed != launch.world_size:
        raise PipelineError(
            f"launched as {launch.world_size} processes (WORLD_SIZE) but the process group has {formed}; "
            "on a machine without GPUs launch with --config_file configs/accelerate/cpu.yaml"
        )
    return launch


def leave_process_group() -> None:
    """Wait for every rank, then destroy the process group (a no-op without one).

    Without the wait a rank that finished first can exit while another is still receiving the last collective
    from it; gloo then aborts that rank.
    """
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def world_size() -> int:
    """Processes in the formed group (1 before ``join_process_group`` or without a launcher)."""
    return dist.get_world_size() if dist.is_initialized() else 1


def rank() -> int:
    """This process's rank in the formed group (0 without one)."""
    return dist.get_rank() if dist.is_initialized() else 0


def is_main_process() -> bool:
    return rank() == 0


def barrier() -> None:
    """Wait until every rank gets here; a no-op in a single process."""
    if world_size() > 1:
        dist.barrier()


def run_on_main(task: Callable[[], T]) -> T | None:
    """Run ``task`` on the main process while the others wait; return its result there, None elsewhere.

    Every rank returns only once the main process has finished, so a file the main process writes exists for
    all of them afterwards. If the task fails on the main process, every rank raises (none is left waiting).
    """
    result, error = None, None
    if is_main_process():
        try:
            result = task()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, once the other ranks know
            error = exc
    failure = _main_failure(error)
    if error is not None:
        raise error
    if failure is not None:
        raise PipelineError(f"the main process failed ({failure}); see its log")
    return result


@contextlib.contextmanager
def main_process_first() -> Iterator[None]:
    """The main process runs the block first; the others run it after it finished (e.g. to reuse a cache)."""
    if not is_main_process():
        failure = _main_failure(None)
        if failure is not None:
            raise PipelineError(f"the main process failed ({failure}); see its log")
        yield
        return
    try:
        yield
    except BaseException as exc:
        _main_failure(exc)
        raise
    _main_failure(None)


def _main_failure(error: BaseException | None) -> str | None:
    """A barrier at which the main process tells every rank whether it failed (a one-line reason, or None)."""
    if world_size() == 1:
        return None
    message = [None if error is None else f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"]
    dist.broadcast_object_list(message, src=0)
    return message[0]


def gather_objects(value: T) -> list[T]:
    """Every rank's ``value``, in rank order, on every rank (``[value]`` in a single process)."""
    if world_size() == 1:
        return [value]
    gathered: list[Any] = [None] * world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def any_rank(flag: bool) -> bool:
    """True on every rank when ``flag`` is true on at least one; every rank must call it at the same point."""
    if world_size() == 1:
        return flag
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    value = torch.tensor([1 if flag else 0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def zero_stage(environ: Mapping[str, str] | None = None) -> int | None:
    """The DeepSpeed ZeRO stage ``accelerate launch`` gave this process, or None without DeepSpeed."""
    env = os.environ if environ is None else environ
    if env.get("ACCELERATE_USE_DEEPSPEED", "false").lower() not in ("1", "true", "yes"):
        return None
    return int(env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2"))  # accelerate's own default


def deepspeed_config_before_load() -> Any:
    """Under ``accelerate launch`` with DeepSpeed: make its config known to transformers now; keep the result.

    transformers partitions weights at load (ZeRO-3's ``zero.Init``) only while a DeepSpeed config object is
    alive; the trainers create theirs with their arguments, after the model has loaded. This builds the one
    accelerate builds from the launch's environment, so the model loads partitioned. Returns None without
    DeepSpeed; the caller holds the returned object for as long as the model lives.
    """
    if zero_stage() is None:
        return None
    from accelerate.utils import DeepSpeedPlugin

    plugin = DeepSpeedPlugin()
    plugin.set_mixed_precision(os.environ.get("ACCELERATE_MIXED_PRECISION", "no"))
    plugin.set_deepspeed_weakref()
    return plugin


def _partitioned(model: Any) -> list[Any]:
    return [p for p in model.parameters() if hasattr(p, "ds_id")]  # ZeRO-3 marks the parameters it manages


def is_partitioned(model: Any) -> bool:
    """Whether DeepSpeed ZeRO-3 manages (partitions) the model's weights."""
    return bool(_partitioned(model))


@contextlib.contextmanager
def full_weights(model: Any, modifier_rank: int | None = None) -> Iterator[Any]:
    """``model`` with its whole weights on every rank for the block (ZeRO-3 partitions them; elsewhere a no-op).

    Every rank must enter together. With ``modifier_rank`` the weights that rank writes inside the block are
    partitioned back out to every rank on exit.
    """
    partitioned = _partitioned(model)
    if not partitioned:
        yield model
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(partitioned, modifier_rank=modifier_rank):
        yield model


def weights_checksum(model: Any) -> str | None:
    """A digest of the trainable weights: equal on every rank while data parallelism keeps replicas in sync.

    Sums in float64 per parameter, computed where the weights are (no copy of a large model to the CPU); two
    replicas that differ anywhere give different digests. None under ZeRO-3, where each rank holds a partition.
    """
    if _partitioned(model):
        return None
    sums = [
        (name, float(parameter.detach().double().sum()), float(parameter.detach().double().abs().sum()))
        for name, parameter in model.named_parameters() if parameter.requires_grad
    ]
    return hashlib.sha256(repr(sums).encode()).hexdigest()[:16]


def process_record(launch: Launch) -> dict[str, Any]:
    """What ``summary.json`` says about the processes: how many the run really had, and who started them."""
    return {"num_processes": world_size(), "launcher": launch.launcher, "zero_stage": zero_stage()}
