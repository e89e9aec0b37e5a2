"""kazoo's read-only mode against a server cut off from the quorum.

Usage: kazoo_readonly.py VICTIM ALL

VICTIM is the address of the server the test isolates; ALL every server's.
The test drives the phases on stdin, one word a line; the script answers
each with "phase <word> done" (and "ok <check>" for every check passed,
"FAIL <check>: why" for one that failed) and exits non-zero on a failure.

  start     "old", a read-only-capable client (read_only=True), starts
            read-write on VICTIM alone and creates an ephemeral (a session
            of the cluster even where sessions start local); /rotest
            created on ALL
  isolated  VICTIM is cut off: "old" is refused there (ZooKeeper 3.8 refuses
            a cluster session in read-only mode); a new read-only client
            becomes CONNECTED_RO, reads /rotest, a write gets
            NotReadOnlyCallError, isro says "ro"; a client that did not ask
            for read-only gets no session
  restarted VICTIM was killed (SIGKILL) and restarted, still cut off:
            "restarted log" (ZooKeeper, which loads its whole transaction log
            at start): the client is read-only again and reads; "restarted
            snapshot" (coord, which applies at start only its last snapshot,
            since without a leader it cannot know which logged entries are
            committed): the client, which has seen more than that, is
            refused rather than shown an older state, and a new read-only
            client (no session, nothing seen) is served read-only
  healed    VICTIM is back: "old" is read-write again; the client moves to a read-write session by
            itself (kazoo's isro pinger, or the server closing read-only
            connections) and writes
  killed    VICTIM was killed and restarted with this client and others
            reconnecting at once: the client writes again
"""

import sys
import time
import logging

from kazoo.client import KazooClient
from kazoo.protocol.states import KeeperState
from kazoo.exceptions import NotReadOnlyCallError
from kazoo.handlers.threading import KazooTimeoutError

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

victim, everyone = sys.argv[1], sys.argv[2]
failed = False


def ok(name):
    print("ok " + name, flush=True)


def fail(name, why):
    global failed
    failed = True
    print("FAIL %s: %s" % (name, why), flush=True)


def wait_state(c, want, limit):
    deadline = time.time() + limit
    while time.time() < deadline:
        if c.client_state == want:
            return True
        time.sleep(0.05)
    return False


def get(c, path, t=10):
    return c.get_async(path).get(timeout=t)


def retry(f, limit=60):
    deadline = time.time() + limit
    while True:
        try:
            return f()
        except NotReadOnlyCallError:
            raise
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


ro = None
states = []
for line in sys.stdin:
    words = line.split()
    phase, arg = words[0], (words[1] if len(words) > 1 else "")
    t0 = time.time()
    if phase == "start":
        w = KazooClient(hosts=everyone, timeout=10)
        w.start(timeout=30)
        w.ensure_path("/rotest")
        w.set("/rotest", b"before")
        w.stop()
        w.close()
        old = KazooClient(hosts=victim, read_only=True, timeout=6,
                          connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1})
        old.start(timeout=30)
        # An ephemeral makes it a session of the cluster also where
        # sessions start local (ZooKeeper with localSessionsEnabled).
        old.create("/rotest-old", b"", ephemeral=True)
        if old.client_state == KeeperState.CONNECTED:
            ok("start_rw")
        else:
            fail("start_rw", old.client_state)
    elif phase == "restarted" and arg == "snapshot":
        time.sleep(8)
        if ro.client_state in (KeeperState.CONNECTED_RO, KeeperState.CONNECTED):
            fail("restarted_not_behind", "the client got a session on a server behind it: %s" % ro.client_state)
        else:
            ok("restarted_not_behind")
        fresh = KazooClient(hosts=victim, read_only=True, timeout=6)
        try:
            fresh.start(timeout=20)
            if fresh.client_state == KeeperState.CONNECTED_RO:
                ok("restarted_connected_ro")
            else:
                fail("restarted_connected_ro", fresh.client_state)
            try:
                retry(lambda: fresh.create_async("/rotest2", b"x").get(timeout=10))
                fail("restarted_write_refused", "the create succeeded")
            except NotReadOnlyCallError:
                ok("restarted_write_refused")
            try:
                retry(lambda: fresh.get_children_async("/").get(timeout=10))
                ok("restarted_read")
            except Exception as e:
                fail("restarted_read", repr(e))
        except Exception as e:
            fail("restarted_connected_ro", repr(e))
        finally:
            fresh.stop()
            fresh.close()
    elif phase in ("isolated", "restarted"):
        if phase == "isolated":
            # A new client: ZooKeeper 3.8 refuses a session of the cluster
            # in read-only mode, so only a client without one gets in.
            ro = KazooClient(hosts=victim, read_only=True, timeout=6,
                             connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1})
            ro.add_listener(lambda s: states.append((time.time(), s)))
            ro.start_async()
        if wait_state(ro, KeeperState.CONNECTED_RO, 60):
            ok(phase + "_connected_ro (%.1fs)" % (time.time() - t0))
        else:
            fail(phase + "_connected_ro", ro.client_state)
        try:
            data, _ = retry(lambda: get(ro, "/rotest"))
            if data == b"before":
                ok(phase + "_read")
            else:
                fail(phase + "_read", data)
        except Exception as e:
            fail(phase + "_read", repr(e))
        try:
            retry(lambda: ro.create_async("/rotest/new", b"x").get(timeout=10))
            fail(phase + "_write_refused", "the create succeeded")
        except NotReadOnlyCallError:
            ok(phase + "_write_refused")
        except Exception as e:
            fail(phase + "_write_refused", repr(e))
        try:
            isro = retry(lambda: ro.command(b"isro"))
            if isro == "ro":
                ok(phase + "_isro")
            else:
                fail(phase + "_isro", isro)
        except Exception as e:
            fail(phase + "_isro", repr(e))
        if phase == "isolated":
            time.sleep(3)
            if old.client_state in (KeeperState.CONNECTED, KeeperState.CONNECTED_RO):
                fail("old_session_refused", old.client_state)
            else:
                ok("old_session_refused")
            rw = KazooClient(hosts=victim, timeout=6, connection_retry={"max_tries": 0})
            try:
                rw.start(timeout=4)
                fail("rw_client_refused", "got a session %r" % rw.client_state)
            except KazooTimeoutError:
                ok("rw_client_refused")
            finally:
                rw.stop()
                rw.close()
    elif phase in ("healed", "killed"):
        if phase == "healed":
            if wait_state(old, KeeperState.CONNECTED, 90):
                ok("old_connected_rw")
            else:
                fail("old_connected_rw", old.client_state)
        if wait_state(ro, KeeperState.CONNECTED, 90):
            ok(phase + "_connected_rw (%.1fs)" % (time.time() - t0))
        else:
            fail(phase + "_connected_rw", ro.client_state)
        try:
            retry(lambda: ro.set_async("/rotest", phase.encode()).get(timeout=10), 60)
            data, _ = get(ro, "/rotest")
            if data == phase.encode():
                ok(phase + "_write")
            else:
                fail(phase + "_write", data)
        except Exception as e:
            fail(phase + "_write", repr(e))
    else:
        fail("phase", phase)
    print("phase %s done" % phase, flush=True)

if ro is not None:
    print("states: " + ", ".join("%s" % s for _, s in states), flush=True)
    ro.stop()
    ro.close()
    old.stop()
    old.close()
sys.exit(1 if failed else 0)
