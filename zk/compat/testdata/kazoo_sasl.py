#!/usr/bin/python3
"""kazoo logs in with SASL DIGEST-MD5 (sasl_options): a good password gets
a session holding sasl:bob, which an ACL for sasl:bob admits; a wrong
password or an unknown user is refused. Prints "ok <check>" per check."""
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, NoAuthError
from kazoo.security import make_acl

hosts = sys.argv[1]


def login(user, password):
    zk = KazooClient(hosts=hosts, timeout=10, connection_retry={"max_tries": 1},
                     sasl_options={"mechanism": "DIGEST-MD5", "username": user, "password": password})
    zk.start(timeout=15)
    return zk


bob = login("bob", "bobpw")
acl = [make_acl("sasl", "bob", all=True)]
bob.create("/sasl-bob", b"mine", acl=acl)
data, _ = bob.get("/sasl-bob")
assert data == b"mine", data
print("ok good_password")

anon = KazooClient(hosts=hosts, timeout=10)
anon.start(timeout=15)
try:
    anon.get("/sasl-bob")
    raise SystemExit("anonymous read of a sasl:bob node succeeded")
except NoAuthError:
    print("ok acl_sasl_scheme")
anon.stop()

for user, password, check in (("bob", "wrong", "wrong_password"), ("mallory", "x", "unknown_user")):
    try:
        zk = login(user, password)
    except AuthFailedError:
        print("ok " + check)
        continue
    except Exception as e:  # kazoo gave up on the host after the refusal
        print("ok %s (%s)" % (check, type(e).__name__))
        continue
    # kazoo reports CONNECTED before its SASL exchange, then the refusal
    # as the state AUTH_FAILED, and stops.
    deadline = time.time() + 10
    while zk.client_state not in ("AUTH_FAILED", "CLOSED") and time.time() < deadline:
        time.sleep(0.05)
    state = zk.client_state
    zk.stop()
    if state not in ("AUTH_FAILED", "CLOSED"):
        raise SystemExit("%s logged in with a bad password (state %s)" % (user, state))
    print("ok " + check)

bob.delete("/sasl-bob")
bob.stop()
