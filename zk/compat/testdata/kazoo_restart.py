"""One kazoo (python3-kazoo) client racing a server's restart, for
TestCrashRestartClients. Usage: kazoo_restart.py host:port name root

Prints "ready" once kazoo is imported, then waits for a line "go" on stdin
(sent right after the server was started again), connects at once
(retrying every 10 ms while the port comes up), and writes and reads back:
a sequential node under root with data naming the client, setData on it,
and an ephemeral root/neweph-<name>. It prints one JSON line with what the
server answered (session id and password, paths, Stats) and the mismatches
it saw, and exits without closing its session, so that the test can
re-attach to it with the id and password."""

import json
import logging
import os
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError
from kazoo.retry import KazooRetry

logging.basicConfig(level=logging.CRITICAL)
HOST, NAME, ROOT = sys.argv[1:4]


class Failures(logging.Handler):
    """Keeps what kazoo logs as errors: a handshake reply kazoo cannot use
    (say, one without a password) kills its connection thread, which it
    only logs; start() would then wait out its timeout."""

    def __init__(self):
        super().__init__(level=logging.ERROR)
        self.seen = []

    def emit(self, record):
        msg = record.getMessage()
        if record.exc_info:
            msg += ": %s: %s" % (record.exc_info[0].__name__, record.exc_info[1])
        self.seen.append(msg)


FAILURES = Failures()
_kazoo_log = logging.getLogger("kazoo")
_kazoo_log.setLevel(logging.ERROR)
_kazoo_log.propagate = False
_kazoo_log.addHandler(FAILURES)


def start(zk, timeout):
    connected = zk.start_async()
    deadline = time.time() + timeout
    while not connected.wait(0.02):
        if FAILURES.seen:
            raise RuntimeError("kazoo could not connect: " + "; ".join(FAILURES.seen))
        if time.time() > deadline:
            raise RuntimeError("kazoo not connected within %ss" % timeout)


def main():
    # Bounded: the test waits for this process at most a minute.
    threading.Timer(45.0, lambda: os._exit(3)).start()
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        os._exit(2)
    rep = {"name": NAME, "errors": []}

    def check(cond, what):
        if not cond:
            rep["errors"].append(what)

    try:
        # kazoo waits session timeout / number of hosts for the answer to
        # its handshake; a ZooKeeper server still loading its database may
        # take the handshake and never answer. The same host five times
        # makes that 2 s, as the go-zookeeper clients' in the test.
        zk = KazooClient(
            hosts=",".join([HOST] * 5), timeout=10.0,
            connection_retry=KazooRetry(max_tries=-1, delay=0.01, backoff=1, max_jitter=0, max_delay=0.01),
            command_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=1, max_jitter=0, deadline=20))
        start(zk, 30)
        sid, pw = zk.client_id
        rep["session_id"], rep["passwd"] = sid, pw.hex()

        path = zk.retry(zk.create, ROOT + "/new-", NAME.encode(), sequence=True)
        rep["path"] = path
        data, st = zk.retry(zk.get, path)
        check(data == NAME.encode(), "create %s: reads back %r, want %r" % (path, data, NAME))
        check(st.version == 0 and st.czxid == st.mzxid,
              "create %s: reads back version %d czxid %#x mzxid %#x" % (path, st.version, st.czxid, st.mzxid))

        want = (NAME + "/v1").encode()
        st1 = zk.retry(zk.set, path, want, version=-1)
        rep["set_version"], rep["set_mzxid"] = st1.version, st1.mzxid
        check(st1.version >= 1 and st1.czxid == st.czxid and st1.mzxid > st.mzxid,
              "setData %s: reply version %d czxid %#x mzxid %#x after create czxid %#x"
              % (path, st1.version, st1.czxid, st1.mzxid, st.czxid))
        data, st2 = zk.retry(zk.get, path)
        check(data == want, "setData %s: reads back %r, want %r" % (path, data, want))
        check(st2.version == st1.version and st2.mzxid == st1.mzxid,
              "setData %s: reply version %d mzxid %#x, read shows version %d mzxid %#x"
              % (path, st1.version, st1.mzxid, st2.version, st2.mzxid))

        eph = ROOT + "/neweph-" + NAME
        try:
            got = zk.retry(zk.create, eph, NAME.encode(), ephemeral=True)
            check(got == eph, "create %s: reply names %s" % (eph, got))
        except NodeExistsError:
            pass  # a retried create found its own node; the owner check below tells
        est = zk.retry(zk.exists, eph)
        check(est is not None and est.ephemeralOwner == sid,
              "ephemeral %s: owner %s, want the session %#x" % (eph, est and hex(est.ephemeralOwner), sid))
        check(zk.client_id == (sid, pw), "session changed under the client: %r, was %#x" % (zk.client_id, sid))
        check(not FAILURES.seen, "kazoo logged errors: " + "; ".join(FAILURES.seen))
    except Exception as e:  # reported, not raised: the test wants the JSON
        rep["errors"].append("%s: %r" % (type(e).__name__, e))
    print(json.dumps(rep), flush=True)
    os._exit(0)  # no close: the session lives on for the test to re-attach


main()
