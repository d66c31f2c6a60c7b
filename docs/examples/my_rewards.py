"""An example of your own rewards: plain functions with TRL's reward signature.

Use one in a config by file (a path relative to where you run the command) or by import path:

    rewards:
      rewards:
        - {name: match_format_exactly}
        - {name: "./docs/examples/my_rewards.py:brevity", weight: 0.5, params: {target_words: 30}}

Each function receives the completions (strings, or chat messages: the last message's ``content`` is the text),
the prompts, every dataset column by name (``answer`` holds the gold answer), and its ``params``; it returns one
float per completion, or ``None`` where it does not apply. It runs in a sandboxed worker process by default
(no file writes, no subprocesses, ``timeout`` seconds per call): see docs/rewards.md.
"""


def _text(completion):
    return completion if isinstance(completion, str) else completion[-1]["content"]


def brevity(completions, target_words=30, **kwargs):
    """0 at ``target_words`` words, down by the relative distance from it: a nudge towards short working."""
    return [-abs(len(_text(c).split()) - target_words) / target_words for c in completions]


def mentions_answer(completions, answer, **kwargs):
    """1.0 when the gold answer's text appears anywhere in the completion, else 0.0 (rows without an answer: None)."""
    return [None if gold is None else float(str(gold) in _text(c)) for c, gold in zip(completions, answer)]
