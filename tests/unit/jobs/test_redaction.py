"""redact_url: no planted password survives, whatever the URL's shape; harmless parts stay."""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import jobs
from jobs.redaction import is_secret_key, redact_keys, redact_text, redact_url

SECRET_KEYS = (
    "password", "pass", "pwd", "passwd", "secret", "token", "sslpassword", "api_key", "apikey",
    "access_token", "client_secret", "auth_token", "x-api-key", "PGPASSWORD",
)  # fmt: skip
SCHEMES = (
    "postgresql", "postgres", "postgresql+asyncpg", "sqlite+aiosqlite", "redis", "rediss",
    "redis+sentinel", "redis+cluster", "unix", "http",
)  # fmt: skip
SEPARATORS = ("://", ":/", ":///", ":", "//", "")
"""``scheme://`` and the ways it gets mistyped."""

# Printable characters but whitespace and controls (a URL in a text is one word) and "*"
# (the mask itself).
password_chars = st.characters(
    min_codepoint=33,
    max_codepoint=0x2FF,
    blacklist_characters="*",
    blacklist_categories=("Z", "Cc"),
)
passwords = st.text(password_chars, min_size=4, max_size=24)
# In a query, "&" and ";" end a value: a password holding them unencoded is another URL.
query_passwords = st.text(
    st.characters(
        min_codepoint=33,
        max_codepoint=0x2FF,
        blacklist_characters="*&;",
        blacklist_categories=("Cc",),
    ),
    min_size=4,
    max_size=24,
)
names = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_."), min_size=1, max_size=8)
hosts = st.sampled_from(("h", "db.internal", "127.0.0.1", "[::1]", "h1:26379,h2:26379", ""))
ports = st.sampled_from(("", ":5432", ":6379", ":1"))
paths = st.sampled_from(("", "/", "/db", "/0", "/mymaster/2", "/a/b.db"))
plain_queries = st.sampled_from(("", "?sslmode=require", "?db=1&ssl=true", "?application_name=x"))


def secret_key_shape(key: str, style: int) -> str:
    """``key`` as a user might write it: any case, or percent-encoded."""
    if style == 1:
        return key.upper()
    if style == 2:
        return key.title()
    if style == 3:
        return "".join(f"%{ord(c):02X}" if i == 1 else c for i, c in enumerate(key))
    return key


@settings(max_examples=400)
@given(
    scheme=st.sampled_from(SCHEMES),
    separator=st.sampled_from(SEPARATORS),
    user=st.one_of(st.just(""), names),
    password=passwords,
    host=hosts,
    port=ports,
    path=paths,
    query=plain_queries,
)
@example("postgresql", "://", "u", "p/w@x:d", "h", ":5432", "/db", "")
@example("postgresql", ":/", "u", "pw/with@and:", "h", "", "/db", "")
@example("redis", ":/", "", "s3cr3t/@!", "h", "", "", "")
def test_no_userinfo_password_survives(
    scheme: str, separator: str, user: str, password: str, host: str, port: str, path: str,
    query: str,
) -> None:  # fmt: skip
    url = f"{scheme}{separator}{user}:{password}@{host}{port}{path}{query}"
    assume(password not in url.replace(password, "", 1))
    shown = redact_url(url)
    assert password not in shown
    assert "***" in shown


@settings(max_examples=400)
@given(
    scheme=st.sampled_from(SCHEMES),
    separator=st.sampled_from(SEPARATORS),
    host=hosts,
    port=ports,
    path=paths,
    key=st.sampled_from(SECRET_KEYS),
    style=st.integers(0, 3),
    password=query_passwords,
    before=st.sampled_from(("", "sslmode=require&", "db=1;")),
    after=st.sampled_from(("", "&ssl=true", ";db=2", "&x=1&y=2")),
    userinfo=st.sampled_from(("", "u@", "u:pw@")),
)
@example("redis", "://", "h", "", "/0", "password", 0, "a?b=c@d", "", "&db=1", "")
@example("postgresql", "://", "h", ":5432", "/db", "sslpassword", 1, "x:y@z/w", "", "", "")
def test_no_secret_query_value_survives(
    scheme: str, separator: str, host: str, port: str, path: str, key: str, style: int,
    password: str, before: str, after: str, userinfo: str,
) -> None:  # fmt: skip
    url = f"{scheme}{separator}{userinfo}{host}{port}{path}?{before}"
    url += f"{secret_key_shape(key, style)}={password}{after}"
    assume(password not in url.replace(password, "", 1))
    assert password not in redact_url(url)


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_garbage_never_raises(text: str) -> None:
    assert isinstance(redact_url(text), str)
    assert isinstance(redact_text(text), str)


