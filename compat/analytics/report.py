"""The analytics report: one self-contained HTML file, charts drawn as inline SVG (no JS, no CSS files).

Input is the dict ``run_analytics`` collects (lists of row dicts per table, see ``job.py``).
"""

from __future__ import annotations

import datetime as _dt
import html
import math
from collections import defaultdict
from typing import Any

PALETTE = ("#3366cc", "#dc3912", "#ff9900", "#109618", "#990099", "#0099c6", "#dd4477", "#66aa00", "#b82e2e",
           "#316395")
W, H = 760, 300
ML, MR, MT, MB = 64, 170, 36, 44


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return 10 * exp


def _fmt(v: float) -> str:
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if v == int(v):
        return str(int(v))
    return f"{v:.2f}".rstrip("0").rstrip(".")


def _time_label(ms: float) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%m-%d %H:%M")


def line_chart(series: dict[str, list[tuple[float, float]]], title: str, ylabel: str, step: bool = False) -> str:
    """A time-series line chart; x values are epoch ms."""
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img">',
           f'<title>{_e(title)}</title>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="15" font-weight="bold">{_e(title)}</text>']
    pts = [p for s in series.values() for p in s]
    if not pts:
        out.append(f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" fill="#888">no data</text></svg>')
        return "".join(out)
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    if x1 == x0:
        x0, x1 = x0 - 60000, x1 + 60000
    ylo = min(0.0, min(p[1] for p in pts))
    yhi = _nice_max(max(p[1] for p in pts))
    pw, ph = W - ML - MR, H - MT - MB

    def sx(x: float) -> float:
        return ML + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return MT + ph - (y - ylo) / (yhi - ylo) * ph

    for i in range(5):
        y = ylo + (yhi - ylo) * i / 4
        out.append(f'<line x1="{ML}" x2="{ML + pw}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#e5e5e5"/>'
                   f'<text x="{ML - 6}" y="{sy(y) + 4:.1f}" text-anchor="end" font-size="11">{_fmt(y)}</text>')
    for i in range(5):
        x = x0 + (x1 - x0) * i / 4
        out.append(f'<text x="{sx(x):.1f}" y="{MT + ph + 16}" text-anchor="middle" font-size="11">{_time_label(x)}</text>')
    out.append(f'<line x1="{ML}" x2="{ML}" y1="{MT}" y2="{MT + ph}" stroke="#444"/>'
               f'<line x1="{ML}" x2="{ML + pw}" y1="{MT + ph}" y2="{MT + ph}" stroke="#444"/>'
               f'<text x="14" y="{MT + ph / 2}" font-size="11" transform="rotate(-90 14 {MT + ph / 2})" '
               f'text-anchor="middle">{_e(ylabel)}</text>'
               f'<text x="{ML + pw / 2}" y="{H - 6}" text-anchor="middle" font-size="11">time (UTC)</text>')
    for i, (label, s) in enumerate(sorted(series.items())):
        color = PALETTE[i % len(PALETTE)]
        s = sorted(s)
        coords: list[str] = []
        for j, (x, y) in enumerate(s):
            if step and j:
                coords.append(f"{sx(x):.1f},{sy(s[j - 1][1]):.1f}")
            coords.append(f"{sx(x):.1f},{sy(y):.1f}")
        if len(s) == 1:
            out.append(f'<circle cx="{sx(s[0][0]):.1f}" cy="{sy(s[0][1]):.1f}" r="3" fill="{color}"/>')
        else:
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(coords)}"/>')
        ly = MT + 14 + 18 * i
        out.append(f'<rect x="{W - MR + 12}" y="{ly - 9}" width="12" height="12" fill="{color}"/>'
                   f'<text x="{W - MR + 30}" y="{ly + 1}" font-size="12">{_e(label[:22])}</text>')
    out.append("</svg>")
    return "".join(out)


def bar_chart(groups: list[tuple[str, dict[str, float]]], series: list[str], title: str, unit: str) -> str:
    """Horizontal grouped bars: one group per label, one bar per series."""
    n = max(1, len(groups))
    bh = 12
    gh = bh * len(series) + 10
    ml = 250
    h = MT + n * gh + MB
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" role="img">',
           f'<title>{_e(title)}</title>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="15" font-weight="bold">{_e(title)}</text>']
    vals = [v for _, d in groups for v in d.values() if v is not None]
    if not vals:
        out.append(f'<text x="{W / 2}" y="{MT + 20}" text-anchor="middle" fill="#888">no data</text></svg>')
        return "".join(out)
    vmax = _nice_max(max(vals))
    pw = W - ml - MR

    def sx(v: float) -> float:
        return ml + v / vmax * pw

    for i in range(5):
        v = vmax * i / 4
        out.append(f'<line x1="{sx(v):.1f}" x2="{sx(v):.1f}" y1="{MT}" y2="{h - MB}" stroke="#e5e5e5"/>'
                   f'<text x="{sx(v):.1f}" y="{h - MB + 16}" text-anchor="middle" font-size="11">{_fmt(v)}</text>')
    out.append(f'<text x="{ml + pw / 2}" y="{h - 8}" text-anchor="middle" font-size="11">{_e(unit)}</text>')
    for gi, (label, d) in enumerate(groups):
        y = MT + gi * gh
        out.append(f'<text x="{ml - 8}" y="{y + gh / 2 + 2}" text-anchor="end" font-size="12">{_e(label[:38])}</text>')
        for si, s in enumerate(series):
            v = d.get(s)
            if v is None:
                continue
            color = PALETTE[si % len(PALETTE)]
            out.append(f'<rect x="{ml}" y="{y + si * bh}" width="{max(0.5, sx(v) - ml):.1f}" height="{bh - 2}" '
                       f'fill="{color}"><title>{_e(label)} {_e(s)}: {_fmt(v)}</title></rect>'
                       f'<text x="{sx(v) + 4:.1f}" y="{y + si * bh + bh - 3}" font-size="10">{_fmt(v)}</text>')
    if len(series) > 1:
        for si, s in enumerate(series):
            ly = MT + 14 + 18 * si
            out.append(f'<rect x="{W - MR + 12}" y="{ly - 9}" width="12" height="12" fill="{PALETTE[si % len(PALETTE)]}"/>'
                       f'<text x="{W - MR + 30}" y="{ly + 1}" font-size="12">{_e(s)}</text>')
    out.append("</svg>")
    return "".join(out)


