"""The replication backlog: the last ``size`` bytes of the replication stream, kept as whole frames.

Offsets count bytes of the stream, as Redis's: a frame occupies the bytes ``(start, end]`` and a
node that applied it is at offset ``end``. A replica at offset ``R`` can resume (``PSYNC``) when the
backlog still holds the frame starting at ``R`` (or ``R`` is the end of the stream).
"""

from __future__ import annotations

from collections import deque


class Backlog:
    def __init__(self, size: int, offset: int) -> None:
        self.size = max(16 * 1024, size)
        self.frames: deque[tuple[int, bytes]] = deque()  # (start offset, frame bytes)
        self.histlen = 0
        self.end = offset  # the stream's offset after the last frame

    @property
    def first_byte_offset(self) -> int:
        """Redis's repl_backlog_first_byte_offset: the first byte held (end + 1 when empty)."""
        return (self.frames[0][0] if self.frames else self.end) + 1

    def append(self, frame: bytes) -> int:
        """Add a frame at the stream's end; returns the new end offset."""
        self.frames.append((self.end, frame))
        self.end += len(frame)
        self.histlen += len(frame)
        while self.histlen > self.size and len(self.frames) > 1:
            _, f = self.frames.popleft()
            self.histlen -= len(f)
        return self.end

    def since(self, offset: int) -> list[bytes] | None:
        """The frames after ``offset`` (a replica at ``offset`` needs them), or None when the backlog
        no longer holds them (or never did)."""
        if offset == self.end:
            return []
        if offset > self.end or not self.frames or offset < self.frames[0][0]:
            return None
        out = []
        found = False
        for start, f in self.frames:
            if start == offset:
                found = True
            if found:
                out.append(f)
        return out if found else None

    def reset(self, offset: int) -> None:
        self.frames.clear()
        self.histlen = 0
        self.end = offset
