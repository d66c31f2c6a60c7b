"""The process a run lives in: who it is among several, what the machine offers, where it logs, and the files it
writes so that a crash leaves the previous version whole.

distributed.py    rank, world size, barriers and turns in a multi-process launch
environment.py    package versions, the device in a line, disk and Hub reachability (``llm-finetune check``)
hardware.py       what the machine offers, probed once: CUDA GPUs, whether vLLM loads
peak_memory.py    each part of a run's peak resident memory, child processes included
heap.py           the C heap's free pages handed back to the system, between phases and every second of a run
periodic.py       a call repeated every few seconds in a daemon thread (the memory's sampling and trimming)
logging_setup.py  one logger per module, on the console and in ``<output_dir>/training.log``
run_lock.py       one run per output folder
atomic_io.py      small files written whole or not at all
trl_patches.py    every internal of TRL the project replaces, with the TRL version it was written for

Nothing here imports the layers above it (model, data, training): they all import it.
"""
