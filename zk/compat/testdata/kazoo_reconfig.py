"""kazoo's reconfig (KazooClient.reconfig) against a 4-server cluster.

Usage: kazoo_reconfig.py HOSTS OBSERVER4 PARTICIPANT4

HOSTS are the servers the clients use (not server 4, which the script
removes); OBSERVER4 and PARTICIPANT4 are server 4's "server.4=..." line as an
observer and as a participant. The superuser is super:secret. Prints
"ok <check>" for every check passed and "FAIL <check>: why" otherwise, and
exits non-zero on a failure.

  refused_without_superuser  reconfig by an anonymous client: NoAuthError
  stale_version              from_config older than the config: BadVersionError
  remove                     leaving="4": server 4 gone from the reply and the node
  watch                      a DataWatch on /zookeeper/config saw the change
  add_observer               joining=OBSERVER4: the reply has it
  new_members                new_members: 1-3 as they were, 4 a participant
  remove_again               leaving="4", from_config the current version

A reconfig whose reply is lost with the connection (ZooKeeper's servers
drop their clients when a reconfig removes the leader) is judged by what
/zookeeper/config then shows.
"""

import sys
import time
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, BadVersionError, ConnectionLoss

hosts, observer4, participant4 = sys.argv[1], sys.argv[2], sys.argv[3]
failed = False


def ok(name):
    print("ok " + name, flush=True)


def fail(name, why):
    global failed
    failed = True
    print("FAIL %s: %s" % (name, why), flush=True)


def parse(data):
    """The server lines by id and the version of /zookeeper/config."""
    servers, version = {}, None
    for line in data.decode().split("\n"):
        if line.startswith("version="):
            version = int(line[len("version="):], 16)
        elif line.startswith("server."):
            key, _, value = line.partition("=")
            servers[int(key[len("server."):])] = value
    return servers, version


def read(c):
    """/zookeeper/config's servers and version; a new cluster's leader
    writes it once elected, so an empty one is read again for up to 30 s."""
    deadline = time.time() + 30
    while True:
        try:
            data, _ = c.get("/zookeeper/config")
            servers, version = parse(data)
            if servers or time.time() > deadline:
                return servers, version
        except ConnectionLoss:
            if time.time() > deadline:
                raise
        time.sleep(0.2)


def reconfig(c, name, want, **kw):
    """Runs a reconfig; returns the servers it reports (or, if the reply
    was lost with the connection, those /zookeeper/config shows once want
    holds). A reconfig lost with the connection that has not applied 10 s
    later is sent again, as a client would (ZooKeeper 3.8 under load was
    seen to drop one)."""
    for attempt in range(3):
        try:
            data, _ = c.reconfig(**kw)
            servers, _ = parse(data)
            break
        except ConnectionLoss as e:
            print("%s: %r; reading the outcome from /zookeeper/config" % (name, e), flush=True)
            deadline = time.time() + 10
            while True:
                servers, _ = read(c)
                if want(servers) or time.time() > deadline:
                    break
                time.sleep(0.2)
            if want(servers):
                break
            print("%s: not applied 10s after the loss; sending it again" % name, flush=True)
        except Exception as e:
            if attempt == 0:
                raise
            # The first one applied after all (a stale version, say):
            # what counts is the configuration.
            print("%s: resent: %r; reading the outcome" % (name, e), flush=True)
            servers, _ = read(c)
            break
    if want(servers):
        ok(name)
    else:
        fail(name, servers)
    return servers


anon = KazooClient(hosts=hosts, timeout=10)
anon.start(timeout=30)
root = KazooClient(hosts=hosts, timeout=10, auth_data=[("digest", "super:secret")])
root.start(timeout=30)

servers, version = read(root)
if sorted(servers) != [1, 2, 3, 4]:
    fail("start", servers)

try:
    anon.reconfig(joining=None, leaving="4", new_members=None)
    fail("refused_without_superuser", "the reconfig succeeded")
except NoAuthError:
    ok("refused_without_superuser")
except Exception as e:
    fail("refused_without_superuser", repr(e))

try:
    root.reconfig(joining=None, leaving="4", new_members=None, from_config=version - 1)
    fail("stale_version", "the reconfig succeeded")
except BadVersionError:
    ok("stale_version")
except Exception as e:
    fail("stale_version", repr(e))

seen = []
changed = threading.Event()


def on_config(data, stat):
    if data is not None:
        seen.append(parse(data)[0])
        if len(seen) > 1:
            changed.set()


anon.DataWatch("/zookeeper/config", on_config)

reconfig(root, "remove", lambda s: sorted(s) == [1, 2, 3],
         joining=None, leaving="4", new_members=None, from_config=version)
if changed.wait(30) and any(sorted(s) == [1, 2, 3] for s in seen):
    ok("watch")
else:
    fail("watch", seen)

obs = observer4.partition("=")[2]
reconfig(root, "add_observer", lambda s: s.get(4) == obs,
         joining=observer4, leaving=None, new_members=None)

servers, _ = read(root)
members = ["server.%d=%s" % (n, servers[n]) for n in (1, 2, 3)] + [participant4]
part = participant4.partition("=")[2]
reconfig(root, "new_members", lambda s: s.get(4) == part and all(s.get(n) == servers[n] for n in (1, 2, 3)),
         joining=None, leaving=None, new_members=",".join(members))

_, version = read(root)
reconfig(root, "remove_again", lambda s: sorted(s) == [1, 2, 3],
         joining=None, leaving="4", new_members=None, from_config=version)

anon.stop()
anon.close()
root.stop()
root.close()
sys.exit(1 if failed else 0)
