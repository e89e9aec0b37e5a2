#!/usr/bin/python3
"""kazoo over TLS (use_ssl). argv[1] is a comma-separated list, one of:
  secure,unified,ca,certfile,keyfile,subject  the checks tls_port,
      unified_port (skipped when it is the secure port), client_certificate,
      plaintext_refused;
  refused,addr,ca  a client trusting only ca is refused (the server's
      certificate is another CA's);
  rotated,addr,ca  it is served within 15 s (the server's certificate was
      replaced by one ca signed).
Prints "ok <check>" per check."""
import ssl
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_acl

args = sys.argv[1].split(",")


def tls(addr, ca, certfile=None, keyfile=None):
    zk = KazooClient(hosts=addr, timeout=10, use_ssl=True, verify_certs=True, ca=ca,
                     certfile=certfile, keyfile=keyfile, connection_retry={"max_tries": 1})
    zk.start(timeout=15)
    return zk


if args[0] in ("refused", "rotated"):
    mode, addr, ca = args
    deadline = time.time() + (0 if mode == "refused" else 15)
    while True:
        try:
            zk = tls(addr, ca)
        except (ssl.SSLError, Exception) as e:  # kazoo raises the handshake's SSLError
            if mode == "refused":
                print("ok refused (%s: %s)" % (type(e).__name__, e))
                sys.exit(0)
            if time.time() > deadline:
                raise SystemExit("still refused 15 s after the rotation: %r" % e)
            time.sleep(0.2)
            continue
        if mode == "refused":
            zk.stop()
            raise SystemExit("a client trusting another CA was served")
        zk.create("/rotated", b"r", ephemeral=True)
        assert zk.get("/rotated")[0] == b"r"
        zk.stop()
        print("ok rotated")
        sys.exit(0)

secure, unified, ca, certfile, keyfile, subject = args

zk = tls(secure, ca)
zk.create("/kazoo-tls", b"t")
assert zk.get("/kazoo-tls")[0] == b"t"
zk.stop()
print("ok tls_port")

if unified != secure:
    zk = tls(unified, ca)
    assert zk.get("/kazoo-tls")[0] == b"t"
    zk.stop()
    plain = KazooClient(hosts=unified, timeout=10)
    plain.start(timeout=15)
    assert plain.get("/kazoo-tls")[0] == b"t"
    plain.stop()
    print("ok unified_port")

mine = tls(secure, ca, certfile, keyfile)
mine.create("/kazoo-x509", b"c", acl=[make_acl("x509", subject, all=True)])
assert mine.get("/kazoo-x509")[0] == b"c"
other = tls(secure, ca)
try:
    other.get("/kazoo-x509")
    raise SystemExit("a TLS session without the certificate read an x509 node")
except NoAuthError:
    pass
other.stop()
mine.delete("/kazoo-x509")
mine.stop()
print("ok client_certificate")

plain = KazooClient(hosts=secure, timeout=3, connection_retry={"max_tries": 1})
try:
    plain.start(timeout=5)
    raise SystemExit("plaintext session on the TLS-only port")
except Exception as e:
    print("ok plaintext_refused (%s)" % type(e).__name__)
plain.stop()
