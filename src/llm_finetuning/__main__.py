"""``python -m llm_finetuning``: the ``llm-finetune`` command (``app.py``)."""

import sys

from .app import entry

sys.exit(entry())
