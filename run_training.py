"""Run the whole pipeline: load model -> SFT -> free memory -> GRPO -> save the LoRA adapter.

    uv run python run_training.py --config configs/tiny.yaml      # offline CPU demo
    uv run python run_training.py                                  # the real job (GPU)
    uv run python run_training.py --help                           # every flag
"""

import sys

from llm_finetuning.tools.train import main

if __name__ == "__main__":
    sys.exit(main())