@settings(max_examples=200)
@given(
    prefix=st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
    password=passwords,
    suffix=st.sampled_from(("", " failed", "' (connection refused)", ": timeout")),
)
def test_a_url_inside_a_message_is_redacted(prefix: str, password: str, suffix: str) -> None:
    text = f"{prefix} postgresql://app:{password}@db:5432/app{suffix}"
    assume(password not in text.replace(password, "", 1))
    assert password not in redact_text(text)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:hunter2@db:5432/app", "postgresql://app:***@db:5432/app"),
        ("postgresql://app:p/w@db/app", "postgresql://app:***@db/app"),
        ("postgresql://app:p@w@db/app?sslmode=require", "postgresql://app:***@db/app?sslmode=require"),
        ("postgresql:/u:pw@h/db", "postgresql:/u:***@h/db"),
        ("redis:/:pw@h", "redis:/:***@h"),
        ("redis://h:6379/0?password=x&db=1", "redis://h:6379/0?password=***&db=1"),
        ("redis://h/0?PassWord=x;health_check_interval=3", "redis://h/0?PassWord=***;health_check_interval=3"),
        ("rediss://h?api_key=k&ssl_cert_reqs=none", "rediss://h?api_key=***&ssl_cert_reqs=none"),
        ("http://h/?pass%77ord=x", "http://h/?pass%77ord=***"),
        ("redis+sentinel://:pw@s1:26379,s2:26379/main/0", "redis+sentinel://:***@s1:26379,s2:26379/main/0"),
    ],
)  # fmt: skip
def test_what_is_hidden_and_what_stays(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+asyncpg://postgres@127.0.0.1:5432/test",
        "sqlite+aiosqlite:////var/lib/app/jobs.db",
        "sqlite+aiosqlite:///file:jobs.db?mode=ro&uri=true",
        "redis://127.0.0.1:6379/0",
        "redis+cluster://10.0.0.1:7000",
        "unix:///run/redis.sock?db=2",
        "postgresql://h/db?sslmode=verify-full&sslrootcert=/etc/ca.pem&sslkey=/k.pem",
        "postgresql://u@h/db",
    ],
)
def test_urls_without_secrets_are_shown_as_given(url: str) -> None:
    assert redact_url(url) == url


def test_objects_are_shown_through_str_and_a_failing_str_shows_nothing() -> None:
    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert redact_url(Broken()) == "<Broken>"
    from sqlalchemy.engine import make_url

    assert redact_url(make_url("postgresql://u:pw@h/db?password=q")) == (
        "postgresql://u:***@h/db?password=***"
    )


def test_secret_keys() -> None:
    for key in SECRET_KEYS:
        assert is_secret_key(key), key
    for key in ("sslmode", "sslkey", "sslrootcert", "db", "application_name", "host", "user"):
        assert not is_secret_key(key), key


def test_redact_keys_hides_values_at_any_depth() -> None:
    redact = redact_keys(["token", "SSN"])
    payload = {"user": {"ssn": "123", "name": "a"}, "items": [{"Token": "t", "n": 1}], "n": 2}
    assert redact(payload) == {
        "user": {"ssn": "***", "name": "a"},
        "items": [{"Token": "***", "n": 1}],
        "n": 2,
    }
    assert payload["user"] == {"ssn": "123", "name": "a"}  # a copy; the job's own is untouched
    assert redact("plain") == "plain"


def test_redact_url_is_exported_by_jobs() -> None:
    assert jobs.redact_url is redact_url
    assert "redact_url" in jobs.__all__
