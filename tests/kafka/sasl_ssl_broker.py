"""What a client needs for the test broker's SASL_SSL listener (fixture ``kafka_sasl_ssl``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SaslSslBroker:
    """The SASL_SSL listener and its files (``.kafka/sasl-ssl/``, written by ``scripts/kafka.sh``)."""

    bootstrap: str
    cafile: Path
    certfile: Path
    keyfile: Path
    username: str
    password_file: Path

    @property
    def password(self) -> str:
        return self.password_file.read_text().strip()
