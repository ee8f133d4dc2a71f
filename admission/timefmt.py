"""Event time as Kubernetes prints it; pure arithmetic, never the wall clock."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache


# Statuses carry the same few event times again and again.
@lru_cache(maxsize=4096)
def rfc3339(time_ms: int) -> str:
    return datetime.fromtimestamp(time_ms // 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> int | None:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)
