"""The red-team suite's positive control: each attack evaluated with the real ``eval`` in a plain, unconfined process,
where it must do what it tries, so that the sandbox's results cannot pass vacuously.

Reads ``[[code, timeout], ...]`` as JSON on stdin; forks one child per attack (the control's own state stays
clean), which evaluates the code, writes what came of it on a pipe, closes it, then lingers a moment and exits the
normal way (so threads, timers and exit handlers the attack left get their chance to act). Writes, as JSON to the
file named by its argument (stdout is where forged replies land), per attack: the raw bytes the pipe carried
(decoded) and whether the attack overran its timeout.
"""

import json
import os
import select
import signal
import sys
import time

LINGER_S = 1.5


def run(code: str, timeout: float) -> dict:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            result = "value " + repr(eval(code))
        except BaseException as exc:  # noqa: BLE001
            result = f"raised {type(exc).__name__}: {exc}"
        os.write(write_end, result.encode("utf-8", "replace"))
        os.close(write_end)
        time.sleep(LINGER_S)
        sys.exit(0)  # exit handlers run
    os.close(write_end)
    output, deadline = b"", time.monotonic() + timeout
    while select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))[0]:
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        output += chunk
    else:
        os.kill(pid, signal.SIGKILL)
        os.close(read_end)
        return {"output": output.decode("utf-8", "replace"), "timed_out": True, "pid": pid}
    os.close(read_end)
    return {"output": output.decode("utf-8", "replace"), "timed_out": False, "pid": pid}


def main(results_file: str) -> None:
    results = [run(code, timeout) for code, timeout in json.load(sys.stdin)]
    time.sleep(LINGER_S + 0.5)  # the children act on what they left, then exit
    for result in results:
        try:
            os.kill(result.pop("pid"), signal.SIGKILL)
        except ProcessLookupError:
            pass
    with open(results_file, "w", encoding="utf-8") as out:
        json.dump(results, out)


if __name__ == "__main__":
    main(sys.argv[1])
