"""JSON log lines: one object per line with the order key, and credentials never shown."""

from __future__ import annotations

import json
import logging

from tenantdb.logs import JSONFormatter


def _render(**extra: object) -> dict[str, object]:
    record = logging.LogRecord("tenantdb.x", logging.INFO, "f.py", 1, "did %s", ("it",), None)
    for name, value in extra.items():
        setattr(record, name, value)
    line = JSONFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert isinstance(parsed, dict)
    return parsed


def test_a_line_carries_the_order_and_its_fields() -> None:
    line = _render(order="mariadbdatabase/a/b", fields={"username": "v-x", "refreshTime": "t"})
    assert line["message"] == "did it"
    assert line["level"] == "info"
    assert line["order"] == "mariadbdatabase/a/b"
    assert line["fields"] == {"username": "v-x", "refreshTime": "t"}


def test_credential_looking_fields_are_masked() -> None:
    line = _render(fields={"password": "hunter2", "token": "s.abc"}, api_token="s.def")
    assert line["fields"] == {"password": "***", "token": "***"}
    assert line["api_token"] == "***"
    assert "hunter2" not in json.dumps(line)


def test_private_keys_and_tokens_in_a_message_are_replaced() -> None:
    key = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----"
    token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
    record = logging.LogRecord("x", logging.INFO, "f.py", 1, "got %s and %s", (key, token), None)
    message = json.loads(JSONFormatter().format(record))["message"]
    assert message == "got <private key> and <token>"


def test_openbao_tokens_in_a_message_are_replaced_and_words_with_dots_are_not() -> None:
    tokens = (
        "s.Xk2ZGfFqEhQzVw3mN8pRtY4b",  # OpenBao's service token
        "b.AAAAAQKk9Lq3dTmWcV1ZxYh2eR7n",  # a batch token
        "hvs.CAESIJ3kZlQm9v8yXq2WnT5rB1cHdF0gLpOaEiQKHGh2cy5xYkZ2",  # Vault's, OpenBao accepts
        "b.AAAAAQJ-x_9kLq3dTmWcV1Zx-Yh2eR_7n",  # URL-safe base64 carries - and _
    )
    record = logging.LogRecord("x", logging.INFO, "f.py", 1, "denied %s, %s, %s, %s", tokens, None)
    message = json.loads(JSONFormatter().format(record))["message"]
    assert message == "denied <token>, <token>, <token>, <token>"
    plain = "orders.mariadbdatabase_tenant_a_reports and ids.v1alpha1SomethingLonger stay"
    record = logging.LogRecord("x", logging.INFO, "f.py", 1, plain, None, None)
    assert json.loads(JSONFormatter().format(record))["message"] == plain
