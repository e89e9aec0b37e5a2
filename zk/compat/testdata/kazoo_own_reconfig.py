"""kazoo's own reconfig tests (kazoo/tests/test_client.py, class
TestReconfig, as Debian's python3-kazoo ships them), run unchanged against
a cluster the Go test started.

Usage: kazoo_own_reconfig.py HOSTS TEST...

HOSTS are the servers' client addresses (comma-separated); the superuser
must be super:test (kazoo's harness sets that superDigest on ZooKeeper).
Prints "ok <test>" for every test that passes and "FAIL <test>: why"
otherwise, and exits non-zero on a failure.

Only kazoo's harness is replaced: get_global_cluster returns the given
servers instead of starting ZooKeeper JVMs of its own. TestReconfig.setUp
asks the server's version through the four-letter word envi unless kazoo's
CI variables name it (TRAVIS, ZOOKEEPER_VERSION); they are set here, so the
tests do not depend on which four-letter words a server answers. kazoo's
tests import pytest and mock; where Debian's python3-pytest or python3-mock
is missing, unittest.mock and a stand-in for the two pytest functions they
use (raises, skip) take their place.
"""

import os
import sys
import types
import unittest
import unittest.mock

hosts, tests = sys.argv[1], sys.argv[2:]

os.environ["TRAVIS"] = "true"
os.environ["ZOOKEEPER_VERSION"] = "3.8.0"

try:
    import mock  # noqa: F401
except ImportError:
    sys.modules["mock"] = unittest.mock

try:
    import pytest  # noqa: F401
except ImportError:
    stub = types.ModuleType("pytest")

    class _Raises(object):
        def __init__(self, exc):
            self.exc = exc

        def __enter__(self):
            return self

        def __exit__(self, typ, value, tb):
            if typ is None:
                raise AssertionError("DID NOT RAISE %r" % (self.exc,))
            return issubclass(typ, self.exc)

    def raises(exc, *args, **kw):
        return _Raises(exc)

    def skip(msg=""):
        raise unittest.SkipTest(msg)

    stub.raises, stub.skip = raises, skip
    sys.modules["pytest"] = stub

from kazoo.testing import harness  # noqa: E402


class _Server(object):
    def __init__(self, address):
        self.address = address
        self.running = True


class _Cluster(list):
    def start(self):
        pass

    def stop(self):
        pass

    def terminate(self):
        pass


_cluster = _Cluster(_Server(a) for a in hosts.split(","))
harness.get_global_cluster = lambda: _cluster

from kazoo.tests.test_client import TestReconfig  # noqa: E402

failed = False
for name in tests:
    result = unittest.TestResult()
    TestReconfig(name).run(result)
    problems = result.failures + result.errors
    if problems:
        failed = True
        for _, trace in problems:
            print("FAIL %s: %s" % (name, trace), flush=True)
    elif result.skipped:
        failed = True
        print("FAIL %s: skipped: %s" % (name, result.skipped[0][1]), flush=True)
    else:
        print("ok " + name, flush=True)
sys.exit(1 if failed else 0)
