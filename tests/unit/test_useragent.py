"""The User-Agent names the pass being served, by a digest of its token, never the token."""

from __future__ import annotations

import threading

from tenantdb.adapters.useragent import USER_AGENT, serving, user_agent
from tenantdb.adapters.workqueue import pass_name


def test_a_request_outside_a_pass_is_tenantdbs_plain_agent() -> None:
    assert user_agent() == USER_AGENT
    assert USER_AGENT.startswith("tenantdb/")


def test_a_pass_is_named_by_a_digest_of_its_token_and_its_order() -> None:
    token = "a" * 32
    with serving("mariadbdatabase/tenant-a/orders", pass_name(token)):
        agent = user_agent()
    assert agent == f"{USER_AGENT} (pass {pass_name(token)}; mariadbdatabase/tenant-a/orders)"
    assert token not in agent
    assert len(pass_name(token)) == 12
    assert pass_name(token) != pass_name("b" * 32)
    assert user_agent() == USER_AGENT, "the name ends with the pass"


def test_another_thread_does_not_see_a_pass_it_does_not_serve() -> None:
    seen: list[str] = []
    with serving("mariadbdatabase/tenant-a/orders", pass_name("t" * 32)):
        thread = threading.Thread(target=lambda: seen.append(user_agent()))
        thread.start()
        thread.join()
    assert seen == [USER_AGENT]