def _label(r: dict[str, Any]) -> str:
    return f"{r['queue']}/{r['name']}" if r.get("name") else str(r["queue"])


def _per_queue(rows: list[dict[str, Any]], value: str) -> dict[str, list[tuple[float, float]]]:
    acc: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        acc[r["queue"]][r["minute"]] += r[value] or 0
    return {q: sorted(m.items()) for q, m in acc.items()}


def _backlog_per_queue(rows: list[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    delta = _per_queue(rows, "delta")
    out = {}
    for q, pts in delta.items():
        total, cum = 0.0, []
        for x, d in pts:
            total += d
            cum.append((x, total))
        out[q] = cum
    return out


def render(data: dict[str, Any]) -> str:
    """The report's HTML."""
    summary = data.get("summary", [])
    meta = data.get("meta", {})
    lat = [(_label(r), {"wait p50": r["wait_p50"], "wait p95": r["wait_p95"], "wait p99": r["wait_p99"],
                        "run p50": r["run_p50"], "run p95": r["run_p95"], "run p99": r["run_p99"]}) for r in summary]
    reasons = sorted(data.get("failure_reasons", []), key=lambda r: (-r["count"], _label(r), r["reason"]))[:15]
    reason_groups = [(f"{_label(r)}: {r['reason'] or '(no reason)'}", {"jobs": r["count"]}) for r in reasons]
    charts = [
        line_chart(_per_queue(data.get("throughput", []), "finished"), "Throughput (jobs finished per minute)",
                   "jobs / min"),
        line_chart(_backlog_per_queue(data.get("backlog", [])), "Backlog (added minus finished, cumulative)",
                   "jobs", step=True),
        bar_chart(lat, ["wait p50", "wait p95", "wait p99", "run p50", "run p95", "run p99"],
                  "Latency percentiles per queue/name", "milliseconds"),
        bar_chart(reason_groups, ["jobs"], "Top failure reasons", "failed jobs"),
    ]
    cols = ["queue", "name", "added", "completed", "failed", "stalled", "retried", "throughput_per_min",
            "wait_p50", "wait_p95", "wait_p99", "run_p50", "run_p95", "run_p99"]
    trs = []
    for r in summary:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append("<td>-</td>" if v is None else
                         f"<td>{_e(_fmt(v) if isinstance(v, float) else v)}</td>")
        trs.append("<tr>" + "".join(cells) + "</tr>")
    retry_rows = "".join(
        f"<tr><td>{_e(_label(r))}</td><td>{r['attempts_made']}</td><td>{r['jobs']}</td></tr>"
        for r in data.get("retries", []))
    gen = _dt.datetime.fromtimestamp(meta.get("generated_ms", 0) / 1000, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    style = ("body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:12px 0}"
             "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:right}"
             "th{background:#f2f2f2}td:first-child,td:nth-child(2){text-align:left}"
             ".charts svg{display:block;margin:12px 0;border:1px solid #eee}")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>respqueue job analytics</title>"
        f"<style>{style}</style></head><body>"
        f"<h1>respqueue job analytics</h1><p>Source: {_e(meta.get('source', ''))} &middot; generated {gen}"
        f" &middot; Spark {_e(meta.get('spark', ''))} &middot; {meta.get('seconds', 0)} s</p>"
        "<h2>Per queue and job name</h2><table><tr>" + "".join(f"<th>{_e(c)}</th>" for c in cols) + "</tr>"
        + "".join(trs) + "</table><p>Times in ms; percentiles are exact (Spark <code>percentile</code>).</p>"
        "<div class=\"charts\">" + "".join(charts) + "</div>"
        "<h2>Retry distribution (attempts made)</h2><table><tr><th>queue/name</th><th>attempts</th><th>jobs</th></tr>"
        + retry_rows + "</table></body></html>\n"
    )


def write_report(data: dict[str, Any], path: str) -> str:
    """Render and write the report; return its path."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(data))
    return path
