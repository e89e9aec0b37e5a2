"""kazoo's recipes (Lock, Election, Barrier, DoubleBarrier, Queue,
LockingQueue) with several concurrent clients, each its own session, spread
over the servers given. Usage: kazoo_recipes.py host:port[,host:port...]

Prints "ok <name>" per recipe and exits non-zero on the first failure."""

import logging
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError

logging.basicConfig(level=logging.ERROR)
HOSTS = sys.argv[1].split(",")
WAIT = 20.0


def client(i):
    # Client i prefers server i (kazoo shuffles a list; give it one).
    zk = KazooClient(hosts=HOSTS[i % len(HOSTS)], timeout=10.0)
    zk.start(timeout=15)
    return zk


def clients(n):
    return [client(i) for i in range(n)]


def close(cs):
    for c in cs:
        c.stop()
        c.close()


def run_threads(fns):
    errors = []

    def wrap(fn):
        def run():
            try:
                fn()
            except Exception as e:  # noqa
                errors.append(repr(e))
        return run

    threads = [threading.Thread(target=wrap(fn), daemon=True) for fn in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 3)
        assert not t.is_alive(), "a worker is still running"
    assert not errors, errors


def lock():
    # Mutual exclusion: an unversioned read-modify-write of a shared znode
    # under the lock loses no update, and no two holders overlap.
    n, rounds = 5, 10
    cs = clients(n)
    cs[0].create("/lock-counter", b"0")
    state = {"inside": 0, "overlaps": 0}
    guard = threading.Lock()

    def worker(c, ident):
        def run():
            lk = c.Lock("/lock", ident)
            for _ in range(rounds):
                with lk:
                    with guard:
                        state["inside"] += 1
                        if state["inside"] > 1:
                            state["overlaps"] += 1
                    v = int(c.get("/lock-counter")[0])
                    time.sleep(0.002)
                    c.set("/lock-counter", str(v + 1).encode())
                    with guard:
                        state["inside"] -= 1
        return run

    run_threads([worker(c, "w%d" % i) for i, c in enumerate(cs)])
    total = int(cs[0].get("/lock-counter")[0])
    assert state["overlaps"] == 0, state
    assert total == n * rounds, "lost updates: counter %d, want %d" % (total, n * rounds)

    # A holder whose session ends releases the lock to the next waiter.
    holder, waiter = cs[0].Lock("/lock2", "holder"), cs[1].Lock("/lock2", "waiter")
    assert holder.acquire(timeout=WAIT)
    got = threading.Event()

    def wait_for_it():
        if waiter.acquire(timeout=WAIT):
            got.set()

    t = threading.Thread(target=wait_for_it, daemon=True)
    t.start()
    time.sleep(0.3)
    assert not got.is_set(), "two holders"
    assert [x for x in waiter.contenders()] == ["holder", "waiter"], waiter.contenders()
    cs[0].stop()  # the holder's session closes
    assert got.wait(WAIT), "the waiter never got the lock"
    t.join(WAIT)
    waiter.release()
    close(cs[1:])
    cs[0].close()


def election():
    # Every contender leads once, one at a time.
    n = 4
    cs = clients(n)
    state = {"leaders": 0, "max": 0, "led": []}
    guard = threading.Lock()

    def contender(c, ident):
        def lead():
            with guard:
                state["leaders"] += 1
                state["max"] = max(state["max"], state["leaders"])
                state["led"].append(ident)
            time.sleep(0.1)
            with guard:
                state["leaders"] -= 1

        return lambda: c.Election("/election", ident).run(lead)

    run_threads([contender(c, "c%d" % i) for i, c in enumerate(cs)])
    assert state["max"] == 1, state
    assert sorted(state["led"]) == ["c%d" % i for i in range(n)], state

    # The leader's session dies: another contender takes over.
    elected = []
    stop = threading.Event()

    def hold(ident):
        def lead():
            elected.append(ident)
            stop.wait(WAIT)
        return lead

    es = [cs[i].Election("/election2", "e%d" % i) for i in range(3)]

    def contend(i):
        try:
            es[i].run(hold("e%d" % i))
        except ConnectionClosedError:
            pass  # the leader whose client the test stopped cannot release

    ts = [threading.Thread(target=contend, args=(i,), daemon=True) for i in range(3)]
    for t in ts:
        t.start()
    deadline = time.time() + WAIT
    while not elected and time.time() < deadline:
        time.sleep(0.02)
    assert len(elected) == 1, elected
    first = int(elected[0][1:])
    cs[first].stop()
    while len(elected) < 2 and time.time() < deadline:
        time.sleep(0.02)
    assert len(elected) == 2 and elected[1] != elected[0], elected
    stop.set()
    for i, e in enumerate(es):
        if i != first:
            e.cancel()
    for t in ts:
        t.join(WAIT)
    close([c for i, c in enumerate(cs) if i != first])
    cs[first].close()


