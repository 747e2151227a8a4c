"""The WRR backend: exact sysctl text, read-back parsing, and the files it writes."""

from __future__ import annotations

from ipaddress import IPv4Address
from pathlib import Path

import pytest

from agent.backends.base import BackendError, PathWeight
from agent.backends.wrr import (
    CWND_LIMITED,
    SCHEDULER,
    WEIGHTS,
    WrrBackend,
    WrrRule,
    encode_address,
    encode_port,
    parse_rules,
    rules_text,
)

A = IPv4Address


def test_address_and_port_encoding_of_the_wrr_kernel() -> None:
    assert encode_address(A("10.0.0.20")) == 335544330  # the controller's documented example
    assert encode_address(A("10.1.0.1")) == 16777482
    assert encode_port(5201) == 20756  # 0x1451 byte-swapped
    assert encode_port(80) == 20480
    with pytest.raises(ValueError, match="65536"):
        encode_port(65536)


def test_golden_uplink_rules() -> None:
    rules = [
        WrrRule(A("10.1.0.1"), None, 30),
        WrrRule(A("10.2.0.1"), None, 100),
        WrrRule(A("10.3.0.1"), None, 1),
    ]
    assert rules_text(rules) == "16777482 0 30 0 0 16777738 0 100 0 0 16777994 0 1 0 0\n"


def test_golden_downlink_rules_with_ports() -> None:
    rules = [
        WrrRule(None, A("10.1.0.1"), 28),
        WrrRule(A("10.0.0.20"), A("10.2.0.1"), 99, src_port=5201, dst_port=80),
    ]
    # src port in src_port, dst port in dst_port (the public controller swapped them)
    assert rules_text(rules) == "0 16777482 28 0 0 335544330 16777738 99 20756 20480\n"


def test_read_back_parses_the_kernels_tab_separated_output() -> None:
    kernel = "16777482\t0\t30\t0\t0\n16777738\t0\t100\t0\t0\t"
    assert parse_rules(kernel) == [(16777482, 0, 30, 0, 0), (16777738, 0, 100, 0, 0)]
    assert parse_rules("") == []
    with pytest.raises(BackendError, match="groups of five"):
        parse_rules("1\t2\t3")


def fake_procfs(root: Path) -> Path:
    for relative, text in ((WEIGHTS, ""), (SCHEDULER, "default\n")):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def fake_sysfs(root: Path, cwnd_limited: str = "Y\n") -> Path:
    """A module parameter as a 5G-CLARITY kernel shows it: under sysfs, not procfs."""
    (root / CWND_LIMITED).parent.mkdir(parents=True, exist_ok=True)
    (root / CWND_LIMITED).write_text(cwnd_limited)
    return root


def paths(weights: dict[str, int]) -> list[PathWeight]:
    addresses = {"nr": A("10.1.0.1"), "wifi": A("10.2.0.1"), "lifi": A("10.3.0.1")}
    return [PathWeight("cpe-1", a, addresses[a], w) for a, w in weights.items()]


def test_cpe_backend_writes_rules_scheduler_and_backup_flags(tmp_path: Path) -> None:
    root = fake_procfs(tmp_path / "proc")
    sysfs = fake_sysfs(tmp_path / "sys")
    commands: list[list[str]] = []

    def record(argv: list[str]) -> str:
        commands.append(argv)
        return ""

    backend = WrrBackend(
        "cpe", root, {"nr": "nr0", "wifi": "wlan0", "lifi": "lifi0"}, record, sysfs_root=sysfs
    )
    assert "not N" in str(backend.describe()["warning"])
    wanted = paths({"nr": 30, "wifi": 100, "lifi": 0})
    backend.write(wanted)
    assert (root / WEIGHTS).read_text() == "16777482 0 30 0 0 16777738 0 100 0 0 16777994 0 1 0 0\n"
    assert (root / SCHEDULER).read_text() == "roundrobin\n"
    assert (sysfs / CWND_LIMITED).read_text() == "N\n", "cwnd_limited is set under sysfs"
    assert not (root / CWND_LIMITED).exists(), "nothing of it under procfs"
    assert backend.describe()["cwnd_limited"] == "N"
    assert "warning" not in backend.describe()
    assert commands == [
        ["ip", "link", "set", "dev", "nr0", "multipath", "on"],
        ["ip", "link", "set", "dev", "wlan0", "multipath", "on"],
        ["ip", "link", "set", "dev", "lifi0", "multipath", "backup"],
    ]
    assert backend.read(wanted) == {
        ("cpe-1", "nr"): 30,
        ("cpe-1", "wifi"): 100,
        ("cpe-1", "lifi"): 0,
    }
    rules = backend.describe()["rules"]
    assert isinstance(rules, list)
    assert rules[0] == {
        "src": "10.1.0.1",
        "dst": "*",
        "weight": 30,
        "src_port": 0,
        "dst_port": 0,
    }


def test_proxy_backend_matches_the_cpes_destination_address(tmp_path: Path) -> None:
    root = fake_procfs(tmp_path)
    backend = WrrBackend("proxy", root)
    backend.write(paths({"nr": 28, "wifi": 99}))
    assert (root / WEIGHTS).read_text() == "0 16777482 28 0 0 0 16777738 99 0 0\n"


def test_unwritable_kernel_file_is_a_backend_error(tmp_path: Path) -> None:
    root = fake_procfs(tmp_path)
    (root / WEIGHTS).unlink()
    (root / WEIGHTS).mkdir()
    with pytest.raises(BackendError, match="cannot write"):
        WrrBackend("proxy", root).write(paths({"nr": 1}))


def test_a_cwnd_limited_that_will_not_take_n_fails_the_write(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path / "sys")
    backend = WrrBackend("proxy", fake_procfs(tmp_path / "proc"), sysfs_root=sysfs)
    # A parameter that cannot be written (root writes read-only files, so: not a file at all)
    (sysfs / CWND_LIMITED).unlink()
    (sysfs / CWND_LIMITED).mkdir()
    with pytest.raises(BackendError, match="cwnd_limited"):
        backend.write(paths({"nr": 1}))


def test_agent_show_names_a_cwnd_limited_that_is_not_n(tmp_path: Path) -> None:
    import subprocess
    import sys

    import yaml

    proc = fake_procfs(tmp_path / "proc")
    sysfs = fake_sysfs(tmp_path / "sys", "Y\n")
    config = tmp_path / "agent.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "role": "proxy",
                "accesses": {"nr": {"interface": "nr0", "address": "10.1.0.2"}},
                "cpes": {"cpe-1": {"nr": "10.1.0.1"}},
                "backend": "wrr",
                "state_file": str(tmp_path / "state.json"),
            }
        )
    )
    shown = subprocess.run(
        [
            *(sys.executable, "-m", "atsss", "agent", "show", "--config", str(config)),
            *("--procfs-root", str(proc), "--sysfs-root", str(sysfs)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert '"cwnd_limited": "Y"' in shown.stdout
    assert "weights barely matter" in shown.stdout
