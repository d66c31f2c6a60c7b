"""``python -m llm_finetuning.export``: an alias of ``python -m llm_finetuning.tools.export``."""

import sys

from .tools.export import export, main

__all__ = ["export", "main"]

if __name__ == "__main__":
    sys.exit(main())
