"""What a failed remote request means: worth another attempt (transient) or not (permanent), and the one-line error.

The back-ends raise very different things for the same fault, and wrap the fault that matters: s3fs an ``OSError``
around botocore's ``ClientError``, fsspec's HTTP file system a ``FileNotFoundError`` around aiohttp's
``ClientResponseError`` (a 503 to a size request), requests a ``ConnectionError`` around urllib3's errors around
``ConnectionResetError``. :func:`is_transient` looks through the wrapping (:func:`chain`) and judges, in this order:

1. mxrec's own findings about an answer: cut short, incomplete, of the wrong range (transient), or a server that
   ignores ``Range`` (permanent);
2. an HTTP status anywhere in the chain: 5xx, 408 and 429 are transient, every other status is permanent
   (a status wins over the exception's type: fsspec says "not found" for a 503);
3. time-outs, dropped, reset or refused connections, cut bodies (by type, errno or name): transient;
4. not found, access denied, a folder, a missing extra: permanent; anything else: permanent.

:func:`remote_error` turns what was raised into one :class:`~mxrec.errors.RemoteError` naming the URL, what was being
done, and the real cause (the status, "cannot connect", ...). ``tests/storage/test_request_layer.py`` holds each rule to
what s3fs/botocore, aiohttp/fsspec and requests really raise against real servers.
"""

from __future__ import annotations

import asyncio
import errno
import socket

from mxrec.errors import MissingExtraError, RemoteAccessError, RemoteError, RemoteNotFoundError


class ShortReadError(RemoteError):
    """An answer with fewer bytes than asked for or announced: a truncated body (worth fetching again)."""


class IncompleteAnswerError(RemoteError):
    """An answer that cannot be used as it came: a redirect without its whole ``Location``, a range other than
    the one asked for, a size the server did not state (worth asking again)."""


class RangeNotHonouredError(RemoteError):
    """A server answered a ranged read with more bytes than asked (the whole file): it ignores ``Range``."""


def chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what lies under it: its cause and context, and the exceptions it wraps (``reason``, ``args``)."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo and len(seen) < 16:
        current = todo.pop(0)
        if any(current is s for s in seen):
            continue
        seen.append(current)
        wrapped = [current.__cause__, current.__context__, getattr(current, "reason", None),
                   getattr(current, "last_attempt", None), *getattr(current, "args", ())]
        todo += [w for w in wrapped if isinstance(w, BaseException)]
    return seen


def _own_status(exc: BaseException) -> int | None:
    if type(exc).__module__.startswith("aiohttp.http_exceptions"):  # aiohttp's own parse errors: a "code" 400
        return None  # that is no answer of the server (a cut body: ContentLengthError)
    for attr in ("status", "status_code", "code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    response = getattr(exc, "response", None)
    if isinstance(response, dict):  # botocore ClientError
        value = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(value, int):
            return value
    value = getattr(response, "status_code", None)  # requests
    return value if isinstance(value, int) else None


def status_of(exc: BaseException) -> int | None:
    """The HTTP status carried by a back-end's exception or by one it wraps, if any."""
    return next((s for s in map(_own_status, chain(exc)) if s is not None), None)


#: errno values of transient faults: s3fs raises ``OSError(EBUSY)`` for 503 SlowDown / ServiceUnavailable (and 409
#: OperationAborted), ``OSError(EREMOTEIO)`` for 500 InternalError; the rest are dropped or refused connections.
_TRANSIENT_ERRNOS = {getattr(errno, name) for name in ("EBUSY", "EREMOTEIO", "ETIMEDOUT", "ECONNRESET",
                                                        "ECONNABORTED", "ECONNREFUSED", "EPIPE", "EAGAIN",
                                                        "ENETUNREACH", "EHOSTUNREACH") if hasattr(errno, name)}
#: class names (anywhere in an exception's MRO) of transient faults the back-ends raise under their own names:
#: botocore's ``ResponseStreamingError``/``IncompleteReadError``/``ReadTimeoutError``, aiohttp's
#: ``ClientPayloadError``/``ServerDisconnectedError``, urllib3's ``ProtocolError``, requests' ``ChunkedEncodingError``.
_TRANSIENT_NAMES = ("Timeout", "Connection", "Connector", "Incomplete", "Payload", "Disconnected", "Reset",
                    "Chunked", "ProtocolError", "ReadError", "EndpointConnection", "SlowDown", "Throttl",
                    "ServerError", "RetryError", "TransportError", "ResponseStreaming")
_TRANSIENT_WORDS = ("SlowDown", "reduce your request rate", "reset by peer", "timed out", "Connection broken")
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, MissingExtraError)


