"""``report.html``: one page to open after a run, beside ``summary.json``, read from it alone.

It holds the before/after table (the cells the console prints), what the model wrote on the same held-out
problems before SFT, after SFT and after GRPO, the training plot, the time each phase took, and the settings
that mattered: every entry of the summary that says what was chosen and why (``backend`` with
``backend_reason``, ``engine`` with ``engine_reason``, ``importance_sampling`` with its ``reason``; an entry
added later in either shape shows up the same way), the processes, the device, and each phase's trainer
settings as the trainer used them.

The page is self-contained (the plot is embedded as base64, the style inline), every text from the model or
the data is HTML-escaped, and it is written atomically. ``RunRecorder.finish`` writes it at the end of a run,
complete or stopped, and again when ``--resume`` completes it.

    >>> summary = json.loads(Path("outputs/tiny/summary.json").read_text())  # doctest: +SKIP
    >>> write_report(Path("outputs/tiny"), summary)                            # doctest: +SKIP
"""

from __future__ import annotations

import base64
import html
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..runtime.atomic_io import write_text_atomic
from .run_outputs import EVAL_KEYS, STAGE_NAMES, held_out_count, shown_stages, table_rows

__all__ = ["render_report", "write_report"]

# Summary entries the page shows in sections of their own, or not at all.
_OWN_SECTIONS = {"eval", "samples", "phases", "versions", "seconds_total", "complete", "save_path"}

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232a; margin: 0;
       background: #f6f7f9; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 10px; border-bottom: 1px solid #d5dae0; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.meta { color: #56606b; margin: 0 0 4px; }
