"""The SSRF guard: which addresses a download may reach. Every host here is an IP literal
(or a name refused before any lookup), so nothing is resolved over the network."""

from __future__ import annotations

import ipaddress

import pytest

from vismerch.catalog.urlguard import (
    REFUSED_ADDRESS,
    AddressRefused,
    AllowList,
    literal_address,
    resolve,
)

NONE = AllowList()

REFUSED = [
    "127.0.0.1", "127.255.0.9", "10.1.2.3", "172.16.0.1", "172.31.255.254", "192.168.1.1",
    "169.254.1.1", "100.64.0.1", "0.0.0.0", "224.0.0.1", "239.255.255.250", "255.255.255.255",
    "192.0.2.10", "198.18.0.1", "240.0.0.1",
    "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "ff0e::1", "2001:db8::1",
    "fec0::1",  # site-local (deprecated, still not public)
    "::2", "::7f00:1", "::8.8.8.8",  # reserved ::/8 (IPv4-compatible is deprecated)
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:192.168.0.1",  # IPv4-mapped
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "2002:7f00:1::1", "2002:c0a8:101::1",  # 6to4 of 127.0.0.1 and 192.168.1.1
]


@pytest.mark.parametrize("host", REFUSED)
def test_non_public_literals_are_refused(host):
    with pytest.raises(AddressRefused) as info:
        resolve(host, 80, NONE)
    assert info.value.reason == REFUSED_ADDRESS


@pytest.mark.parametrize("host", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111",
                                  "::ffff:8.8.8.8", "64:ff9b::808:808"])
def test_public_literals_are_admitted(host):
    assert resolve(host, 443, NONE) == [ipaddress.ip_address(host)]


@pytest.mark.parametrize("host", ["[::1]", "[::ffff:127.0.0.1]"])
def test_bracketed_ipv6_hosts_are_read_as_addresses(host):
    with pytest.raises(AddressRefused):
        resolve(host, 80, NONE)


@pytest.mark.parametrize(("host", "address"), [
    ("2130706433", "127.0.0.1"),  # decimal
    ("0x7f000001", "127.0.0.1"),  # hex
    ("0177.0.0.1", "127.0.0.1"),  # octal first part
    ("0x7f.1", "127.0.0.1"),  # two parts
    ("127.1", "127.0.0.1"),
    ("017700000001", "127.0.0.1"),  # octal whole
    ("3232235777", "192.168.1.1"),
    ("2852039166", "169.254.169.254"),  # the metadata address, spelled as a number
])
def test_numeric_host_forms_are_read_as_the_address_they_spell(host, address):
    assert literal_address(host) == ipaddress.ip_address(address)
    with pytest.raises(AddressRefused):
        resolve(host, 80, NONE)


def test_names_are_not_read_as_numbers():
    assert literal_address("cafe.de") is None
    assert literal_address("example.com") is None


@pytest.mark.parametrize("host", ["169.254.169.254", "fd00:ec2::254", "169.254.170.2",
                                  "100.100.100.200", "::ffff:169.254.169.254"])
def test_metadata_addresses_need_an_exact_allow_entry(host):
    broad = AllowList.parse("169.254.0.0/16, fd00::/8, 100.64.0.0/10, ::ffff:0:0/96")
    with pytest.raises(AddressRefused, match="metadata"):
        resolve(host, 80, broad)
    exact = AllowList.parse(host)
    assert resolve(host, 80, exact) == [ipaddress.ip_address(host)]


@pytest.mark.parametrize("name", ["metadata.google.internal", "METADATA.google.internal.",
                                  "instance-data"])
def test_metadata_names_are_refused_before_any_lookup(name):
    with pytest.raises(AddressRefused, match="metadata"):
        resolve(name, 80, AllowList.parse("0.0.0.0/0, ::/0"))


def test_allow_list_admits_exactly_what_it_names():
    allow = AllowList.parse(" 127.0.0.1 , 10.0.0.0/8, [::1], minio.internal, ")
    assert resolve("127.0.0.1", 80, allow)
    assert resolve("::1", 80, allow)
    assert resolve("10.200.3.4", 80, allow)
    assert resolve("::ffff:127.0.0.1", 80, allow)  # the IPv4 inside is what is judged
    for host in ("127.0.0.2", "192.168.0.1", "::2"):
        with pytest.raises(AddressRefused):
            resolve(host, 80, allow)
    assert allow.admits_host("MINIO.internal.")
    assert not allow.admits_host("minio.internal.evil.example")


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "300.1.2.3", "1.2.3.4/abc"])
def test_a_malformed_allow_entry_is_an_error_not_ignored(bad):
    with pytest.raises(ValueError, match="fetch_allow_hosts"):
        AllowList.parse(bad)


def test_a_name_is_judged_by_every_address_and_only_admitted_ones_are_kept(monkeypatch):
    """A public name pointing at loopback is refused after resolution; a name with a mix
    keeps only the admitted addresses (the download connects to one of those)."""
    import socket

    answers = {"inside.example": ["127.0.0.1"], "mixed.example": ["10.0.0.7", "93.184.216.34"]}

    def fake_getaddrinfo(host, port, *args, **kwargs):  # the resolver, not the guard
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in answers[host]]

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    with pytest.raises(AddressRefused, match="inside.example .127.0.0.1. is a loopback"):
        resolve("inside.example", 80, NONE)
    assert resolve("mixed.example", 80, NONE) == [ipaddress.ip_address("93.184.216.34")]
    assert resolve("inside.example", 80, AllowList.parse("inside.example")) == [
        ipaddress.ip_address("127.0.0.1")]
