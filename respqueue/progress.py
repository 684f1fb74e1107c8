"""Progress output for long command-line work (backup, restore, repair, history export, enqueue).

On a terminal (the stream's ``isatty()``) a bar is redrawn in place with ``\\r``::

    backup: copying [##########..........] 52% 12.4/23.8 MiB 31.0 MiB/s ETA 0:00

at most ten times a second, fitted to the terminal's width, and finished with a newline by :meth:`Progress.close`. Anywhere else
(a pipe, a log file, CI) it writes a plain line every ``interval`` seconds (2 s by default; the
environment variable ``RESPQUEUE_PROGRESS_INTERVAL`` overrides it, 0 means on every update)::

    backup: copying: 12.4/23.8 MiB (52%), 31.0 MiB/s, ETA 0:00

and, when it wrote any such line, a last one at :meth:`Progress.close` (``backup: copying: done,
23.8/23.8 MiB (100%), 30.2 MiB/s, in 0:01``), so work that finishes within the interval prints
nothing. ``quiet`` silences it. It writes to stderr: a command's own
output (its summary line) stays on stdout, unchanged. No dependency.
"""

from __future__ import annotations

import io
import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any

BAR_WIDTH = 20
TTY_REDRAW_S = 0.1
DEFAULT_INTERVAL_S = 2.0


def _interval_from_env() -> float:
    raw = os.environ.get("RESPQUEUE_PROGRESS_INTERVAL", "")
    try:
        v = float(raw)
    except ValueError:
        return DEFAULT_INTERVAL_S
    return v if v >= 0 else DEFAULT_INTERVAL_S


