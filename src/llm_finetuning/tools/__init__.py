"""Tools around training: thin commands over the library (argument parsing and printing here, the work in
the packages the pipeline also uses).

evaluate.py    score a model on the run's held-out problems or a benchmark (accuracy, pass@k, breakdowns)
infer.py       answer a question from the command line, interactively, or from a program (load_trained)
export.py      LoRA merged into 16-bit weights, GGUF (Unsloth backend), upload to the Hub
debug_grpo.py  why GRPO is (not) learning: diversity, tags, reward spread and truncation of sampled groups
group_stats.py the pure figures debug_grpo reports
check.py       what this machine can run: packages, CUDA, the backend auto picks, disk, Hub
common.py      what the tools share: config flags, the run's trained weights, model loading
train.py       the pipeline's command line (``run_training.py``, ``llm-finetune train``)
app.py         ``llm-finetune <command>``: every command above by name

Run ``evaluate``, ``infer`` and ``export`` as ``python -m llm_finetuning.tools.<name>``, and ``debug_grpo.py``
and ``check.py`` at the repository root.
"""
