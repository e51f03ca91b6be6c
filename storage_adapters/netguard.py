"""Where the server may connect on a tenant's behalf: the guard against SSRF.

A tenant chooses endpoints (an S3 ``endpoint_url``, a GCS ``endpoint``, an Azure
``account_url``); later, summariser and embedder URLs. Without a guard those point the
server's own network position at anything it can reach: the cloud metadata service, the
database, an admin port on localhost. The rules, in one :class:`EndpointPolicy`:

- **Hosts.** A URL's host must be one of the backend's own storage endpoints, in their exact
  shapes (``for_backend``; storage_adapters/cloud_hosts.py — never a provider-wide wildcard
  such as ``*.amazonaws.com``, whose names anyone can own), one of the ``public_hosts`` a
  client passes (the summarisers' hosted APIs), or covered by the operator's allow-list
  (``MEMPLANE_ALLOWED_ENDPOINTS``: host patterns such as ``minio.internal``, and CIDRs such as
  ``10.1.2.0/24``; an IP literal needs a CIDR). A backend's service hosts (Google's token
  endpoint) may be connected to, but never named as an endpoint.
- **Addresses.** Whatever the name, the address actually connected to must be public:
  loopback, private, link-local, unique-local, CGNAT, multicast, unspecified, reserved and
  the metadata addresses (169.254.169.254, fd00:ec2::254) are refused unless a CIDR of the
  allow-list covers that address. An IPv6 address that carries an IPv4 one is judged by the
  IPv4 it carries (IPv4-mapped ``::ffff:0:0/96``, 6to4 ``2002::/16``, NAT64
  ``64:ff9b::/96``); the transition forms that do not say plainly where they lead are refused
  outright (Teredo ``2001::/32``, local-use NAT64 ``64:ff9b:1::/48``, IPv4-compatible
  ``::/96`` and IPv4-translated ``::ffff:0:0:0/96``). This is checked *at connect time,
  after DNS resolution*: the guarded connection resolves the name itself, vets each address,
  connects to the vetted address, and checks the socket's peer again, so a name that
  resolves to 127.0.0.1 (or rebinds between a check and the connection) is refused, and so
  is every redirect hop.

API:

- ``policy.check_endpoint(url)`` — save-time check of a URL; raises
  :class:`EndpointNotAllowed` with a sentence for the caller.
- ``policy.connect((host, port), timeout)`` — a connected socket, or EndpointNotAllowed.
- ``policy.requests_adapter()`` — a ``requests`` transport adapter whose connections are
  guarded (mount it on ``http://`` and ``https://``).
- ``policy.urllib3_pool_classes(http_pool, https_pool)`` — guarded subclasses of urllib3
  connection pools (botocore's, for one).
- ``policy.httpx_transport(**kwargs)`` — an ``httpx.HTTPTransport`` whose connections are
  guarded.
- :func:`refusal_in` — the EndpointNotAllowed somewhere inside a client library's wrapped
  exception, if that is what failed.

Clients that use the guard must not pick up proxies from the environment (a proxy would make
the connection on the server's behalf, past the guard): the helpers here switch that off.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from .cloud_hosts import SERVICE_HOSTS, STORAGE_ENDPOINTS
from .deadlines import armed_pools

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES = (ipaddress.ip_address("169.254.169.254"),
                      ipaddress.ip_address("fd00:ec2::254"))
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
# IPv6 ranges that carry an IPv4 address in their last 32 bits and lead to it.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Transition ranges refused whatever they carry: where they lead is not the address they
# show (Teredo obfuscates it and goes through a relay; local-use NAT64 is site-defined) or
# they are deprecated (IPv4-compatible, IPv4-translated).
_OPAQUE_TRANSITION = (ipaddress.ip_network("2001::/32"), ipaddress.ip_network("64:ff9b:1::/48"),
                      ipaddress.ip_network("::/96"), ipaddress.ip_network("::ffff:0:0:0/96"))


class EndpointNotAllowed(ConnectionError):
    """The endpoint, or the address its name resolves to, is not one this server may reach.

    A ``ConnectionError`` (an ``OSError``) so that HTTP libraries treat it as a failed
    connection and never send a byte.
    """


def parse_entries(entries: Iterable[str]) -> tuple[tuple[str, ...], tuple[IPNetwork, ...]]:
    """Split allow-list entries into host patterns and networks; a bad entry is a ValueError
    naming it."""
    patterns: list[str] = []
    networks: list[IPNetwork] = []
    for raw in entries:
        entry = raw.strip().lower()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
            continue
        except ValueError:
            pass
        if "/" in entry or ":" in entry or not all(
                c.isalnum() or c in "-.*_" for c in entry):
            raise ValueError(f"allowed endpoint {raw!r} is neither a host pattern (like "
                             f"'*.blob.core.windows.net') nor a CIDR (like '10.0.0.0/8')")
        patterns.append(entry)
    return tuple(patterns), tuple(networks)


def is_special(address: IPAddress) -> bool:
    """Loopback, private, link-local, metadata and every other non-public address."""
    if isinstance(address, ipaddress.IPv6Address):
        carried = address.ipv4_mapped or address.sixtofour
        if carried is None and address in _NAT64:
            carried = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if carried is not None:
            return is_special(carried)
        if any(address in net for net in _OPAQUE_TRANSITION):
            return True
    return (address in METADATA_ADDRESSES or not address.is_global or address.is_loopback
            or address.is_private or address.is_link_local or address.is_multicast
            or address.is_unspecified or address.is_reserved
            or (isinstance(address, ipaddress.IPv4Address) and address in _CGNAT))


@dataclass(frozen=True)
class EndpointPolicy:
    """The operator's allow-list plus the public hosts a client needs by default."""

    patterns: tuple[str, ...] = ()
    networks: tuple[IPNetwork, ...] = ()
    public_hosts: tuple[str, ...] = field(default=())
    # One backend's own storage endpoints (exact shapes) and the hosts its client connects
    # to for itself; set by ``for_backend``.
    storage_endpoints: tuple[re.Pattern[str], ...] = ()
    service_hosts: tuple[str, ...] = ()

    @classmethod
    def from_entries(cls, entries: Iterable[str], public_hosts: Sequence[str] = ()
                     ) -> EndpointPolicy:
        patterns, networks = parse_entries(entries)
        return cls(patterns, networks, tuple(h.lower() for h in public_hosts))

    def for_backend(self, backend: str) -> EndpointPolicy:
        """This allow-list plus ``backend``'s own storage endpoints, and no other backend's."""
        return replace(self, storage_endpoints=STORAGE_ENDPOINTS.get(backend, ()),
                       service_hosts=SERVICE_HOSTS.get(backend, ()))

    # -- decisions --------------------------------------------------------------------

    def address_allowed(self, address: IPAddress) -> bool:
        if any(address in net for net in self.networks if net.version == address.version):
            return True
        return not is_special(address)

    def host_allowed(self, host: str, *, connecting: bool = False) -> bool:
        """A name matched by a pattern or a storage endpoint (or, when ``connecting``, one
        of the backend's service hosts), or an IP literal covered by a CIDR."""
        host = host.strip("[]").lower().rstrip(".")
        try:
            literal = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return (any(fnmatch.fnmatchcase(host, p) for p in (*self.patterns,
                                                                *self.public_hosts))
                    or any(p.fullmatch(host) for p in self.storage_endpoints)
                    or (connecting and host in self.service_hosts))
        return any(literal in net for net in self.networks if net.version == literal.version)

    def check_endpoint(self, url: str) -> str:
        """Refuse a URL whose scheme, credentials or host this server does not allow; returns
        the host."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise EndpointNotAllowed("an endpoint must be an http:// or https:// URL")
        if parts.username is not None or parts.password is not None:
            raise EndpointNotAllowed("an endpoint URL must not carry a user name or password")
        host = parts.hostname or ""
        if not host:
            raise EndpointNotAllowed("the endpoint URL has no host")
        if not self.host_allowed(host):
            raise EndpointNotAllowed(
                f"the endpoint host {host!r} is not allowed on this server; use the cloud's "
                "own endpoint, or ask the operator to add it to MEMPLANE_ALLOWED_ENDPOINTS")
        return host

    # -- connecting -------------------------------------------------------------------

    def connect(self, address: tuple[str, int], timeout: Any = None,
                source_address: tuple[str, int] | None = None,
                socket_options: Sequence[tuple[int, int, Any]] | None = None) -> socket.socket:
        """Resolve, vet each address, connect to a vetted one, check the peer again."""
        host, port = address
        host = host.strip("[]")
        if not self.host_allowed(host, connecting=True):
            raise EndpointNotAllowed(f"the host {host!r} is not allowed on this server")
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
        vetted = [info for info in infos
                  if self.address_allowed(ipaddress.ip_address(str(info[4][0]).split("%")[0]))]
        if not vetted:
            raise EndpointNotAllowed(
                f"{host!r} resolves only to addresses this server does not connect to")
        error: OSError | None = None
        for family, kind, proto, _, sockaddr in vetted:
            sock = socket.socket(family, kind, proto)
            try:
                for option in socket_options or ():
                    sock.setsockopt(*option)
                if timeout is None or isinstance(timeout, int | float):
                    sock.settimeout(timeout)
                if source_address:
                    sock.bind(source_address)
                sock.connect(sockaddr)
                peer = ipaddress.ip_address(str(sock.getpeername()[0]).split("%")[0])
                if not self.address_allowed(peer):
                    raise EndpointNotAllowed(f"{host!r} connected to a refused address")
                return sock
            except EndpointNotAllowed:
                sock.close()
                raise
            except OSError as exc:
                sock.close()
                error = exc
        assert error is not None
        raise error

    def urllib3_pool_classes(self, http_pool: type[Any], https_pool: type[Any]
                             ) -> dict[str, type[Any]]:
        """Subclasses of these urllib3 pools whose connections go through :meth:`connect`
        and keep to the call's deadline and the answers' ceiling (storage_adapters/deadlines)."""
        return armed_pools(_guarded_pool(http_pool, self), _guarded_pool(https_pool, self))

    def requests_adapter(self, **kwargs: Any) -> Any:
        """A ``requests`` HTTPAdapter whose every connection (redirects too) is guarded."""
        import requests.adapters
        from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

        pools = self.urllib3_pool_classes(HTTPConnectionPool, HTTPSConnectionPool)

        class GuardedAdapter(requests.adapters.HTTPAdapter):
            def init_poolmanager(self, *args: Any, **options: Any) -> None:
                super().init_poolmanager(*args, **options)
                self.poolmanager.pool_classes_by_scheme = pools

            def proxy_manager_for(self, proxy: str, **options: Any) -> Any:
                raise EndpointNotAllowed("guarded connections do not go through a proxy")

        return GuardedAdapter(**kwargs)

    def requests_session(self, session: Any = None, **adapter_options: Any) -> Any:
        """``session`` (or a new ``requests.Session``) with guarded adapters and no proxies
        from the environment."""
        import requests

        session = session if session is not None else requests.Session()
        session.trust_env = False
        adapter = self.requests_adapter(**adapter_options)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        return session

    def httpx_transport(self, **kwargs: Any) -> Any:
        """An ``httpx.HTTPTransport`` whose every connection is guarded."""
        import httpcore
        import httpx

        policy = self

        class GuardedBackend(httpcore.SyncBackend):
            def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                            local_address: str | None = None,
                            socket_options: Iterable[Any] | None = None) -> Any:
                sock = policy.connect((host, port), timeout,
                                      (local_address, 0) if local_address else None,
                                      list(socket_options or ()))
                from httpcore._backends.sync import SyncStream

                return SyncStream(sock)

        transport = httpx.HTTPTransport(trust_env=False, **kwargs)
        # httpx does not take a network backend; its pool (httpcore) does.
        transport._pool._network_backend = GuardedBackend()
        return transport


def _guarded_pool(pool: type[Any], policy: EndpointPolicy) -> type[Any]:
    base = pool.ConnectionCls

    class GuardedConnection(base):  # type: ignore[misc, valid-type]
        def _new_conn(self) -> socket.socket:
            from urllib3.exceptions import (
                ConnectTimeoutError,
                NameResolutionError,
                NewConnectionError,
            )

            try:
                return policy.connect((self._dns_host, self.port), self.timeout,
                                      self.source_address, self.socket_options)
            except socket.gaierror as exc:
                raise NameResolutionError(self.host, self, exc) from exc
            except TimeoutError as exc:
                raise ConnectTimeoutError(self, f"connection to {self.host} timed out") \
                    from exc
            except EndpointNotAllowed:
                raise
            except OSError as exc:
                raise NewConnectionError(self, f"failed to connect: {exc}") from exc

    return type(f"Guarded{pool.__name__}", (pool,), {"ConnectionCls": GuardedConnection})


def refusal_in(exc: BaseException | None, _depth: int = 0) -> EndpointNotAllowed | None:
    """The EndpointNotAllowed inside an exception a client library wrapped, if any."""
    if exc is None or _depth > 8:
        return None
    if isinstance(exc, EndpointNotAllowed):
        return exc
    inner: list[Any] = [exc.__cause__, exc.__context__, getattr(exc, "reason", None),
                        getattr(exc, "inner_exception", None), getattr(exc, "cause", None),
                        getattr(exc, "kwargs", {}).get("error") if isinstance(
                            getattr(exc, "kwargs", None), dict) else None,
                        *[a for a in getattr(exc, "args", ()) if isinstance(a, BaseException)]]
    for candidate in inner:
        if isinstance(candidate, BaseException) and candidate is not exc:
            found = refusal_in(candidate, _depth + 1)
            if found is not None:
                return found
    return None
