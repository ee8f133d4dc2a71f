"""Errors a user can cause, each naming the object, the field and what is wrong."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def join_path(*parts: str | int) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.replace("_", "").isalnum() and part[:1].isalpha():
            out += f".{part}" if out else part
        else:
            # Map keys such as resource names hold dots and slashes.
            out += f"[{part}]"
    return out