def _columns(stream: IO[str]) -> int:
    """The terminal's width (80 when it does not say)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return 80


def format_count(n: float, unit: str) -> str:
    """``1,234 rows``, or ``12.4 MiB`` for the unit ``B``."""
    if unit == "B":
        return format_bytes(n)
    return f"{n:,.0f} {unit}" if unit else f"{n:,.0f}"


def format_bytes(n: float) -> str:
    for u in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or u == "GiB":
            return f"{n:.0f} {u}" if u == "B" else f"{n:.1f} {u}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover - the loop returns


def format_eta(seconds: float) -> str:
    s = int(seconds + 0.5)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Progress of one piece of work: ``done`` out of ``total`` (``None``: unknown) ``unit``s."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        unit: str = "",
        *,
        quiet: bool = False,
        stream: IO[str] | None = None,
        interval: float | None = None,
        tty: bool | None = None,
        clock: Any = time.monotonic,
        columns: int | None = None,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            try:
                tty = bool(self.stream.isatty())
            except (AttributeError, ValueError):
                tty = False
        self.tty = tty
        self.columns = columns if columns is not None else (_columns(self.stream) if tty else 80)
        self.interval = _interval_from_env() if interval is None else interval
        self.clock = clock
        self.start = clock()
        self.last_out = self.start
        self.lines = 0  # plain lines written
        self.drawn = False  # a bar is on the terminal line
        self.closed = False

    # -- feeding it ---------------------------------------------------------------------------
    def update(self, n: int = 1) -> None:
        """``n`` more units done."""
        self.set(self.done + n)

    def set(self, done: int) -> None:
        """``done`` units done so far."""
        self.done = done
        if self.quiet or self.closed:
            return
        now = self.clock()
        if self.tty:
            if not self.drawn or now - self.last_out >= TTY_REDRAW_S:
                self._draw(now)
        elif now - self.last_out >= self.interval:
            self._line(now)

    def set_total(self, total: int | None) -> None:
        self.total = total

    def close(self) -> None:
        """Finish: the bar's final state and a newline, or a last plain line if any was written."""
        if self.closed:
            return
        self.closed = True
        if self.quiet:
            return
        now = self.clock()
        if self.tty:
            self._draw(now, final=True)
            self.stream.write("\n")
            self.stream.flush()
        elif self.lines:
            self.stream.write(self.render_line(now, final=True) + "\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def abort(self) -> None:
        """The work failed: no final state; a bar's line is ended so an error message starts on its own."""
        if self.closed:
            return
        self.closed = True
        if self.tty and self.drawn and not self.quiet:
            self.stream.write("\n")
            self.stream.flush()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    # -- what it writes -----------------------------------------------------------------------
    def rate(self, now: float | None = None) -> float:
        elapsed = (self.clock() if now is None else now) - self.start
        return self.done / elapsed if elapsed > 0 else 0.0

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left at the average rate so far; None when the total or the rate is unknown."""
        if self.total is None:
            return None
        if self.done >= self.total:
            return 0.0
        r = self.rate(now)
        return (self.total - self.done) / r if r > 0 else None

    def _parts(self, now: float, final: bool = False) -> tuple[str, str, str, str]:
        """(fraction text, percentage, rate, ETA or, once finished, the time taken)."""
        if self.total is not None and self.unit == "B":
            done, total = format_bytes(self.done), format_bytes(self.total)
            if done.split()[1] == total.split()[1]:  # 12.4/23.8 MiB
                done = done.split()[0]
            amount = f"{done}/{total}"
        elif self.total is not None:
            amount = f"{self.done:,}/{self.total:,}" + (f" {self.unit}" if self.unit else "")
        else:
            amount = format_count(self.done, self.unit)
        pct = f"{100 * self.done / self.total:3.0f}%" if self.total else ""
        rate = format_count(self.rate(now), self.unit) + "/s"
        if final:
            return amount, pct, rate, "in " + format_eta(now - self.start)
        eta = self.eta(now)
        return amount, pct, rate, "" if eta is None else "ETA " + format_eta(eta)

    def render_bar(self, now: float | None = None, final: bool = False) -> str:
        """The terminal line; the bar narrows (down to 5, else it goes) so the line fits ``columns - 1``."""
        now = self.clock() if now is None else now
        amount, pct, rate, eta = self._parts(now, final)
        rest = [p for p in (pct.strip(), amount, rate, eta) if p]
        room = self.columns - 1 - len(" ".join([self.label, *rest])) - 3
        width = min(BAR_WIDTH, room)
        if self.total and width >= 5:
            filled = min(width, int(width * self.done / self.total))
            rest.insert(0, "[" + "#" * filled + "." * (width - filled) + "]")
        return " ".join([self.label, *rest])

    def render_line(self, now: float | None = None, final: bool = False) -> str:
        now = self.clock() if now is None else now
        amount, pct, rate, eta = self._parts(now, final)
        head = f"{self.label}: {'done, ' if final else ''}{amount}" + (f" ({pct.strip()})" if pct else "")
        return ", ".join(p for p in (head, rate, eta) if p)

    def _draw(self, now: float, final: bool = False) -> None:
        # \r to the start of the line, the bar, then erase what a longer earlier bar left.
        # Cut to the terminal's width: a wrapped line could not be redrawn in place.
        self.stream.write("\r" + self.render_bar(now, final)[: max(self.columns - 1, 20)] + "\x1b[K")
        self.stream.flush()
        self.drawn = True
        self.last_out = now

    def _line(self, now: float) -> None:
        self.stream.write(self.render_line(now) + "\n")
        self.stream.flush()
        self.lines += 1
        self.last_out = now


ProgressFactory = Callable[..., Progress]


def silent(label: str, total: int | None = None, unit: str = "") -> Progress:
    """A :class:`Progress` that writes nothing: the default of library functions (a server's scheduled
    backups, the tests) that take a ``progress`` factory."""
    return Progress(label, total, unit, quiet=True)


def for_cli(quiet: bool = False) -> ProgressFactory:
    """The factory the command line passes: progress on stderr unless ``--quiet``."""

    def make(label: str, total: int | None = None, unit: str = "") -> Progress:
        return Progress(label, total, unit, quiet=quiet)

    return make
