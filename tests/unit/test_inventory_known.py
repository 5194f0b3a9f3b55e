"""``inventory.known``: an inventory host's target, or "not in the inventory" (no address
is ever made up from a well-formed name, so nothing can SSH to it)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.config import inventory
from bot.config.settings import Settings
from bot.core import strings

SETTINGS = Settings.model_validate(
    {"hosts": {"gpu-01": {"ssh": "ops@10.1.230.174:2222", "key": "/k", "sudo": True}}})


def test_known_host_by_name_and_by_address() -> None:
    by_name = inventory.known(SETTINGS, "gpu-01")
    assert (by_name.name, by_name.address, by_name.sudo) == ("gpu-01", "ops@10.1.230.174:2222",
                                                            True)
    assert inventory.known(SETTINGS, "ops@10.1.230.174:2222") == by_name


@pytest.mark.parametrize("host", ["gpu-55", "10.1.230.175", "root@10.1.230.174:22", "gpu-01.",
                                  "x" * 300])
def test_unlisted_hosts_are_not_in_the_inventory(host: str) -> None:
    with pytest.raises(inventory.NotInInventory) as exc:
        inventory.known(SETTINGS, host)
    assert exc.value.message == strings.HOST_NOT_IN_INVENTORY.format(host=host)
    assert exc.value.host == host


def test_resolve_still_takes_ad_hoc_targets_for_the_cli() -> None:
    assert inventory.resolve(SETTINGS, "root@10.9.9.9:22").address == "root@10.9.9.9:22"
    assert str(inventory.NotInInventory("gpu-55")) == "gpu-55 is not in the inventory"


class NoSSH:
    """A runner that fails the test if anything tries to reach a host."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"SSH attempted: runner.{name}")


def test_the_flow_never_sshes_to_a_host_the_inventory_does_not_list() -> None:
    """``Hosts.target_for`` asks ``inventory.known``, so an unlisted name is no target, the
    diagnosis is the "not in the inventory" finding and the runner is never used."""
    from bot.domain.incident import Incident
    from bot.flow.hosts import Hosts
    from bot.remediation.options import RemediationOptions

    nothing: Any = None
    hosts = Hosts(SETTINGS, NoSSH(), nothing, RemediationOptions())
    assert hosts.target_for("gpu-55") is None
    assert hosts.target_for("gpu-01") is not None
    hosts.interrupted_job_ids = lambda host: []  # type: ignore[method-assign]
    diagnosis = hosts.diagnose(Incident("INC-1", "gpu-55", "gpu_ecc"), None)
    assert diagnosis.status.value == "unreachable"
    assert diagnosis.findings[0].title == "gpu-55 is not in the inventory"
    with pytest.raises(inventory.NotInInventory, match="neither a host in the config"):
        inventory.resolve(SETTINGS, "gpu-55")  # the CLI's wording: it also takes user@host:port
