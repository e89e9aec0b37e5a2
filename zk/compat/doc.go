// Package compat holds ZooKeeper-compatibility tests: unmodified ZooKeeper
// clients we did not write (go-zookeeper, the Java client's zkCli.sh, Python
// kazoo and its recipes, and a few raw jute requests for ops go-zookeeper
// lacks) drive a server over the ZooKeeper wire protocol.
//
// The same test bodies run against an in-process coord cluster (the default)
// and against Apache ZooKeeper 3.8 from Debian's zookeeper package
// (COORD_COMPAT_TARGET=zookeeper), so every assertion is ZooKeeper's
// behaviour and not merely coord's. Values that legitimately differ between
// the two (zxids, session ids, times) are compared by their relations, never
// as raw numbers. See docs/zookeeper.md for the commands and for what differs.
//
// The package has no non-test code; this file exists only for the package
// comment.
package compat