def is_transient(exc: BaseException) -> bool:
    """Whether a failed request is worth trying again (see the module docstring for the rules and their order).

    Parameters
    ----------
    exc
        What the back-end (or mxrec's check of its answer) raised.

    Returns
    -------
    bool
        ``True`` for 5xx/408/429, throttling, time-outs, dropped, reset or short answers; ``False`` otherwise.
    """
    if isinstance(exc, (ShortReadError, IncompleteAnswerError)):
        return True
    if isinstance(exc, (RangeNotHonouredError, MissingExtraError)):
        return False
    status = status_of(exc)
    if status is not None:
        return status >= 500 or status in (408, 429)
    links = chain(exc)
    if any(isinstance(e, (TimeoutError, ConnectionError, asyncio.TimeoutError, socket.timeout)) for e in links):
        return True
    if any(isinstance(e, OSError) and e.errno in _TRANSIENT_ERRNOS for e in links):
        return True
    if isinstance(exc, _PERMANENT):
        return False
    names = " ".join(cls.__name__ for e in links for cls in type(e).__mro__)
    text = " ".join(str(e) for e in links)
    return any(n in names for n in _TRANSIENT_NAMES) or any(w in text for w in _TRANSIENT_WORDS)


def first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped (a traceback's or a server's page's first words)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0].strip() if lines else ""


def _connection_failure(exc: BaseException) -> str | None:
    """What kept the request from reaching the server (refused, no route, no such host), or ``None``."""
    links = chain(exc)
    if any(_own_status(e) is not None for e in links):
        return None  # the server answered
    for e in links:
        if isinstance(e, socket.gaierror):
            return f"cannot connect: the host name does not resolve ({e.strerror or e}); is there a network?"
    for e in links:
        if isinstance(e, (ConnectionRefusedError, ConnectionAbortedError)) or (
                isinstance(e, OSError) and e.errno in (errno.ECONNREFUSED, errno.ENETUNREACH, errno.EHOSTUNREACH)):
            return f"cannot connect: {e.strerror or first_line(str(e))}"
    names = " ".join(cls.__name__ for e in links for cls in type(e).__mro__)
    if any(n in names for n in ("ClientConnectorError", "NewConnectionError", "EndpointConnectionError",
                                "ConnectTimeout")):
        return f"cannot connect: {first_line(str(links[-1])) or type(links[-1]).__name__}"
    return None


def _detail(exc: BaseException) -> str:
    """The cause in a few words: the deepest exception that says something, with the status when known."""
    shown = next((e for e in chain(exc) if first_line(str(e))), exc)
    detail = f"{type(shown).__name__}: {first_line(str(shown))}".rstrip(": ")
    status = status_of(exc)
    if status is not None and str(status) not in detail:  # s3fs's OSError says "Please reduce...", not "503"
        detail += f" (HTTP {status})"
    return detail


def remote_error(url: str, exc: BaseException, what: str = "read", *, attempts: int = 1,
                 seconds: float | None = None) -> RemoteError:
    """One mxrec error naming ``url`` for what a back-end raised while doing ``what``: one line, the real cause.

    Parameters
    ----------
    url
        The file, folder or pattern the request was for.
    exc
        What was raised.
    what
        What was being done (``"read bytes 0..100"``, ``"upload"``).
    attempts, seconds
        How many attempts were made, over how long: said in the message when more than one.

    Returns
    -------
    RemoteError
        A :class:`~mxrec.errors.RemoteNotFoundError` for a missing file, a :class:`~mxrec.errors.RemoteAccessError`
        for refused credentials, a :class:`~mxrec.errors.RemoteError` otherwise (``exc`` itself when it is one
        already and was made after a single attempt).
    """
    tries = "" if attempts <= 1 else f" after {attempts} attempts" + ("" if seconds is None else f" in {seconds:.1f} s")
    if isinstance(exc, RemoteError):
        if not tries:
            return exc
        return type(exc)(exc.url, f"{exc.reason} (gave up{tries})")
    status = status_of(exc)
    detail = _detail(exc)
    unreachable = _connection_failure(exc)  # (fsspec's HTTP info says FileNotFoundError for a refused connection)
    if unreachable is not None:
        return RemoteError(url, f"{what} failed{tries}: {unreachable}")
    if status == 404 or (status is None and isinstance(exc, FileNotFoundError)):
        return RemoteNotFoundError(url, f"{what}: no such file, bucket or object ({detail})")
    if status in (401, 403) or (status is None and isinstance(exc, PermissionError)):
        return RemoteAccessError(url, f"{what}: access denied: check the credentials (environment, fsspec "
                                      f"configuration or storage options) ({detail})")
    return RemoteError(url, f"{what} failed{tries}: {detail}")
