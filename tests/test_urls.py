"""Store URLs are printed and logged without their passwords."""

import pytest

from tether._urls import redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://tether:s3cret@db:5432/tether?sslmode=require",
            "postgresql://tether:***@db:5432/tether?sslmode=require",
        ),
        ("postgres://u:p@ss@host/db", "postgres://u:***@host/db"),
        ("postgresql://:s3cret@host/db", "postgresql://:***@host/db"),
        (
            "postgresql://u@host/db?user=u&password=s3cret&a=b",
            "postgresql://u@host/db?user=u&password=***&a=b",
        ),
        ("host=db PASSWORD='s 3 cret' user=u", "host=db PASSWORD=*** user=u"),
        (
            'invalid dsn: "postgresql://u:s3cret@db/x" is not valid',
            'invalid dsn: "postgresql://u:***@db/x" is not valid',
        ),
    ],
)
def test_passwords_are_masked(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "s3cret" not in redact_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///./tether-data",
        "sqlite:////var/lib/tether/tether.db?synchronous=NORMAL",
        "memory://",
        "postgresql://tether@db:5432/tether?schema=a",
        "postgresql://h1:5432,h2:5432/db",
        "http://127.0.0.1:8484/agents/a/b?after=3",
    ],
)
def test_urls_without_a_password_are_unchanged(url: str) -> None:
    assert redact_url(url) == url
