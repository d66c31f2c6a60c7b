"""``python -m llm_finetuning``: the ``llm-finetune`` command (``tools/app.py``)."""

import sys

from .tools.app import entry

sys.exit(entry())
