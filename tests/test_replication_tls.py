"""Replication over TLS (``tls-replication yes``): a replica syncs from a master's TLS port, as Redis."""

from __future__ import annotations

import time

import redis

from .servers import free_port, start_respqueue
from .test_replication import until
from .test_tls import Certs, _tls_flags, certs  # noqa: F401  (certs is a fixture)


def _tls_client(port: int, c: Certs) -> redis.Redis:
    return redis.Redis(
        port=port,
        ssl=True,
        ssl_ca_certs=c.ca_crt,
        ssl_certfile=c.client_crt,
        ssl_keyfile=c.client_key,
        socket_timeout=10,
    )


def test_replica_syncs_over_tls(certs: Certs) -> None:  # noqa: F811
    mport, rport = free_port(), free_port()
    # the replicas are pointed at the master's TLS port: only a TLS link can talk to it
    master = start_respqueue(*_tls_flags(certs, mport))
    replica = None
    try:
        m = _tls_client(mport, certs)
        until(lambda: m.ping(), what="the master's TLS port")
        m.set("before", "1")
        m.rpush("list", *[str(i) for i in range(100)])
        replica = start_respqueue(
            *_tls_flags(certs, rport), "--tls-replication", "yes", "--replicaof", f"127.0.0.1 {mport}"
        )
        r = redis.Redis(port=replica.port, socket_timeout=10)
        until(lambda: r.info("replication").get("master_link_status") == "up", what="the TLS link up")
        m.set("after", "2")
        until(lambda: r.get("after") == b"2", what="a write streamed over TLS")
        assert r.get("before") == b"1" and r.llen("list") == 100
        # the master sees the replica at its TLS port, as Redis with tls-replication
        slaves = m.info("replication")
        assert slaves["connected_slaves"] == 1 and slaves["slave0"]["port"] == rport
        # without tls-replication a replica cannot talk to the TLS port: its link stays down
        plain = start_respqueue("--replicaof", f"127.0.0.1 {mport}")
        try:
            p = redis.Redis(port=plain.port, socket_timeout=10)
            time.sleep(1.5)
            assert p.info("replication")["master_link_status"] == "down"
            assert p.get("before") is None
        finally:
            plain.stop()
        m.close()
        r.close()
    finally:
        if replica is not None:
            replica.stop()
        master.stop()

