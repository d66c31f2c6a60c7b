"""Check what this machine can run: Python, torch/CUDA, the training stack, the backend `auto` picks, disk, Hub.

    uv run python check.py [--config configs/default_config.yaml]

Exits 0 when at least the CPU path can run, 1 (naming the missing package) otherwise.
"""

import sys

from llm_finetuning.tools.check import main

if __name__ == "__main__":
    sys.exit(main())
