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

Outside a launcher all of this is a no-op in a single process. Run the two-process checks with
``uv run pytest tests/test_distributed.py``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar

import torch
import torch.distributed as dist

from .errors import PipelineError

__all__ = ["Launch", "barrier", "device_for", "is_main_process", "join_process_group", "main_process_first",
           "read_launch", "run_on_main", "world_size"]

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

    @property
    def is_main_process(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


def read_launch(environ: Mapping[str, str] | None = None) -> Launch:
    """The launch described by ``environ`` (default ``os.environ``); initialises nothing."""
    env = os.environ if environ is None else environ
    world = _first_int(env, _WORLD_SIZE, 1)
    # accelerate's simple launcher (used for --cpu and MULTI_CPU) sets MASTER_ADDR only when asked for more than
    # one process; without mpirun it then starts a single process that would train alone with world size 1.
    alone = "ACCELERATE_USE_CPU" in env and "MASTER_ADDR" in env and not any(k in env for k in _WORLD_SIZE)
    return Launch(_launcher(env), world, _first_int(env, _RANK, 0), _first_int(env, _LOCAL_RANK, 0), alone)


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
    if torch.cuda.is_available():
        return torch.device("cuda", launch.local_rank % torch.cuda.device_count())
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

        if not torch.cuda.is_available():
            # accelerate names each CPU rank's device "cpu:0", which torch.load cannot map to: the Trainer
            # resuming a multi-process run loads optimizer.pt with map_location=args.device and fails.
            # Its PartialState (here and in every TrainingArguments) reads the device from this variable.
            os.environ.setdefault("ACCELERATE_TORCH_DEVICE", "cpu")
        PartialState(cpu=not torch.cuda.is_available())  # also sets this rank's CUDA device
    formed = dist.get_world_size() if dist.is_initialized() else 1
    if formed != launch.world_size:
        raise PipelineError(
            f"launched as {launch.world_size} processes (WORLD_SIZE) but the process group has {formed}; "
            "on a machine without GPUs launch with --config_file configs/accelerate/cpu.yaml"
        )
    return launch


def world_size() -> int:
    """Processes in the formed group (1 before ``join_process_group`` or without a launcher)."""
    return dist.get_world_size() if dist.is_initialized() else 1


def is_main_process() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


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
