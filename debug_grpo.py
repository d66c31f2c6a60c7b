"""Check why GRPO is (not) learning: diversity, tags, reward spread and truncation of sampled groups.

    uv run python debug_grpo.py --config configs/tiny.yaml           # table and hints
    uv run python debug_grpo.py --config configs/tiny.yaml --json    # machine-readable
    uv run python debug_grpo.py --help                               # every flag

The work is in src/llm_finetuning/tools/debug_grpo.py.
"""

import sys

from llm_finetuning.tools.debug_grpo import main

if __name__ == "__main__":
    sys.exit(main())
