"""Opt-in fetching of `http(s)://` media URLs, with the checks that keep it from being an SSRF hole.

Off unless the server is started with `--allowed-media-domains` (host patterns, as vLLM takes
them: `upload.wikimedia.org`, `*.example.com`, `*` for any host). Every hop, the first URL and
each redirect (at most `MAX_REDIRECTS`), is checked before anything is sent:

- the scheme is http or https, the URL has no user:password part, the host matches a pattern;
- the host is resolved (`resolve`, `socket.getaddrinfo` unless a test gives another), and every
  address it resolves to must be a public one: loopback, private (10/8, 172.16/12, 192.168/16,
  fc00::/7), link-local (169.254/16 with the cloud metadata address 169.254.169.254, fe80::/10),
  shared, reserved, multicast and unspecified addresses are refused, IPv4 inside IPv6
  (`::ffff:127.0.0.1`) by its IPv4 address; an odd spelling of an address (`2130706433`,
  `0177.0.0.1`) is refused by what the resolver makes of it. `--allow-media-networks` (CIDRs)
  lets a deployment fetch from its own media store on a private network;
- the connection goes to the address that was checked (`_PinnedHTTP(S)Connection`), never to a
  second resolution of the name, so DNS rebinding has no window; https verifies the certificate
  for the URL's host name.

The body streams to a temporary file under `--max-media-bytes` (413 past it), within
`--media-fetch-timeout` seconds for the whole fetch, redirects included. Its `Content-Type`
must fit the part (`image/*` for an image part, `video/*` for a video, `application/pdf` for a
file part). Every refusal is a 400 (413 for size) naming the part, the URL's host and the flag.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from .errors import APIError

__all__ = ["MediaFetcher", "MAX_REDIRECTS", "CONTENT_TYPES"]

MAX_REDIRECTS = 5
_CHUNK = 64 << 10
# What a part of each kind may be served as (the media type, parameters aside).
CONTENT_TYPES: dict[str, tuple[str, ...]] = {
    "image": ("image/",),
    "video": ("video/", "image/gif"),
    "file": ("application/pdf",),
}
Resolver = Callable[..., Sequence[tuple]]  # socket.getaddrinfo's signature


@dataclass
class MediaFetcher:
    """Fetches media URLs for one server. domains: the host patterns (empty: fetching is off);
    networks: address ranges allowed although not public; timeout: seconds for a whole fetch;
    max_bytes: largest body; folder: where bodies are streamed (None: the system temp dir);
    resolve: the name resolver."""

    domains: tuple[str, ...] = ()
    networks: tuple[str, ...] = ()
    timeout: float = 10.0
    max_bytes: int = 64 << 20
    folder: Path | None = None
    resolve: Resolver = socket.getaddrinfo
    _nets: list = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.domains = tuple(d.strip().lower().rstrip(".") for d in self.domains if d.strip())
        self._nets = [ipaddress.ip_network(n, strict=False) for n in self.networks]

    @property
    def enabled(self) -> bool:
        return bool(self.domains)

    def fetch(self, url: str, kind: str, param: str) -> tuple[bytes, str]:
        """(the body, its media type) of `url` for a part of `kind` (image, video, file); raises
        `APIError` (400, or 413 past the byte cap) naming `param`."""
        if not self.enabled:
            raise _refuse(
                param,
                "this server does not fetch remote URLs (start it with --allowed-media-domains "
                "HOST to allow some); send the media as a data: URL (base64) or a file:// URL "
                "under --media-root",
                "invalid_url",
            )
        deadline = time.monotonic() + self.timeout
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(url)
            host, port, address = self._check(url, parts, param)
            conn = _connection(parts.scheme, host, address, port, self._left(deadline, param))
            try:
                path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                conn.request("GET", path, headers={"Host": parts.netloc, "Accept": "*/*"})
                sock = conn.sock  # the response may take it over from `conn`
                resp = conn.getresponse()
                if resp.status in (301, 302, 303, 307, 308):
                    target = resp.getheader("Location")
                    if not target:
                        raise _refuse(param, f"{host} answered {resp.status} with no Location")
                    url = urljoin(url, target)  # the next hop is checked from the start
                    continue
                if resp.status != 200:
                    raise _refuse(param, f"{host} answered HTTP {resp.status}", "fetch_failed")
                mime = self._content_type(resp, kind, host, param)
                return self._body(sock, resp, param, deadline), mime
            except (OSError, http.client.HTTPException) as e:
                if isinstance(e, TimeoutError) or "timed out" in str(e):
                    raise self._slow(param) from None
                raise _refuse(
                    param, f"could not fetch from {host} ({type(e).__name__})", "fetch_failed"
                ) from None
            finally:
                conn.close()
        raise _refuse(param, f"more than {MAX_REDIRECTS} redirects", "too_many_redirects")

    # -- the checks -------------------------------------------------------------------------
    def _check(self, url: str, parts, param: str) -> tuple[str, int, str]:
        """(host, port, the address to connect to) of one hop, or the refusal."""
        if parts.scheme not in ("http", "https"):
            raise _refuse(param, f"only http and https URLs are fetched, not {parts.scheme!r}")
        if "@" in parts.netloc:
            raise _refuse(param, "URLs with a user name or password are not fetched")
        try:
            host, port = (parts.hostname or "").rstrip("."), parts.port
        except ValueError:
            raise _refuse(param, "the URL's port is not a number from 0 to 65535") from None
        if not host:
            raise _refuse(param, "the URL has no host")
        if not any(fnmatchcase(host, d) or d == host for d in self.domains):
            raise _refuse(
                param,
                f"host {host[:80]!r} is not one this server fetches from (--allowed-media-domains)",
                "domain_not_allowed",
            )
        port = port or (443 if parts.scheme == "https" else 80)
        try:
            found = self.resolve(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            raise _refuse(param, f"host {host[:80]!r} does not resolve", "fetch_failed") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
        if not addresses:
            raise _refuse(param, f"host {host[:80]!r} does not resolve", "fetch_failed")
        for a in addresses:  # every address: the connection must not pick a refused one
            why = self._forbidden(a)
            if why:
                raise _refuse(
                    param,
                    f"host {host[:80]!r} resolves to {why} address {a}, which this server does "
                    "not fetch from (--allow-media-networks to allow a network)",
                    "address_not_allowed",
                )
        return host, port, addresses[0]

    def _forbidden(self, address: str) -> str:
        """Why an address may not be fetched from ('' when it may)."""
        ip = ipaddress.ip_address(address.split("%")[0])  # an IPv6 zone id aside
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in net for net in self._nets):
            return ""
        for what, test in (
            ("a loopback", ip.is_loopback),
            ("a link-local", ip.is_link_local),
            ("a private", ip.is_private),
            ("an unspecified", ip.is_unspecified),
            ("a multicast", ip.is_multicast),
            ("a reserved", ip.is_reserved),
            ("a non-public", not ip.is_global),
        ):
            if test:
                return what
        return ""

    def _content_type(self, resp, kind: str, host: str, param: str) -> str:
        mime = (resp.getheader("Content-Type") or "").split(";")[0].strip().lower()
        if not mime.startswith(CONTENT_TYPES[kind]):
            raise _refuse(
                param,
                f"{host} sent {mime[:60] or 'no Content-Type'!r}, not the "
                f"{' or '.join(CONTENT_TYPES[kind])}{'*' if kind == 'image' else ''} a "
                f"{kind} part takes",
                "invalid_media_type",
            )
        return mime

    def _body(self, sock: socket.socket, resp, param: str, deadline: float) -> bytes:
        """The body, streamed to a temporary file under the byte cap and the deadline."""
        declared = resp.getheader("Content-Length") or ""
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise self._big(param, int(declared))
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.TemporaryFile(dir=self.folder, prefix=".fetch-") as f:
            size = 0
            while True:
                sock.settimeout(self._left(deadline, param))  # each read within the deadline
                chunk = resp.read1(_CHUNK)
                if not chunk:
                    break
                size += len(chunk)
                if size > self.max_bytes:
                    raise self._big(param, size, at_least=True)
                f.write(chunk)
                self._left(deadline, param)
            f.seek(0)
            return f.read()

    # -- errors -------------------------------------------------------------------------------
    def _left(self, deadline: float, param: str) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._slow(param)
        return left

    def _slow(self, param: str) -> APIError:
        return _refuse(
            param,
            f"the media did not arrive within {self.timeout:g} s (--media-fetch-timeout)",
            "fetch_timeout",
        )

    def _big(self, param: str, size: int, at_least: bool = False) -> APIError:
        return APIError(
            413,
            f"{param}: the media at this URL is {'over ' if at_least else ''}{size:,} bytes, "
            f"over this server's limit of {self.max_bytes:,} bytes (--max-media-bytes)",
            code="media_too_large",
            param=param,
        )


def _refuse(param: str, why: str, code: str = "url_not_allowed") -> APIError:
    return APIError(400, f"{param}: {why}", code=code, param=param)


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to a checked address (the name is not resolved again)."""

    def __init__(self, address: str, port: int, timeout: float):
        super().__init__(address, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """An HTTPS connection to a checked address, verifying the certificate for `host`."""

    def __init__(self, host: str, address: str, port: int, timeout: float):
        self._tls = ssl.create_default_context()
        super().__init__(address, port, timeout=timeout, context=self._tls)
        self._host_name, self._address = host, address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self._host_name)


def _connection(
    scheme: str, host: str, address: str, port: int, timeout: float
) -> http.client.HTTPConnection:
    if scheme == "https":
        return _PinnedHTTPSConnection(host, address, port, timeout)
    return _PinnedHTTPConnection(address, port, timeout)
