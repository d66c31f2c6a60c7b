"""Every configs/accelerate/*.yaml through accelerate's own code: config classes, launch arguments, launcher env.

Nothing is launched: ``accelerate launch`` is replayed up to the point where it would start processes (its
config loading, ``_validate_launch_command`` and the ``prepare_*_env`` function of the launcher it picks), so
a misspelt key, a config that picks the wrong launcher, or a DeepSpeed setting that never reaches the
processes fails here. The DeepSpeed side ends at accelerate's ``DeepSpeedPlugin``: DeepSpeed itself does not
run on a CPU.
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest
import trl
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from accelerate.utils import DeepSpeedPlugin, DistributedType
from accelerate.utils.launch import (
    prepare_deepspeed_cmd_env,
    prepare_multi_gpu_env,
    prepare_simple_launcher_cmd_env,
)

from llm_finetuning.runtime.distributed import read_launch

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "accelerate"
ALL = sorted(CONFIGS.glob("*.yaml"))
TRL_CONFIGS = Path(trl.__file__).parent / "accelerate_configs"

# name -> (distributed type, processes per machine, machines, ZeRO stage or None)
EXPECTED = {
    "cpu": (DistributedType.MULTI_GPU, 2, 1, None),
    "ddp": (DistributedType.MULTI_GPU, 8, 1, None),
    "zero2": (DistributedType.DEEPSPEED, 8, 1, 2),
    "zero3": (DistributedType.DEEPSPEED, 8, 1, 3),
    "zero2_multinode": (DistributedType.DEEPSPEED, 8, 2, 2),
    "zero3_multinode": (DistributedType.DEEPSPEED, 8, 2, 3),
}
MULTINODE_FLAGS = ["--machine_rank", "1", "--main_process_ip", "10.1.2.3"]


def launch_args(config: Path, *flags: str):
    """What ``accelerate launch --config_file config [flags] train.py`` decides before it starts anything."""
    args = launch_command_parser().parse_args(["--config_file", str(config), *flags, "train.py"])
    args, defaults, _ = _validate_launch_command(args)
    return args, defaults


def test_every_config_is_known_here():
    assert sorted(path.stem for path in ALL) == sorted(EXPECTED)


@pytest.mark.parametrize("config", ALL, ids=lambda path: path.stem)
def test_config_loads_with_accelerate_classes(config):
    loaded = load_config_from_file(str(config))  # unknown top-level keys raise here
    kind, per_machine, machines, stage = EXPECTED[config.stem]
    assert isinstance(loaded, ClusterConfig)
    assert loaded.distributed_type == kind
    assert (loaded.num_processes, loaded.num_machines) == (per_machine * machines, machines)
    assert loaded.main_process_ip is None  # an address belongs on the command line, not in the repository
    if stage is not None:
        assert loaded.deepspeed_config["zero_stage"] == stage


@pytest.mark.parametrize("config", [path for path in ALL if "zero" in path.stem], ids=lambda path: path.stem)
def test_deepspeed_keys_are_launch_options(config):
    # accelerate copies deepspeed_config keys onto the launch arguments without checking them: a misspelt key
    # would be dropped silently, so each must name a real `accelerate launch` option.
    options = {action.dest for action in launch_command_parser()._actions}
    assert set(load_config_from_file(str(config)).deepspeed_config) <= options


@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_settings_match_trl_own_configs(stage):
    ours = load_config_from_file(str(CONFIGS / f"zero{stage}.yaml"))
    theirs = load_config_from_file(str(TRL_CONFIGS / f"zero{stage}.yaml"))
    assert ours.deepspeed_config == theirs.deepspeed_config
    assert (ours.mixed_precision, ours.num_processes) == (theirs.mixed_precision, theirs.num_processes)


@pytest.mark.parametrize("flags, processes", [([], "2"), (["--num_processes", "3"], "3")])
def test_cpu_config_uses_the_torchrun_launcher_on_a_free_port(flags, processes):
    args, _ = launch_args(CONFIGS / "cpu.yaml", *flags)
    assert args.multi_gpu and not args.cpu  # accelerate's torchrun launcher: it forms one process group
    prepare_multi_gpu_env(args)
    assert args.nproc_per_node == processes
    assert 0 < int(args.master_port) < 65536  # main_process_port: 0 became a free port


def test_cpu_flag_starts_one_process_that_the_pipeline_refuses():
    args, _ = launch_args(CONFIGS / "cpu.yaml", "--cpu")
    assert args.cpu and args.num_processes == 2  # --cpu wins: the simple launcher, which needs mpirun for 2
    command, env = prepare_simple_launcher_cmd_env(args)
    assert command[0] != "mpirun"
    launch = read_launch(env)
    assert launch.started_alone and launch.world_size == 1


@pytest.mark.parametrize("config", [path for path in ALL if "zero" in path.stem], ids=lambda path: path.stem)
def test_deepspeed_settings_reach_the_processes(config):
    _, per_machine, machines, stage = EXPECTED[config.stem]
    args, defaults = launch_args(config, *(MULTINODE_FLAGS if machines > 1 else []))
    assert args.use_deepspeed
    args.deepspeed_fields_from_accelerate_config = ",".join(defaults.deepspeed_config)
    command, env = prepare_deepspeed_cmd_env(args)
    assert command is None  # the "standard" multi-node launcher: torchrun on each machine, no pdsh
    assert args.nproc_per_node == str(per_machine)
    if machines > 1:
        assert (args.nnodes, args.node_rank) == (str(machines), 1)
        assert args.rdzv_endpoint == "10.1.2.3:29500"
    with mock.patch.dict(os.environ, {k: v for k, v in env.items() if k.startswith("ACCELERATE_")}):
        plugin = DeepSpeedPlugin()  # what each process builds from that environment
    assert plugin.zero_stage == stage
    assert plugin.deepspeed_config["zero_optimization"]["stage"] == stage
    assert plugin.deepspeed_config["zero_optimization"]["offload_param"]["device"] == "none"
    # ZeRO-3: weights partitioned at load time, and a save gathers them into one 16-bit copy
    assert plugin.zero3_init_flag is (stage == 3)
    assert plugin.deepspeed_config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is (stage == 3)
