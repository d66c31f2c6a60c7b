"""``python -m llm_finetuning.infer``: an alias of ``python -m llm_finetuning.tools.infer`` (and its API).

    >>> from llm_finetuning.infer import load_trained       # doctest: +SKIP
"""

import sys

from .tools.infer import TrainedModel, load_trained, main

__all__ = ["TrainedModel", "load_trained", "main"]

if __name__ == "__main__":
    sys.exit(main())
