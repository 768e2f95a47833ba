"""What a retry's log line may say about a failure: our own errors' text, others' type only."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from tasks.runtime import describe_error
from tenantdb.adapters.kube import ConflictError
from tenantdb.adapters.openbao import OpenBaoError


class _Secret(BaseModel):
    port: int


def test_a_third_party_error_is_named_by_its_type_only() -> None:
    with pytest.raises(ValidationError) as caught:
        _Secret.model_validate({"port": "hunter2-password"})
    assert describe_error(caught.value) == "ValidationError"


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(
            OpenBaoError("openbao: 403 on GET /v1/x: permission denied", 403), id="openbao"
        ),
        pytest.param(ConflictError("", "apply", "secrets.core a/b", 409, "conflict"), id="kube"),
    ],
)
def test_our_own_errors_keep_their_text(error: Exception) -> None:
    assert describe_error(error).endswith(str(error))
