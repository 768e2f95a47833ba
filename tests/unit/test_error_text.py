"""What a retry's log line may say about a failure: our own errors' text, others' type only."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from tasks.chain import NoteTooLargeError
from tasks.runtime import describe_error
from tenantdb.adapters.clusters import ClusterUnavailableError
from tenantdb.adapters.kube import ConflictError
from tenantdb.adapters.mariadbdatabase import ActionError, ReadError
from tenantdb.adapters.openbao import OpenBaoError
from tenantdb.adapters.workqueue import LeaseLostError
from tenantdb.core.keys import OrderKey


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
        pytest.param(ActionError("apply Secret a/b: 422 invalid", 422), id="action"),
        pytest.param(ReadError("Secret a/b", "unreachable"), id="read"),
        pytest.param(ClusterUnavailableError("edge-1"), id="cluster"),
        pytest.param(LeaseLostError(OrderKey.parse("mariadbdatabase/a/b")), id="lease"),
        pytest.param(NoteTooLargeError(70_000), id="note"),
    ],
)
def test_our_own_errors_keep_their_text(error: Exception) -> None:
    assert describe_error(error).endswith(str(error))
