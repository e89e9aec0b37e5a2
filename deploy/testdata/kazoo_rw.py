"""Write through one server and read through another with kazoo.

Usage: kazoo_rw.py WRITE_HOST READ_HOST PATH VALUE
Creates PATH with VALUE through WRITE_HOST, then on a session on READ_HOST
syncs and reads it, and prints what it read.
"""
import sys
from kazoo.client import KazooClient

whost, rhost, path, value = sys.argv[1:5]
w = KazooClient(hosts=whost, timeout=10.0)
w.start(timeout=20)
w.create(path, value.encode(), makepath=True)
w.stop()
r = KazooClient(hosts=rhost, timeout=10.0)
r.start(timeout=20)
r.sync(path)
data, stat = r.get(path)
r.stop()
print(data.decode())