.status { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; font-size: 13px; }
.complete { background: #dcf2e3; color: #17622f; } .stopped { background: #fbe7c6; color: #7a4a00; }
table { border-collapse: collapse; background: #fff; margin: 4px 0 8px; }
th, td { border: 1px solid #d5dae0; padding: 5px 10px; text-align: left; vertical-align: top; }
th { background: #eef1f4; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.problem { background: #fff; border: 1px solid #d5dae0; border-radius: 6px; padding: 10px 14px;
           margin: 12px 0; }
.problem table { width: 100%; }
pre { margin: 0; white-space: pre-wrap; word-break: break-word; font: 13px/1.4 ui-monospace, Menlo, Consolas,
      monospace; max-height: 18em; overflow: auto; }
.right { color: #17622f; font-weight: 600; } .wrong { color: #a12020; font-weight: 600; }
.why { color: #56606b; }
.question { white-space: pre-wrap; margin: 0 0 4px; font-size: 15px; }
td.reward { white-space: nowrap; }
.small { font-size: 13px; }
img { max-width: 100%; background: #fff; border: 1px solid #d5dae0; }
.settings { display: flex; gap: 16px; flex-wrap: wrap; align-items: flex-start; }
"""


def write_report(output_dir: Path, summary: Mapping[str, Any]) -> Path:
    """``<output_dir>/report.html`` from the summary and ``plots/training.png``, written atomically."""
    plot = output_dir / "plots" / "training.png"
    page = render_report(
        summary, title=str(output_dir), plot_png=plot.read_bytes() if plot.is_file() else None
    )
    path = output_dir / "report.html"
    write_text_atomic(path, page)
    return path


def render_report(summary: Mapping[str, Any], *, title: str, plot_png: bytes | None = None) -> str:
    """The page as one HTML string."""
    body = [
        _header(summary, title),
        "<h2>Before and after</h2>", _table(summary),
        "<h2>What the model writes</h2>", _samples(summary),
        "<h2>Training</h2>", _plot(plot_png),
        "<h2>Time</h2>", _times(summary),
        "<h2>Settings that mattered</h2>", _choices(summary), _phase_settings(summary),
        _versions(summary),
    ]  # fmt: skip
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Run report: {_e(title)}</title><style>{STYLE}</style></head>\n"
        "<body><main>\n" + "\n".join(body) + "\n</main></body></html>\n"
    )


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _header(summary: Mapping[str, Any], title: str) -> str:
    complete = summary.get("complete")
    status = ('<span class="status complete">complete</span>' if complete else
              '<span class="status stopped">stopped before the end: continue it with --resume</span>')  # fmt: skip
    return (
        f"<h1>Run report: {_e(title)}</h1>"
        f'<p class="meta">{status} &nbsp; {_duration(summary.get("seconds_total", 0.0))} in all &nbsp; '
        f"written {_e(time.strftime('%Y-%m-%d %H:%M'))}</p>"
        f'<p class="meta">adapter: {_e(summary.get("save_path") or "none yet")}</p>'
    )


def _table(summary: Mapping[str, Any]) -> str:
    head = "".join(f"<th>{_e(STAGE_NAMES[stage])}</th>" for stage in shown_stages(summary))
    rows = "".join(
        f"<tr><th>{_e(label)}</th>" + "".join(f'<td class="num">{_e(cell)}</td>' for cell in cells) + "</tr>"
        for label, cells in table_rows(summary)
    )
    return (f"<table><tr><th></th>{head}</tr>{rows}</table>"
            f'<p class="small why">greedy figures on {held_out_count(summary)} held-out problems; sampled: the '
            "answer accuracy of evaluation.sampled_k samples per problem at GRPO's sampling settings</p>")  # fmt: skip


def _samples(summary: Mapping[str, Any]) -> str:
    stages = [(stage, summary.get("samples", {}).get(stage) or []) for stage in EVAL_KEYS]
    problems: dict[int, dict[str, Any]] = {}
    for stage, samples in stages:
        for sample in samples:
            problems.setdefault(sample["index"], {"sample": sample, "stages": {}})["stages"][stage] = sample
    if not problems:
        return '<p class="why">No sample answers (evaluation.sample_answers is 0, or no evaluation ran).</p>'
    return "\n".join(_problem(index, entry) for index, entry in sorted(problems.items()))


def _problem(index: int, entry: Mapping[str, Any]) -> str:
    first = entry["sample"]
    rows = []
    for stage in EVAL_KEYS:
        sample = entry["stages"].get(stage)
        if sample is None:
            continue
        verdict = (
            '<span class="right">right</span>' if sample["correct"] else '<span class="wrong">wrong</span>'
        )
        parts = "<br>".join(f"{_e(name)} {_number(value)}" for name, value in sample["rewards"].items())
        answer = "(none)" if sample["answer"] is None else sample["answer"]
        rows.append(
            f"<tr><th>{_e(STAGE_NAMES[stage])}</th><td><pre>{_e(sample['completion'])}</pre></td>"
            f"<td>{_e(answer)}<br>{verdict}</td>"
            f'<td class="num reward"><b>{_number(sample["total_reward"])}</b><br>'
            f'<span class="small why">{parts}</span></td></tr>'
        )
    return (
        f'<div class="problem"><h3>Problem {index}</h3><p class="question">{_e(first["question"])}</p>'
        f'<p class="small">gold answer: <b>{_e(first["gold"])}</b></p>'
        "<table><tr><th>stage</th><th>the model wrote</th><th>answer</th><th>reward</th></tr>"
        + "".join(rows)
        + "</table></div>"
    )


def _plot(png: bytes | None) -> str:
    if png is None:
        return '<p class="why">No plot (plots/training.png was not drawn).</p>'
    encoded = base64.b64encode(png).decode("ascii")
    return f'<img alt="training curves" src="data:image/png;base64,{encoded}">'


def _times(summary: Mapping[str, Any]) -> str:
    phases = summary.get("phases") or {}
    total = float(summary.get("seconds_total") or 0.0)
    rows, spent = [], 0.0
    for phase, name in (("sft", "SFT"), ("grpo", "GRPO")):
        record = phases.get(phase) or {}
        seconds = float(record.get("seconds") or 0.0)
        spent += seconds
        note = "skipped" if record.get("skipped") else f"{record.get('steps', 0)} steps"
        if record.get("resumed_from"):
            note += f", resumed from {record['resumed_from']}"
        rows.append((name, seconds, note))
    rows.append(("the rest", max(total - spent, 0.0), "loading, data, evaluations, saving"))
    body = "".join(f'<tr><th>{_e(name)}</th><td class="num">{_duration(seconds)}</td><td>{_e(note)}</td></tr>'
                   for name, seconds, note in rows)  # fmt: skip
    return f'<table>{body}<tr><th>in all</th><td class="num">{_duration(total)}</td><td></td></tr></table>'


def _choices(summary: Mapping[str, Any]) -> str:
    """Every other summary entry: what it is, and why where the summary says (``X_reason`` or a ``reason``)."""
    rows = []
    for key, value in summary.items():
        if key in _OWN_SECTIONS or key.endswith("_reason"):
            continue
        why = summary.get(f"{key}_reason")
        if isinstance(value, Mapping) and "reason" in value:
            why = value["reason"]
            value = {k: v for k, v in value.items() if k != "reason"}
        rows.append(f"<tr><th>{_e(key.replace('_', ' '))}</th><td>{_e(_plain(value))}</td>"
                    f'<td class="why">{_e(why or "")}</td></tr>')  # fmt: skip
    return "<table><tr><th></th><th>what</th><th>why</th></tr>" + "".join(rows) + "</table>"


def _phase_settings(summary: Mapping[str, Any]) -> str:
    tables = []
    for phase, name in (("sft", "SFT"), ("grpo", "GRPO")):
        settings = ((summary.get("phases") or {}).get(phase) or {}).get("settings")
        if not settings:
            continue
        rows = "".join(
            f"<tr><th>{_e(key)}</th><td>{_e(_plain(value))}</td></tr>" for key, value in settings.items()
        )
        tables.append(
            f"<div><h3>{name}: the trainer's settings as it used them</h3><table>{rows}</table></div>"
        )
    return f'<div class="settings">{"".join(tables)}</div>' if tables else ""


def _versions(summary: Mapping[str, Any]) -> str:
    versions = summary.get("versions") or {}
    rows = "".join(
        f"<tr><th>{_e(name)}</th><td>{_e(version)}</td></tr>" for name, version in versions.items()
    )
    return f"<details><summary>package versions</summary><table>{rows}</table></details>" if rows else ""


def _plain(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        return "; ".join(f"{key.replace('_', ' ')}: {_plain(item)}" for key, item in value.items())
    if isinstance(value, Sequence) and not isinstance(value, str):
        return ", ".join(_plain(item) for item in value)
    return str(value) if not isinstance(value, float) else f"{value:g}"


def _number(value: Any) -> str:
    return "-" if value is None else _e(f"{value:.2f}")


def _duration(seconds: float) -> str:
    return tqdm.format_interval(seconds)  # as the console's progress views write it
