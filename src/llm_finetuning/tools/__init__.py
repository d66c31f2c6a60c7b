"""Tools around training that share the model, data, rewards and evaluation layers (issue 7).

debug_grpo.py  why GRPO is not learning: diversity, tags, reward spread and truncation of sampled groups
common.py      what every tool's command line shares: config and overrides, model loading, one-line errors

The other tools are modules run with ``python -m``: ``llm_finetuning.evaluate`` (score a model on a
dataset), ``llm_finetuning.infer`` (answer a question; ``load_trained`` / ``solve`` for programs) and
``llm_finetuning.export`` (merged weights, GGUF, Hub upload). See docs/tools.md.
"""
