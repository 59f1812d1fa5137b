"""Where webhooks may connect (SSRF): the policy, checked after DNS resolution (``actions/network.py``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lakemount.actions.network import WebhookPolicy
from lakemount.app import App
from lakemount.catalog.catalog import Catalog
from lakemount.config import load
from lakemount.errors import HookFailed, InvalidArgument
from tests.actions.conftest import R, action, policy_cat, webhook_action


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[::ffff:169.254.169.254]/latest/",
    "http://[64:ff9b::a9fe:a9fe]/latest/",  # NAT64 to 169.254.169.254
    "http://[2002:a9fe:a9fe::1]/latest/",  # 6to4 from 169.254.169.254
    "http://[fe80::1]:8080/x",
])
def test_webhook_to_a_metadata_or_link_local_address_is_refused(cat: Catalog, url: str) -> None:
    action(cat, "main", "notify", webhook_action(url, timeout="5s"))
    t0 = time.monotonic()
    with pytest.raises(HookFailed, match="webhook refused: .* is in actions.webhook.denied_networks") as info:
        cat.commit(R, "main", "m")
    assert time.monotonic() - t0 < 2  # refused before any connection attempt
    run = cat.actions.store.get_run(R, info.value.run_id)
    assert run.status == "failed" and "denied_networks" in run.hooks[0].output


def test_webhook_policy_judges_the_ipv4_address_an_ipv6_one_carries() -> None:
    p = WebhookPolicy.parse("10.0.0.0/8", "10.9.0.0/16")
    assert p.refusal("10.1.2.3") == "" and p.refusal("64:ff9b::a01:203") == "" and p.refusal("::ffff:10.1.2.3") == ""
    assert p.refusal("64:ff9b::a09:1") == "10.9.0.1 is in actions.webhook.denied_networks"
    assert p.refusal("2002:a09:1::") == "10.9.0.1 is in actions.webhook.denied_networks"
    assert p.refusal("64:ff9b::b00:1") == "11.0.0.1 is not in actions.webhook.allowed_networks"
    assert p.refusal("2001:db8::1") == "2001:db8::1 is not in actions.webhook.allowed_networks"
    assert WebhookPolicy.parse("", "").refusal("64:ff9b::a9fe:a9fe") == ""


def test_webhook_policy_is_checked_after_dns_resolution(tmp_path: Path, webhook: dict[str, Any]) -> None:
    port = webhook["url"].split(":")[2].split("/")[0]
    c = policy_cat(tmp_path, LAKEMOUNT_ACTIONS_WEBHOOK_DENIED_NETWORKS="127.0.0.0/8,::1/128")
    action(c, "main", "notify", webhook_action(f"http://localhost:{port}/hook"))
    # Every address localhost resolves to is refused and named: a stock Debian's /etc/hosts gives ::1 too.
    with pytest.raises(HookFailed, match=r"webhook refused: localhost: (.+; )?127\.0\.0\.1 is in actions\.webhook\.denied_networks"):
        c.commit(R, "main", "m")
    assert webhook["events"] == []


def test_webhook_allowed_networks_restrict_and_loopback_stays_allowed_by_default(tmp_path: Path, cat: Catalog,
                                                                                  webhook: dict[str, Any]) -> None:
    action(cat, "main", "notify", webhook_action(webhook["url"]))
    cat.commit(R, "main", "loopback is allowed by default")
    assert len(webhook["events"]) == 1
    c = policy_cat(tmp_path, LAKEMOUNT_ACTIONS_WEBHOOK_ALLOWED_NETWORKS="10.0.0.0/8")
    action(c, "main", "notify", webhook_action(webhook["url"]))
    with pytest.raises(HookFailed, match=r"127\.0\.0\.1 is not in actions.webhook.allowed_networks"):
        c.commit(R, "main", "m")
    assert len(webhook["events"]) == 1
    with pytest.raises(InvalidArgument, match="actions.webhook.denied_networks: not a network"):
        assert App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "h3"), "LAKEMOUNT_ACTIONS_WEBHOOK_DENIED_NETWORKS": "10.0.0.0/8,nope"})).webhook_policy
