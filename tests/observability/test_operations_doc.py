"""docs/operations.md stays true: its metric table matches the code, its Prometheus files load."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.observability.metrics import BucketUsage, Metrics

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed (Debian: apt-get install prometheus)",
)


def yaml_block(starting_with: str) -> str:
    blocks: list[str] = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    [block] = [block for block in blocks if block.startswith(starting_with)]
    return block


def test_every_service_metric_is_documented() -> None:
    metrics = Metrics(bucket_usage=lambda: [BucketUsage("b", 1, 1)], version="1")
    body, _ = metrics.render()
    documented = DOC.read_text(encoding="utf-8")
    families = [
        family
        for family in text_string_to_metric_families(body.decode("utf-8"))
        if family.name.startswith("service_") and not family.name.endswith("_created")
    ]
    assert len(families) >= 20
    for family in families:
        exposed = family.name + "_total" if family.type == "counter" else family.name
        assert f"`{exposed}`" in documented, f"{exposed} missing from docs/operations.md"


def test_proxy_example_streams_bodies_without_a_size_cap() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "proxy_request_buffering off;" in text
    assert "client_max_body_size 0;" in text


@needs_promtool
def test_alert_rules_pass_promtool(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml_block("groups:"), encoding="utf-8")
    result = subprocess.run(
        ["promtool", "check", "rules", str(rules)], capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


@needs_promtool
def test_scrape_config_passes_promtool(tmp_path: Path) -> None:
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml_block("scrape_configs:"), encoding="utf-8")
    result = subprocess.run(
        ["promtool", "check", "config", str(config)], capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
