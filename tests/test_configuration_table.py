"""docs/configuration.md's table is exactly what ``configuration_table()`` makes of ``Config``,
and values are parsed by the rules the table states."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from service.config import (
    RULES,
    Config,
    ConfigError,
    Rule,
    configuration_table,
    field_docs,
    load_config,
)

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
START = "<!-- generated: service.config.configuration_table()"
END = "<!-- end of generated table -->"


def test_the_documented_table_is_the_generated_one() -> None:
    text = DOC.read_text()
    start = text.index("\n", text.index(START)) + 1
    assert text[start : text.index(END)].strip() == configuration_table()


def test_every_visible_setting_has_a_description() -> None:
    docs = field_docs()
    for field in fields(Config):
        if not RULES.get(field.name, Rule()).test_only:
            assert docs.get(field.name), f"Config.{field.name} has no docstring"


def test_values_are_parsed_strictly() -> None:
    config = load_config(
        [],
        {
            "SERVICE_METRICS_PUBLIC": "off",
            "SERVICE_PORT": " 8080 ",
            "SERVICE_LOG_LEVEL": "WARNING",
            "SERVICE_STAGING_TTL": "1.5",
            "SERVICE_WORKERS": "3",
        },
    )
    assert config.metrics_public is False
    assert config.port == 8080
    assert config.log_level == "warning"
    assert config.staging_ttl == 1.5
    assert config.workers == 3


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SERVICE_PORT", "-1"),
        ("SERVICE_PORT", "65536"),
        ("SERVICE_PORT", "1e3"),
        ("SERVICE_PORT", "9" * 40),
        ("SERVICE_STAGING_TTL", "nan"),
        ("SERVICE_STAGING_TTL", "inf"),
        ("SERVICE_METRICS_PUBLIC", "2"),
        ("SERVICE_LOG_LEVEL", "verbose"),
        ("SERVICE_PUBLIC_URL", "ftp://example.com"),
        ("SERVICE_HEALTH_MIN_FREE_FRACTION", "1.5"),
        ("SERVICE_MAX_CONCURRENT_UPLOADS", "0"),
    ],
)
def test_values_outside_the_rules_are_one_clear_line(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config([], {name: value})
    message = str(refused.value)
    assert name in message and "allowed is" in message and "\n" not in message
