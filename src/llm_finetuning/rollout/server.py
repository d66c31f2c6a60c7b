"""GRPO's generation on a separate vLLM server (``trl vllm-serve``): make sure it answers before anything loads.

With ``grpo_training.vllm_mode: server`` TRL sends every generation round to a server on its own GPU(s) and
pushes the trained weights to it after each optimiser step. TRL first looks for the server when GRPO starts,
which comes after loading the model, SFT and an evaluation: hours into a run. ``wait_for_server`` asks the
server's health endpoint (the one TRL's client asks) at the start of the run instead, waiting up to
``vllm_server_timeout`` seconds for a server that is still starting, and otherwise stops with one line that
names the address and the command that starts a server. The run-book is in docs/gpu.md.

    >>> server_url(GRPOTrainingConfig.of(vllm_server_host="10.0.0.5", vllm_server_port=8001))
    'http://10.0.0.5:8001'
"""

from __future__ import annotations

import http.client
import logging
import time
import urllib.error
import urllib.request

from ..config import GRPOTrainingConfig
from ..errors import PipelineError

__all__ = ["server_url", "wait_for_server"]

logger = logging.getLogger(__name__)


def server_url(section: GRPOTrainingConfig) -> str:
    return f"http://{section.vllm_server_host}:{section.vllm_server_port}"


def wait_for_server(section: GRPOTrainingConfig, poll_seconds: float = 2.0) -> None:
    """Return once ``<server>/health`` answers 200; a ``PipelineError`` after ``vllm_server_timeout`` seconds."""
    url = f"{server_url(section)}/health"
    deadline = time.monotonic() + section.vllm_server_timeout
    logger.info("waiting for the vLLM server at %s", url)
    while True:
        reason = _ask(url, timeout=min(10.0, section.vllm_server_timeout))
        if reason is None:
            logger.info("the vLLM server at %s answers", server_url(section))
            return
        if time.monotonic() >= deadline:
            raise PipelineError(
                f"grpo_training.vllm_server_host/vllm_server_port: no vLLM server answers at {url} after "
                f"{section.vllm_server_timeout:g} s ({reason}); start one with `trl vllm-serve --model <base model> "
                f"--port {section.vllm_server_port}` (docs/gpu.md) or fix the address"
            )
        time.sleep(max(0.0, min(poll_seconds, deadline - time.monotonic())))


def _ask(url: str, timeout: float) -> str | None:
    """None when the server answers 200, else why not (one line)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return None if response.status == 200 else f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        return str(getattr(exc, "reason", exc)) or type(exc).__name__
