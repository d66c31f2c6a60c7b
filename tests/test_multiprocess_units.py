"""The multi-process rules that need no launch: evaluation shares, each rank's device, the one writer, the stop
rule, the GRPO batch rule with the launch's process count, the resume command, and the vLLM server check.

What needs two real processes is in tests/test_distributed.py (in this suite) and tests/test_multiprocess_e2e.py
(its own lane).
"""

from __future__ import annotations

import http.server
import logging
import os
import signal
import socket
import threading
import time

import pytest
import torch
from transformers import TrainerControl

from llm_finetuning.config import ConfigError, GRPOTrainingConfig, PipelineConfig
from llm_finetuning.errors import PipelineError
from llm_finetuning.evaluation.sharding import generate_sharded, shard_batches
from llm_finetuning.model import get_backend
from llm_finetuning.reporting.run_outputs import RunRecorder
from llm_finetuning.rollout.server import wait_for_server
from llm_finetuning.runtime.logging_setup import setup_logging
from llm_finetuning.session.checks import check_config
from llm_finetuning.tools.train import resume_command
from llm_finetuning.training.callbacks import GracefulStop


@pytest.mark.parametrize("count, batch_size, ranks, lockstep, expected", [
    (7, 2, 2, False, [[(0, 2), (4, 6)], [(2, 4), (6, 7)]]),   # whole batches, dealt in turn
    (5, 2, 2, False, [[(0, 2), (4, 5)], [(2, 4)]]),           # the short last batch stays last
    (5, 2, 2, True, [[(0, 2), (4, 5)], [(2, 4), (2, 4)]]),    # lockstep: rank 1 repeats its first batch
    (1, 4, 2, True, [[(0, 1)], [(0, 1)]]),                    # ... or the first batch of all
    (1, 4, 2, False, [[(0, 1)], []]),
    (0, 4, 2, True, [[], []]),
    (24, 5, 3, False, [[(0, 5), (15, 20)], [(5, 10), (20, 24)], [(10, 15)]]),
])
def test_shares_are_the_batches_one_process_would_generate(count, batch_size, ranks, lockstep, expected):
    shares = shard_batches(count, batch_size, ranks, lockstep)
    assert [[(batch.start, batch.stop) for batch in share] for share in shares] == expected
    one_process = shard_batches(count, batch_size, 1)[0]
    assert sorted({(b.start, b.stop) for share in shares for b in share}) == [(b.start, b.stop) for b in one_process]


def test_in_one_process_sharded_generation_is_plain_generation():
    calls = []

    def generate(prompts):
        calls.append(list(prompts))
        return [[prompt * 2] for prompt in prompts]

    assert generate_sharded(generate, ["a", "b", "c"], batch_size=2) == [["aa"], ["bb"], ["cc"]]
    assert calls == [["a", "b", "c"]]


def test_each_rank_loads_onto_its_own_gpu(monkeypatch):
    from llm_finetuning.config import ModelConfig
    from llm_finetuning.model import hf_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)  # what every rank sees before its device is set
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("LOCAL_RANK", "2")
    model_config = ModelConfig(dtype="bfloat16")
    assert hf_backend.load_kwargs(model_config, cuda=True, dtype=torch.bfloat16)["device_map"] == {"": "cuda:2"}
    monkeypatch.setattr("transformers.integrations.is_deepspeed_zero3_enabled", lambda: True)
    assert "device_map" not in hf_backend.load_kwargs(model_config, cuda=True, dtype=torch.bfloat16)  # ZeRO-3 places the weights itself


def test_ranks_other_than_the_main_one_write_nothing(tmp_path):
    recorder = RunRecorder.start(tmp_path, resume=False, writes=False)
    recorder.set(backend="hf")
    recorder.metrics.write("sft", 1, {"loss": 1.0})
    recorder.state.mark_done("sft", steps=1)
    recorder.finish(1.0, complete=True)
    assert list(tmp_path.iterdir()) == []
    assert recorder.summary["complete"] is True  # it keeps the summary all the same


def test_other_ranks_log_warnings_to_the_console_only(tmp_path):
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    try:
        setup_logging("INFO", tmp_path, rank=1)
        assert root.level == logging.WARNING
        assert not (tmp_path / "training.log").exists()
        console = next(h for h in root.handlers if h.name == "llm_finetuning.console")
        assert console.formatter.format(logging.makeLogRecord({"msg": "x", "levelname": "WARNING"})).startswith(
            "[rank 1] ")
    finally:
        setup_logging("INFO", None, rank=0)
        root.setLevel(before[0])


