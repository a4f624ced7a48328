"""A real ``tether serve --demo`` scraped: ``/metrics`` parses as Prometheus text and counts
what was sent, and ``/readyz`` lists the store and the worker's liveness lock, both up."""

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import ServerProcess

pytestmark = pytest.mark.process


def test_a_served_demo_is_scraped(server: ServerProcess) -> None:
    sent = httpx.post(
        f"{server.url}/agents/assistant/me",
        params={"wait": "true"},
        json={"body": "hello"},
        timeout=60,
    )
    assert sent.json()["status"] == "succeeded", sent.text
    scraped = httpx.get(f"{server.url}/metrics", timeout=20)
    assert scraped.status_code == 200
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
    }
    assistant = (("agent", "assistant"),)
    assert samples[("tether_submissions_admitted_total", assistant)] == 1
    settled = (("agent", "assistant"), ("status", "succeeded"))
    assert samples[("tether_submissions_settled_total", settled)] == 1
    assert samples[("tether_submission_settle_duration_seconds_count", settled)] == 1
    assert samples[("tether_claims_total", assistant)] == 1
    commits = [
        value
        for (name, labels), value in samples.items()
        if name == "tether_store_commit_duration_seconds_count"
        and dict(labels)["operation"] == "append_settled"
    ]
    assert commits == [1]  # a one-turn answer settles in the commit that ends it
    ready = httpx.get(f"{server.url}/readyz", timeout=20).json()
    assert ready == {
        "ready": True,
        "dependencies": [
            {"name": "store", "state": "up", "required": True},
            {"name": "liveness", "state": "up", "required": True},
        ],
    }
