"""TLS and SASL checked before laggard's Kafka clients connect: a refusal is one line at once, not a client retrying
until its timeout (``check_security``), and the one TLS context of the settings (``tls_context``)."""

from __future__ import annotations

import socket
import ssl
from typing import Any

from streams.errors import BrokerRefused
from streams.settings import Settings, host_port

SECURITY_CHECK_S = 8.0
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # with a username and password, in both libraries
_checked: set[tuple[Any, ...]] = set()


def tls_context(settings: Settings) -> ssl.SSLContext:
    """The TLS context of the settings (CA file, client certificate): the one Faust's clients use and the one
    ``check_security`` tries. A file that cannot be read names its setting."""
    try:
        context = ssl.create_default_context(cafile=settings.ssl_cafile)
    except (OSError, ssl.SSLError) as exc:
        raise BrokerRefused(settings.bootstrap_servers,
                            f"LAGGARD_SSL_CAFILE={settings.ssl_cafile}: {_reason(exc)}") from None
    if settings.ssl_certfile:
        try:
            context.load_cert_chain(settings.ssl_certfile, settings.ssl_keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise BrokerRefused(settings.bootstrap_servers, f"LAGGARD_SSL_CERTFILE={settings.ssl_certfile} / "
                                f"LAGGARD_SSL_KEYFILE={settings.ssl_keyfile}: {_reason(exc)}") from None
    return context


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "verify_message", None) or getattr(exc, "strerror", None) or
               getattr(exc, "reason", None) or exc)


def check_security(settings: Settings, timeout_s: float = SECURITY_CHECK_S) -> None:
    """With TLS or SASL: shake hands with the broker once per process and raise BrokerRefused, in one line, when
    it presents a certificate the settings do not trust or refuses the SASL user. kafka-python (like aiokafka)
    only logs these and retries until its bootstrap timeout, to end with "unable to bootstrap"."""
    protocol = settings.security_protocol
    key = (settings.bootstrap_servers, protocol, settings.sasl_mechanism, settings.sasl_username,
           settings.sasl_password, settings.ssl_cafile, settings.ssl_certfile, settings.ssl_keyfile)
    if protocol == "PLAINTEXT" or key in _checked:
        return
    if protocol.startswith("SASL"):
        missing = [f"LAGGARD_SASL_{name.upper()}" for name in ("mechanism", "username", "password")
                   if not getattr(settings, f"sasl_{name}")]
        if missing:
            raise BrokerRefused(settings.bootstrap_servers, f"{protocol} needs {', '.join(missing)}")
        if settings.sasl_mechanism not in SASL_MECHANISMS:
            raise BrokerRefused(settings.bootstrap_servers, f"LAGGARD_SASL_MECHANISM={settings.sasl_mechanism}: "
                                f"laggard speaks {', '.join(SASL_MECHANISMS)}")
    # Remembered only once the broker let us in: an unreachable broker is the clients' own wait to report.
    if (not protocol.endswith("SSL") or _check_tls(settings, timeout_s)) and (
            not protocol.startswith("SASL") or _check_sasl(settings, timeout_s)):
        _checked.add(key)


def _check_tls(settings: Settings, timeout_s: float) -> bool:
    """True once a bootstrap address completed a TLS handshake; raises when one refused it."""
    context = tls_context(settings)
    for address in settings.bootstrap_servers.split(","):
        host, port = host_port(address)
        try:
            with socket.create_connection((host, port), timeout=timeout_s) as raw:
                context.wrap_socket(raw, server_hostname=host).close()
                return True
        except ssl.SSLCertVerificationError as exc:
            raise BrokerRefused(settings.bootstrap_servers, f"the TLS certificate of {address} is not trusted "
                                f"({exc.verify_message}); set LAGGARD_SSL_CAFILE to the CA that signed it") from None
        except ssl.SSLError as exc:
            raise BrokerRefused(settings.bootstrap_servers, f"TLS handshake with {address} failed ({_reason(exc)}); "
                                "is it the broker's SSL or SASL_SSL listener?") from None
        except (OSError, ValueError):
            continue  # not reachable: the next address, and the client's own wait after that
    return False


def _check_sasl(settings: Settings, timeout_s: float) -> bool:
    """One SASL handshake with aiokafka (the library of Faust's clients), which raises the broker's refusal at
    once; run in a thread of its own, as this may be called from within the worker's event loop."""
    import asyncio
    import threading

    from aiokafka.conn import create_conn
    from aiokafka.errors import BrokerResponseError, SaslAuthenticationFailed
    from aiokafka.errors import KafkaError as AioKafkaError

    context = tls_context(settings) if settings.security_protocol == "SASL_SSL" else None
    outcome: list[BaseException | None] = []

    async def handshake(host: str, port: int) -> None:
        conn = await create_conn(host, port, request_timeout_ms=int(timeout_s * 1000), ssl_context=context,
                                 security_protocol=settings.security_protocol,
                                 sasl_mechanism=settings.sasl_mechanism, sasl_plain_username=settings.sasl_username,
                                 sasl_plain_password=settings.sasl_password)
        conn.close()

    def attempt() -> None:
        for address in settings.bootstrap_servers.split(","):
            host, port = host_port(address)
            try:
                asyncio.run(asyncio.wait_for(handshake(host, port), timeout_s))
                outcome.append(None)
                return
            except (AioKafkaError, OSError, ValueError, TimeoutError) as exc:
                outcome.append(exc)

    thread = threading.Thread(target=attempt, name="laggard-sasl-check", daemon=True)
    thread.start()
    thread.join(timeout_s * len(settings.bootstrap_servers.split(",")) + 1)
    refused = [exc for exc in outcome if isinstance(exc, BrokerResponseError)]
    if None in outcome or not refused:
        return None in outcome  # in; or not reachable at all, which the client's own wait says
    who = f"SASL user {settings.sasl_username!r} ({settings.sasl_mechanism})"
    why = str(refused[-1]).split(": ", 1)[-1]
    if isinstance(refused[-1], SaslAuthenticationFailed):
        raise BrokerRefused(settings.bootstrap_servers, f"{settings.bootstrap_servers} refused {who}: {why}; check "
                            "LAGGARD_SASL_USERNAME and LAGGARD_SASL_PASSWORD")
    raise BrokerRefused(settings.bootstrap_servers, f"the SASL handshake of {who} with {settings.bootstrap_servers} "
                        f"failed ({type(refused[-1]).__name__}): is it a {settings.security_protocol} listener that "
                        f"enables {settings.sasl_mechanism}?")
