"""Server-sent events: lines in, `data` payloads out (comments, `event:` and `id:` ignored)."""

from __future__ import annotations


class SseDecoder:
    """Feed lines (without their line break); a blank line completes an event."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        """The event's data when `line` completes one, else None."""
        if not line:
            return self.flush()
        if line.startswith("data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None

    def flush(self) -> str | None:
        """The pending event's data (at a blank line or end of stream), if any."""
        if not self._data:
            return None
        data = "\n".join(self._data)
        self._data.clear()
        return data
