"""kazoo (python3-kazoo) against a ZooKeeper-protocol server: CRUD with
versions, errors, sequential and ephemeral nodes, watches, transactions,
ACLs, the Counter recipe under contention, and kazoo's four-letter-word
helpers. Usage: kazoo_basic.py host:port[,host:port...]

Prints "ok <name>" per check and exits non-zero on the first failure."""

import logging
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import (BadVersionError, NoAuthError, NodeExistsError,
                              NoChildrenForEphemeralsError, NoNodeError,
                              NotEmptyError, RolledBackError)
from kazoo.protocol.states import EventType
from kazoo.security import make_digest_acl

logging.basicConfig(level=logging.ERROR)
HOSTS = sys.argv[1]
WAIT = 10.0


def client():
    zk = KazooClient(hosts=HOSTS, timeout=10.0)
    zk.start(timeout=15)
    return zk


def wait_until(cond, what):
    deadline = time.time() + WAIT
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def raises(exc, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc:
        return
    raise AssertionError("%s(%r) did not raise %s" % (fn.__name__, args, exc.__name__))


def crud(zk):
    assert zk.create("/k/a", b"v0", makepath=True) == "/k/a"
    data, st = zk.get("/k/a")
    assert data == b"v0" and st.version == 0 and st.czxid == st.mzxid, st
    st1 = zk.set("/k/a", b"v1", version=0)
    assert st1.version == 1 and st1.mzxid > st.mzxid and st1.czxid == st.czxid, st1
    raises(BadVersionError, zk.set, "/k/a", b"x", version=0)
    raises(BadVersionError, zk.delete, "/k/a", version=7)
    raises(NodeExistsError, zk.create, "/k/a")
    raises(NoNodeError, zk.get, "/k/missing")
    raises(NoNodeError, zk.create, "/k/missing/x")
    raises(NotEmptyError, zk.delete, "/k")
    parent = zk.exists("/k")
    assert parent.numChildren == 1 and parent.pzxid == st.czxid, parent
    zk.ensure_path("/k/b/c")
    assert sorted(zk.get_children("/k")) == ["a", "b"]
    children, pst = zk.get_children("/k", include_data=True)
    assert pst.numChildren == 2 and pst.cversion == 2, pst
    zk.delete("/k", recursive=True)
    assert zk.exists("/k") is None
    assert zk.exists("/zookeeper") is not None
    assert zk.sync("/") == "/"


def sequential_and_ephemeral(zk):
    zk.create("/s")
    names = [zk.create("/s/n-", sequence=True) for _ in range(3)]
    assert names == ["/s/n-0000000000", "/s/n-0000000001", "/s/n-0000000002"], names
    other = client()
    eph = other.create("/s/e", b"", ephemeral=True)
    es = other.create("/s/es-", ephemeral=True, sequence=True)
    assert es == "/s/es-0000000004", es
    st = zk.exists(eph)
    assert st.ephemeralOwner == other.client_id[0], (st.ephemeralOwner, other.client_id)
    raises(NoChildrenForEphemeralsError, zk.create, eph + "/kid")
    gone = threading.Event()

    def watch(event):
        if event.type == EventType.DELETED and event.path == eph:
            gone.set()

    assert zk.exists(eph, watch=watch) is not None
    other.stop()
    other.close()
    assert gone.wait(WAIT), "no DELETED event for a closed session's ephemeral"
    assert sorted(zk.get_children("/s")) == ["n-0000000000", "n-0000000001", "n-0000000002"]


def watches(zk):
    zk.create("/w", b"0")
    seen = []

    @zk.DataWatch("/w")
    def data_changed(data, stat, event=None):
        seen.append(data)

    writer = client()
    for i in range(1, 4):
        writer.set("/w", str(i).encode())
        wait_until(lambda: seen and seen[-1] == str(i).encode(), "DataWatch to see %d" % i)
    kids = []

    @zk.ChildrenWatch("/w")
    def children_changed(children):
        kids.append(sorted(children))

    writer.create("/w/a")
    writer.create("/w/b")
    wait_until(lambda: kids and kids[-1] == ["a", "b"], "ChildrenWatch to see a, b")
    writer.delete("/w/a")
    wait_until(lambda: kids and kids[-1] == ["b"], "ChildrenWatch to see the delete")

    # A one-shot watch fires once with the event's type and path.
    events = []
    zk.get("/w/b", watch=events.append)
    writer.set("/w/b", b"x")
    writer.set("/w/b", b"y")
    wait_until(lambda: len(events) == 1, "the get watch")
    zk.sync("/")
    time.sleep(0.1)
    assert len(events) == 1 and events[0].type == EventType.CHANGED and events[0].path == "/w/b", events
    created = []
    zk.exists("/w/new", watch=created.append)
    writer.create("/w/new")
    wait_until(lambda: created, "the exists watch")
    assert created[0].type == EventType.CREATED, created
    writer.delete("/w", recursive=True)
    wait_until(lambda: seen[-1] is None, "DataWatch to see the delete")
    writer.stop()
    writer.close()


def transactions(zk):
    zk.create("/t", b"0")
    tx = zk.transaction()
    tx.create("/t/a", b"a")
    tx.set_data("/t", b"1", version=0)
    tx.check("/t", 1)
    tx.create("/t/s-", sequence=True)
    tx.delete("/t/a")
    res = tx.commit()
    assert res[0] == "/t/a" and res[1].version == 1 and res[2] is True and res[3] == "/t/s-0000000001" and res[4] is True, res
    tx = zk.transaction()
    tx.create("/t/b")
    tx.check("/t", 0)  # stale
    tx.create("/t/c")
    res = tx.commit()
    assert isinstance(res[0], RolledBackError) and isinstance(res[1], BadVersionError), res
    assert zk.exists("/t/b") is None and zk.exists("/t/c") is None
    assert zk.get("/t")[0] == b"1"


def acls(zk):
    acl = make_digest_acl("alice", "secret", all=True)
    alice = KazooClient(hosts=HOSTS, timeout=10.0, auth_data=[("digest", "alice:secret")])
    alice.start(timeout=15)
    alice.create("/acl", b"private", acl=[acl])
    raises(NoAuthError, zk.get, "/acl")
    raises(NoAuthError, zk.set, "/acl", b"x")
    assert alice.get("/acl")[0] == b"private"
    got, st = alice.get_acls("/acl")
    assert got == [acl] and st.aversion == 0, (got, st)
    alice.set_acls("/acl", [acl, make_digest_acl("bob", "pw", read=True)], version=0)
    raises(BadVersionError, alice.set_acls, "/acl", [acl], version=0)
    bob = KazooClient(hosts=HOSTS, timeout=10.0, auth_data=[("digest", "bob:pw")])
    bob.start(timeout=15)
    assert bob.get("/acl")[0] == b"private"
    raises(NoAuthError, bob.set, "/acl", b"x")
    zk.add_auth("digest", "alice:secret")
    zk.set("/acl", b"now zk may")
    for c in (alice, bob):
        c.stop()
        c.close()


def counter(zk):
    # kazoo's Counter is a versioned read-modify-write that retries on
    # BadVersion: concurrent clients lose no increment.
    clients = [client() for _ in range(4)]
    errors = []

    def work(c):
        try:
            ctr = c.Counter("/counter")
            for _ in range(25):
                ctr += 1
        except Exception as e:  # noqa
            errors.append(e)

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert zk.Counter("/counter").value == 100, zk.Counter("/counter").value
    for c in clients:
        c.stop()
        c.close()


def four_letter_words(zk):
    assert zk.command(b"ruok") == "imok"
    version = zk.server_version()  # parsed from envi
    assert version[0] == 3 and version[1] >= 5, version
    assert "Mode: " in zk.command(b"srvr")


def main():
    zk = client()
    for name, fn in [("crud", crud), ("sequential_and_ephemeral", sequential_and_ephemeral),
                     ("watches", watches), ("transactions", transactions), ("acls", acls),
                     ("counter", counter), ("four_letter_words", four_letter_words)]:
        fn(zk)
        print("ok", name, flush=True)
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