def test_one_ctrl_c_delivered_twice_is_one_request_and_a_later_one_insists():
    stop = GracefulStop()
    stop.install()
    try:
        os.kill(os.getpid(), signal.SIGINT)  # from the terminal
        os.kill(os.getpid(), signal.SIGTERM)  # the launcher forwarding it: the same request
        assert stop.received == signal.SIGINT
        assert stop.on_step_end(None, None, TrainerControl()).should_training_stop
        stop._received_at -= GracefulStop.INSIST_AFTER + 0.1
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        stop.restore()


@pytest.mark.parametrize("world_size, accepted", [("1", False), ("2", True)])
def test_the_grpo_batch_rule_counts_the_launch_processes(monkeypatch, world_size, accepted):
    monkeypatch.setenv("WORLD_SIZE", world_size)
    settings = {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 1, "num_generations": 8}
    config = PipelineConfig.from_dict({"grpo_training": settings})
    if accepted:
        assert check_config(config).grpo_training.num_generations == 8  # 4 x 2 processes = one group of 8
    else:
        with pytest.raises(ConfigError, match=r"4 x 1 x 1 = 4 must be divisible by num_generations = 8"):
            check_config(config)


@pytest.mark.parametrize("launcher, prefix", [
    ("none", "uv run python run_training.py"),
    ("accelerate", "uv run accelerate launch <the same launch options> run_training.py"),
    ("torchrun", "uv run torchrun <the same launch options> run_training.py"),
])
def test_resume_command_repeats_the_launch(launcher, prefix):
    assert resume_command(["--config", "c.yaml"], launcher) == f"{prefix} --config c.yaml --resume"


@pytest.mark.parametrize("settings, message", [
    ({"vllm_server_port": 0}, "vllm_server_port: must be a TCP port"),
    ({"vllm_server_port": 70000}, "vllm_server_port: must be a TCP port"),
    ({"vllm_server_timeout": 0}, "vllm_server_timeout: must be > 0"),
    ({"vllm_server_host": " "}, "vllm_server_host: must name"),
    ({"vllm_mode": "server", "use_vllm": False}, "vllm_mode: server generates with vLLM"),
])
def test_vllm_server_settings_are_checked(settings, message):
    with pytest.raises(ConfigError, match=message):
        PipelineConfig.from_dict({"grpo_training": settings})


def test_the_unsloth_backend_cannot_use_a_vllm_server():
    config = PipelineConfig.from_dict({"model": {"backend": "unsloth"}, "grpo_training": {"vllm_mode": "server"}})
    with pytest.raises(ConfigError, match="grpo_training.vllm_mode: server, but Unsloth generates with its own"):
        get_backend("unsloth").check_config(config)


def test_only_the_hf_backend_in_server_mode_waits_for_a_server(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    server = PipelineConfig.from_dict({"grpo_training": {"vllm_mode": "server", "use_vllm": True}})
    hf = get_backend("hf")
    assert hf.rollouts(server) == "trl_server"
    assert hf.rollouts(server.with_overrides(["grpo_training.vllm_mode=colocate"])) == "trl_colocate"
    assert hf.rollouts(server.with_overrides(["grpo_training.use_vllm=null"])) == "generate"  # CPU: no vLLM
    assert get_backend("unsloth").rollouts(server) == "generate"  # no CUDA: Unsloth has no engine to serve from


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_running_server_is_found():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        wait_for_server(GRPOTrainingConfig.of(vllm_server_port=server.server_address[1], vllm_server_timeout=5))
    finally:
        server.shutdown()


def test_a_missing_server_stops_the_run_in_one_line_after_the_timeout():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(PipelineError) as caught:
        wait_for_server(GRPOTrainingConfig.of(vllm_server_port=port, vllm_server_timeout=0.5), poll_seconds=0.1)
    message = str(caught.value)
    assert f"no vLLM server answers at http://127.0.0.1:{port}/health after 0.5 s" in message
    assert "trl vllm-serve" in message and "\n" not in message
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(("backend", "processes", "refused"), [("unsloth", 2, True), ("unsloth", 1, False), ("hf", 2, False)])
def test_the_unsloth_backend_is_refused_in_a_multi_process_launch(monkeypatch, tmp_path, backend, processes, refused):
    from llm_finetuning.runtime.distributed import read_launch
    from llm_finetuning.session import run_files

    record = {"num_processes": processes, "launcher": "torchrun", "zero_stage": None}
    monkeypatch.setattr(run_files, "process_record", lambda launch: record)  # the group's size, as if launched
    recorder = RunRecorder.start(tmp_path, resume=False)
    if refused:
        with pytest.raises(PipelineError, match="model.backend=hf"):
            run_files.check_processes(get_backend(backend), recorder, read_launch({}))
    else:
        run_files.check_processes(get_backend(backend), recorder, read_launch({}))
    assert recorder.summary["processes"] == record