def barrier():
    # Nobody passes a Barrier until it is removed; everyone passes then.
    n = 4
    cs = clients(n + 1)
    b = cs[0].Barrier("/barrier")
    b.create()
    passed = []
    guard = threading.Lock()

    def waiter(c, i):
        def run():
            # The barrier's creation reached this client out of band (this
            # thread started after it), so it syncs first: ZooKeeper promises
            # a client on another server nothing fresher without sync.
            c.sync("/barrier")
            assert c.Barrier("/barrier").wait(WAIT), "barrier wait timed out"
            with guard:
                passed.append((i, time.time()))
        return run

    threads = [threading.Thread(target=waiter(cs[i + 1], i), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    assert not passed, passed
    removed = time.time()
    b.remove()
    for t in threads:
        t.join(WAIT)
    assert len(passed) == n and all(at >= removed for _, at in passed), passed

    # DoubleBarrier: no one is through enter() before the last one arrives,
    # no one through leave() before the last one leaves.
    entered, through, left_at, gone = [], [], [], []

    def member(c, i):
        def run():
            db = c.DoubleBarrier("/double", n)
            time.sleep(0.15 * i)
            with guard:
                entered.append(time.time())
            db.enter()
            with guard:
                through.append(time.time())
            time.sleep(0.15 * (n - i))
            with guard:
                left_at.append(time.time())
            db.leave()
            with guard:
                gone.append(time.time())
        return run

    run_threads([member(cs[i + 1], i) for i in range(n)])
    assert min(through) >= max(entered), (entered, through)
    assert min(gone) >= max(left_at), (left_at, gone)
    close(cs)


def queue():
    # Items are consumed exactly once and in order.
    cs = clients(4)
    q = cs[0].Queue("/queue")
    items = [b"item-%02d" % i for i in range(30)]
    for it in items:
        q.put(it)
    q.put(b"urgent", priority=1)
    assert len(q) == 31
    first = [q.get() for _ in range(6)]
    assert first == [b"urgent"] + items[:5], first
    taken = {i: [] for i in range(1, 4)}

    def consumer(i):
        def run():
            mine = cs[i].Queue("/queue")
            cs[i].sync("/queue")  # the items were put out of band, as above
            while True:
                it = mine.get()
                if it is None:
                    return
                taken[i].append(it)
        return run

    run_threads([consumer(i) for i in range(1, 4)])
    got = sorted(x for v in taken.values() for x in v)
    assert got == items[5:], "consumed %d items, %d distinct, want %d" % (len(got), len(set(got)), len(items) - 5)
    for i, v in taken.items():
        assert v == sorted(v), "consumer %d took items out of order: %s" % (i, v)
    assert q.get() is None and len(q) == 0

    # LockingQueue: an item taken is locked until consumed; a consumer that
    # releases it hands it back.
    lq = cs[0].LockingQueue("/lqueue")
    lq.put_all([b"a", b"b", b"c"])
    other = cs[1].LockingQueue("/lqueue")
    assert lq.get(WAIT) == b"a"
    assert other.get(WAIT) == b"b"  # "a" is locked by lq
    assert other.release()
    assert lq.consume()
    rest = []
    for c in (lq, other):
        v = c.get(WAIT)
        rest.append(v)
        assert c.consume()
    assert sorted(rest) == [b"b", b"c"], rest
    assert len(lq) == 0
    close(cs)


def main():
    for name, fn in [("lock", lock), ("election", election), ("barrier", barrier), ("queue", queue)]:
        start = time.time()
        fn()
        print("ok %s (%.1fs)" % (name, time.time() - start), flush=True)


if __name__ == "__main__":
    main()
