"""docs/configuration.md lists every setting of ``service.config.Config``."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from service.config import Config, load_config

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def test_every_setting_is_documented_with_its_variable_and_flag() -> None:
    text = DOC.read_text()
    for field in fields(Config):
        assert f"`SERVICE_{field.name.upper()}`" in text, field.name
        assert f"`--{field.name.replace('_', '-')}`" in text, field.name


def test_flags_override_environment() -> None:
    config = load_config(
        ["--port", "9123", "--durability", "balanced"],
        {"SERVICE_PORT": "1", "SERVICE_DATA_DIR": "/tmp/x", "SERVICE_METRICS_PUBLIC": "1"},
    )
    assert config.port == 9123
    assert config.durability == "balanced"
    assert config.data_dir == "/tmp/x"
    assert config.metrics_public is True
