"""``python -m llm_finetuning.evaluate``: an alias of ``python -m llm_finetuning.tools.evaluate``."""

import sys

from .tools.evaluate import evaluate, main

__all__ = ["evaluate", "main"]

if __name__ == "__main__":
    sys.exit(main())
