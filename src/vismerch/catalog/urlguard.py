"""Which network addresses an image download may connect to (the SSRF guard).

A manifest is data from outside; its URLs must not reach the machine's own services,
the private network or a cloud metadata endpoint. A host is judged by the addresses it
resolves to (so a public name pointing at 127.0.0.1 is refused), and the download then
connects to the very address that was judged (``fetch.py``), never resolving the name a
second time (DNS rebinding). Refused unless the allow-list names the host or a network
holding the address:

- loopback, private (RFC 1918), shared (100.64/10), link-local, unique-local (fc00::/7),
  site-local, multicast, unspecified, reserved and documentation ranges: anything
  ``ipaddress`` does not call global;
- cloud metadata addresses (169.254.169.254, fd00:ec2::254, ...) and names
  (metadata.google.internal): only an allow-list entry for exactly that address or name
  admits them, never a wider network such as 169.254.0.0/16.

IPv4 embedded in IPv6 (``::ffff:127.0.0.1``, NAT64, 6to4, Teredo) is judged as the IPv4
address it carries. Numeric hosts in the forms ``inet_aton`` accepts (``2130706433``,
``0x7f.1``, ``0177.0.0.1``) are read as the address they spell, without DNS.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from vismerch.errors import DecodeError

REFUSED_ADDRESS = "fetch-refused-address"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean...
    "169.254.170.2",  # AWS ECS task credentials
    "169.254.169.123",  # AWS time sync
    "fd00:ec2::254",  # AWS IMDS over IPv6
    "100.100.100.200",  # Alibaba Cloud
    "192.0.0.192",  # Oracle Cloud (classic)
))
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata",
                            "instance-data", "instance-data.ec2.internal"})
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class AddressRefused(DecodeError):
    """A URL whose host or address the guard refuses (reason ``fetch-refused-address``)."""

    def __init__(self, message: str):
        super().__init__(REFUSED_ADDRESS, message)


@dataclass(frozen=True)
class AllowList:
    """Hosts (exact names, case-insensitive) and networks a download may reach even though
    they are not public. Parsed from the ``fetch_allow_hosts`` setting."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, text: str | Iterable[str] | None) -> AllowList:
        """``"127.0.0.1, 10.0.0.0/8, minio.internal"``: a comma-separated list of IP
        addresses, CIDR networks and host names. A bad network raises ValueError."""
        entries = text.split(",") if isinstance(text, str) else list(text or ())
        hosts, networks = set(), []
        for raw in entries:
            entry = raw.strip().lower().strip("[]")
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                if "/" in entry or entry.replace(".", "").isdigit():
                    raise ValueError(f"fetch_allow_hosts: {raw.strip()!r} is not a valid "
                                     "address or network") from None
            hosts.add(entry.rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def admits_host(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.hosts

    def admits_address(self, ip: IPAddress, exact_only: bool = False) -> bool:
        return any(ip.version == net.version and ip in net
                   and (not exact_only or net.num_addresses == 1) for net in self.networks)


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, NAT64, 6to4, Teredo), if any."""
    if ip.version != 6:
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def why_refused(ip: IPAddress) -> str | None:
    """What kind of non-public address ``ip`` is, or None for a public one."""
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    inner = embedded_ipv4(ip)
    if inner is not None:
        why = why_refused(inner)
        return f"{why} (as {inner} inside IPv6)" if why else None
    for test, name in (("is_unspecified", "unspecified"), ("is_loopback", "loopback"),
                       ("is_link_local", "link-local"), ("is_multicast", "multicast"),
                       ("is_site_local", "site-local"), ("is_reserved", "reserved")):
        if getattr(ip, test, False):
            return f"a {name} address"
    if ip.version == 6 and ip in ipaddress.ip_network("fc00::/7"):
        return "a unique-local address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "a reserved or non-public address"
    return None


def check_address(ip: IPAddress, host: str, allow: AllowList) -> None:
    """Raise AddressRefused unless ``ip`` (an address of ``host``) may be connected to."""
    if ip in METADATA_ADDRESSES or embedded_ipv4(ip) in METADATA_ADDRESSES:
        # a metadata endpoint hands out credentials: only an entry naming it exactly admits it
        if allow.admits_address(ip, exact_only=True):
            return
        raise AddressRefused(f"{host} is {ip}, a cloud metadata address")
    why = why_refused(ip)
    if why is None or allow.admits_host(host) or allow.admits_address(ip):
        return
    inner = embedded_ipv4(ip)
    if inner is not None and allow.admits_address(inner):
        return
    shown = host if host == str(ip) else f"{host} ({ip})"
    raise AddressRefused(f"{shown} is {why}; add it to fetch_allow_hosts to allow it")


def literal_address(host: str) -> IPAddress | None:
    """``host`` read as an IP address: IPv6 in brackets or not, dotted IPv4, and the
    decimal, octal and hex forms that ``inet_aton`` (and so most clients) accept."""
    text = host.strip("[]")
    try:
        return ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        pass
    if not text or not all(c in "0123456789abcdefxABCDEFX." for c in text):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except OSError:
        return None


def resolve(host: str, port: int, allow: AllowList) -> list[IPAddress]:
    """The addresses of ``host`` a download may connect to, in resolver order; the ones the
    guard refuses are dropped. AddressRefused when none is left (or the name is a metadata
    name). Network errors resolving the name raise OSError."""
    name = host.lower().rstrip(".")
    if name in METADATA_NAMES and not allow.admits_host(name):
        raise AddressRefused(f"{host} is a cloud metadata host name")
    literal = literal_address(host)
    if literal is not None:
        check_address(literal, host, allow)
        return [literal]
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))
    allowed, last = [], None
    for ip in addresses:
        try:
            check_address(ip, host, allow)
            allowed.append(ip)
        except AddressRefused as exc:
            last = exc
    if not allowed:
        raise last or AddressRefused(f"{host} has no address")
    return allowed
