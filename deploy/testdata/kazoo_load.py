"""Bounded write load for TestCompose, through kazoo (python3-kazoo).

Usage: kazoo_load.py HOSTS STOPFILE OUTFILE
One session on HOSTS (every server's published ZooKeeper port) creates
persistent sequential znodes under /load at up to 20 per second until
STOPFILE exists (or 5 minutes pass), then syncs and lists /load. It writes
JSON: the acknowledged names, the names present at the end, the session id
at start and end, and every connection state it went through (LOST means the
session expired).
"""
import json, os, sys, time
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss, SessionExpiredError, OperationTimeoutError
from kazoo.retry import KazooRetry

hosts, stopfile, outfile = sys.argv[1:4]
states = []
zk = KazooClient(hosts=hosts, timeout=20.0, connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1))
zk.add_listener(lambda s: states.append(str(s)))
zk.start(timeout=30)
sid0 = zk.client_id[0]
zk.ensure_path("/load")
acked, indeterminate = [], 0
deadline = time.time() + 300
i = 0
while not os.path.exists(stopfile) and time.time() < deadline:
    i += 1
    try:
        acked.append(zk.create("/load/n-", str(i).encode(), sequence=True))
    except (ConnectionLoss, OperationTimeoutError):
        indeterminate += 1
        time.sleep(0.2)
    except SessionExpiredError:
        states.append("EXPIRED")
        break
    time.sleep(0.05)
present = []
for _ in range(100):
    try:
        zk.sync("/load")
        present = ["/load/" + c for c in zk.get_children("/load")]
        break
    except (ConnectionLoss, OperationTimeoutError):
        time.sleep(0.2)
sid1 = zk.client_id[0]
seen = list(states)  # before stop(): closing the session reports LOST too
zk.stop()
json.dump({"acked": acked, "present": present, "indeterminate": indeterminate,
           "session_start": sid0, "session_end": sid1, "states": seen}, open(outfile, "w"))
