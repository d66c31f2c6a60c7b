"""What a run shows and leaves behind: progress on the console, ``summary.json``, ``metrics.jsonl``, the plot,
``report.html`` and the experiment trackers.

progress.py     one progress view per phase, a compact metrics line, sample answers
run_outputs.py  summary.json, metrics.jsonl and run_state.json, written as the run goes
plots.py        plots/training.png from metrics.jsonl
report.py       report.html, read from summary.json alone
trackers.py     TensorBoard, Weights & Biases, ...: the trainers' logs plus every evaluation
"""
