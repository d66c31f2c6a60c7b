"""What the Unsloth lanes share: Unsloth must be imported before trl and transformers, so a lane runs its command
lines in one driver subprocess (the lane's test module run as a script) that imports unsloth first; the tests
then read the driver's record.

    record = driver_record(__file__, root, timeout=1200)   # in the lane's module-scoped fixture
    step = run_step(cli.main, argv)                         # in the driver: exit code, seconds, output
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def driver_record(script: str, root: Path, timeout: int, **env: str) -> dict:
    """Run ``script`` as the lane's driver on ``root``; its ``lane.json`` with ``root`` added. Skips the lane
    with Unsloth's reason where Unsloth declines to run on this machine."""
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
    driver = subprocess.run([sys.executable, script, str(root)], cwd=ROOT, env=environment, capture_output=True,
                            text=True, timeout=timeout, check=False)  # fmt: skip
    assert driver.returncode == 0, driver.stderr[-3000:]
    record = json.loads((root / "lane.json").read_text())
    if "declined" in record:
        pytest.skip(f"Unsloth does not run on this machine: {record['declined']}")
    return {**record, "root": root}


def run_step(main, argv: list[str]) -> dict:
    """Call a command line's ``main`` in this process; its exit code, seconds and printed output."""
    buffer = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse errors
            rc = exc.code
        except Exception as exc:  # noqa: BLE001 - a crash is recorded for the test to show
            import traceback

            traceback.print_exc()
            rc = f"crashed: {type(exc).__name__}"
    return {"rc": rc, "seconds": round(time.perf_counter() - started, 1), "output": buffer.getvalue()}


def passed(lane: dict, name: str) -> dict:
    """The driver's record of step ``name``, which must have exited 0."""
    step = lane["steps"][name]
    assert step["rc"] == 0, f"{name} exited {step['rc']}:\n{step['output'][-3000:]}"
    return step
