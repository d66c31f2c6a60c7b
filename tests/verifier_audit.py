"""Every reviewed reasoning-gym task's verifier on hostile answers, watching for model text reaching Python's compiler.

``python tests/verifier_audit.py parsers`` installs the parsers a worker's copy installs for a call
(``sandbox/parsers.py``) first, as the sandbox does; ``python tests/verifier_audit.py plain`` does not (the
positive control: there the tasks that ``eval`` or ``parse_expr`` the answer must show up). An audit hook records
each ``exec`` of code (``eval`` and ``exec`` both raise it) whose names or constants carry the answers' marker, and
a watch on ``compile`` records each code object made from source that carries it (a syntax tree, which the
parsers read, is not code): code made from what the model wrote. Prints ``{task: [events]}`` as JSON (tasks with
none left out), and how many answers were scored.
"""

import ast
import builtins
import json
import sys
import warnings

MARK = "zqhostile"
SHAPES = (
    "{m}", "[{m}]", "[[{m}]]", "({m})", "{m} + 1", "1*{m}", "{m}(1)", "'{m}'", "{{{m}}}", "{m}: {g}", "{g}, {m}",
    "{m}={g}", "{g} {m}", "{m} {g}", "{g}+{m}", "[{g}, {m}]", "{g}\n{m}", "{m}\n{g}", "{gm}{m}",
    "__import__('os').getenv('{m}')", "[__import__('os').getenv('{m}')]", "{g} - __import__('os').getenv('{m}')",
)  # fmt: skip


def main(install: bool) -> None:
    warnings.simplefilter("ignore")
    from llm_finetuning.sandbox import parsers
    from llm_finetuning.tasks import gym
    from llm_finetuning.tasks.gym_safety import ALLOWED

    entries = {task: [gym.task_dataset(task, {}, seed=7, size=3)[i] for i in range(3)] for task in sorted(ALLOWED)}
    datasets = {task: gym.task_dataset(task, {}, seed=7, size=3) for task in entries}  # built before the parsers
    if install:
        parsers.reads_model_text("reasoning_gym")
        parsers.install(parsers.replacements())
    found: dict[str, set[str]] = {}
    current: list[str | None] = [None]

    def watch(event: str, args: tuple) -> None:
        if current[0] is not None and event == "exec":
            code = args[0]
            if MARK in " ".join(map(str, (*getattr(code, "co_names", ()), *getattr(code, "co_consts", ())))):
                found.setdefault(current[0], set()).add("exec")

    compile_ = builtins.compile

    def watched_compile(source, filename, mode, flags=0, *args, **kwargs):
        text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
        if current[0] is not None and not flags & ast.PyCF_ONLY_AST and isinstance(text, str) and MARK in text:
            found.setdefault(current[0], set()).add("compile")
        return compile_(source, filename, mode, flags, *args, **kwargs)

    sys.addaudithook(watch)
    builtins.compile = watched_compile
    scored = 0
    for task, rows in entries.items():
        for entry in rows:
            gold = str(entry["answer"])
            for shape in SHAPES:
                current[0] = task
                try:
                    datasets[task].score_answer(shape.format(m=MARK, g=gold, gm=gold[:-1]), entry)
                except Exception:  # noqa: BLE001, S110 - a verifier that raises on junk is fine here
                    pass
                current[0] = None
                scored += 1
    print("\n" + json.dumps({"found": {task: sorted(events) for task, events in found.items()}, "scored": scored}))  # after any dots a task printed


if __name__ == "__main__":
    main(sys.argv[1] == "parsers")
