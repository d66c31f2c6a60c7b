"""Launch facts, the refusal of a lonely launch, and barriers that really order two CPU processes.

The last test launches this file as a worker under ``accelerate launch --config_file configs/accelerate/cpu.yaml``
(two processes over gloo, one thread each); run alone with ``uv run pytest tests/test_distributed.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from llm_finetuning.errors import PipelineError
from llm_finetuning.evaluation.sharding import generate_sharded
from llm_finetuning.runtime.distributed import (
    Launch,
    any_rank,
    barrier,
    device_for,
    gather_objects,
    join_process_group,
    leave_process_group,
    main_process_first,
    read_launch,
    run_on_main,
    world_size,
)
from llm_finetuning.runtime.hardware import visible_gpus

ROOT = Path(__file__).resolve().parents[1]
CPU_CONFIG = ROOT / "configs" / "accelerate" / "cpu.yaml"

# What each launcher puts in its processes' environments (accelerate 1.15, torch 2.13), as measured.
TORCHRUN_RANK_1 = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none"}
ACCELERATE_RANK_1 = {**TORCHRUN_RANK_1, "ACCELERATE_MIXED_PRECISION": "no", "ACCELERATE_DYNAMO_BACKEND": "NO"}
ACCELERATE_CPU_ONE = {"ACCELERATE_USE_CPU": "True", "ACCELERATE_MIXED_PRECISION": "no"}
ACCELERATE_CPU_TWO_WITHOUT_MPIRUN = {**ACCELERATE_CPU_ONE, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
MPIRUN_RANK_3 = {**ACCELERATE_CPU_TWO_WITHOUT_MPIRUN, "PMI_SIZE": "4", "PMI_RANK": "3", "MPI_LOCALRANKID": "1"}


@pytest.mark.parametrize("environ, expected", [
    ({}, Launch("none", 1, 0, 0)),
    (TORCHRUN_RANK_1, Launch("torchrun", 2, 1, 1)),
    (ACCELERATE_RANK_1, Launch("accelerate", 2, 1, 1)),
    (ACCELERATE_CPU_ONE, Launch("accelerate", 1, 0, 0)),
    (ACCELERATE_CPU_TWO_WITHOUT_MPIRUN, Launch("accelerate", 1, 0, 0, started_alone=True)),
    (MPIRUN_RANK_3, Launch("accelerate", 4, 3, 1)),
    ({"PMI_SIZE": "4", "PMI_RANK": "0"}, Launch("mpirun", 4, 0, 0)),
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}, Launch("other", 2, 0, 0)),
], ids=["python", "torchrun", "accelerate", "accelerate-cpu-1", "accelerate-cpu-2-alone", "accelerate-mpirun",
        "mpirun", "other"])
def test_read_launch_states_the_launch(environ, expected):
    assert read_launch(environ) == dataclasses.replace(expected, gpus=visible_gpus())


def test_rank_zero_is_the_main_process():
    assert Launch("torchrun", 2, 0, 0).is_main_process and Launch("torchrun", 2, 0, 0).is_distributed
    assert not Launch("torchrun", 2, 1, 1).is_main_process
    assert not Launch("none", 1, 0, 0).is_distributed


def test_each_rank_gets_its_own_device():
    assert device_for(Launch("torchrun", 2, 1, 1)) == torch.device("cpu")  # the launch sees no GPU
    assert device_for(Launch("torchrun", 4, 3, 3, gpus=2)) == torch.device("cuda", 1)  # two ranks per GPU
    assert device_for(Launch("torchrun", 2, 1, 1, gpus=8)) == torch.device("cuda", 1)


def test_a_launch_asked_for_several_processes_that_started_one_is_refused():
    with pytest.raises(PipelineError, match="started this one alone.*configs/accelerate/cpu.yaml"):
        join_process_group(Launch("accelerate", 1, 0, 0, started_alone=True))


def test_a_group_smaller_than_the_launch_is_refused(tmp_path):
    # A group of one already formed while the environment says two: each rank would train alone.
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        with pytest.raises(PipelineError, match="launched as 2 processes .* the process group has 1"):
            join_process_group(Launch("torchrun", 2, 0, 0))
    finally:
        torch.distributed.destroy_process_group()


def test_single_process_helpers_are_no_ops(tmp_path):
    assert join_process_group(Launch("none", 1, 0, 0)) == Launch("none", 1, 0, 0)
    assert world_size() == 1
    barrier()
    assert run_on_main(lambda: 42) == 42
    with main_process_first():
        (tmp_path / "written").write_text("x")
    assert (tmp_path / "written").read_text() == "x"
    with pytest.raises(ZeroDivisionError):
        run_on_main(lambda: 1 / 0)


@pytest.mark.slow
def test_two_cpu_processes_form_one_group_and_take_turns(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CPU_CONFIG),
               str(Path(__file__)), str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads((tmp_path / f"report-{rank}.json").read_text()) for rank in (0, 1)]
    for rank, report in enumerate(reports):
        assert report["launch"] == {"launcher": "accelerate", "world_size": 2, "rank": rank, "local_rank": rank,
                                    "started_alone": False, "gpus": 0}  # on the CPU: no GPU seen
        assert report["backend"] == "gloo"
        assert report["trainer_device_loads"]  # a multi-process run can resume from its checkpoints
        assert report["cache_seen"] == "built by rank 0"  # main_process_first: the main process went first
        assert report["writer_lines"] == ["written by rank 0"]  # run_on_main: one writer, done before anyone left
        assert report["arrivals_seen_after_barrier"] == [0, 1]
        assert report["failure"] == ("ZeroDivisionError" if rank == 0 else "PipelineError")
        assert report["any_rank"] == [True, False]  # one rank's flag reaches both; none set, none seen
        assert report["gathered"] == [{"rank": 0}, {"rank": 1}]
        # whole batches of 2 dealt in turn, gathered in prompt order on every rank
        assert report["sharded"] == [["a0"], ["b0"], ["c1"], ["d1"], ["e0"]]
        # ZeRO-3: 3 batches of 1 -> rank 1 repeats one, so both generate 2 batches; the repeat is dropped
        assert report["lockstep"] == [2, [["a"], ["b"], ["c"]]]


def _worker(out: Path) -> None:
    """One rank of the two-process test: use every helper, write what it saw to report-<rank>.json."""
    launch = join_process_group()
    rank, report = launch.rank, {"launch": launch.__dict__, "backend": torch.distributed.get_backend()}
    report["trainer_device_loads"] = _trainer_device_loads(out / f"tensor-{rank}.pt")
    cache = out / "cache.txt"
    with main_process_first():
        if launch.is_main_process:
            time.sleep(1.0)  # a slow build: rank 1 must still wait for it
            cache.write_text("built by rank 0")
        report["cache_seen"] = cache.read_text()
    shared = out / "shared.log"
    run_on_main(lambda: shared.open("a").write(f"written by rank {rank}\n"))
    report["writer_lines"] = shared.read_text().splitlines()
    if rank == 1:
        time.sleep(1.0)  # arrive late: rank 0 must not pass the barrier before this file exists
    (out / f"arrived-{rank}").touch()
    barrier()
    report["arrivals_seen_after_barrier"] = sorted(int(p.name.split("-")[1]) for p in out.glob("arrived-*"))
    try:
        run_on_main(lambda: 1 / 0)
    except (ZeroDivisionError, PipelineError) as exc:
        report["failure"] = type(exc).__name__
    report["any_rank"] = [any_rank(rank == 1), any_rank(False)]
    report["gathered"] = gather_objects({"rank": rank})
    report["sharded"] = generate_sharded(lambda prompts: [[f"{p}{rank}"] for p in prompts], list("abcde"), 2)
    seen: list[str] = []
    lockstep = generate_sharded(lambda prompts: seen.extend(prompts) or [[p] for p in prompts], list("abc"), 1,
                                lockstep=True)
    report["lockstep"] = [len(seen), lockstep]
    (out / f"report-{rank}.json").write_text(json.dumps(report))
    leave_process_group()  # nobody leaves while another rank is still inside a collective


def _trainer_device_loads(path: Path) -> bool:
    """Whether a checkpoint loads onto the device a Trainer in this process would resume on."""
    from accelerate import PartialState

    torch.save({"state": torch.ones(2)}, path)
    return torch.load(path, map_location=PartialState(cpu=True).device)["state"].sum().item() == 2


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
