package fsm

import (
	"bytes"
	"coord/vocab"
	"strconv"
)

// /zookeeper/config holds the cluster's membership in ZooKeeper's dynamic
// configuration format: one "server.N=host:port:port:role;client" line per
// server, then "version=<hex>", the zxid of the change that wrote it, with
// no newline after it (as ZooKeeper's QuorumVerifier.toString). The lines
// are decided by the server that proposes CmdSetConfig (from raft's
// configuration) and travel in the command, so apply only checks the
// expected version and stores them: every server stores the same bytes.

// ConfigVersion is the version of the configuration a /zookeeper/config
// Stat shows: the zxid of the command that last wrote it (0 before any).
func ConfigVersion(st vocab.Stat) int64 { return st.Mzxid }

// ConfigLines returns the membership lines of /zookeeper/config data,
// without its version line.
func ConfigLines(data []byte) []byte {
	if i := bytes.LastIndex(data, []byte("version=")); i >= 0 && (i == 0 || data[i-1] == '\n') {
		return data[:i]
	}
	return data
}

// setConfig writes op.Data and the version line to /zookeeper/config, as a
// setData would (version, mzxid, mtime, NodeDataChanged), if the config's
// version is op.TTL (or op.TTL is -1): reconfig's fromConfig check. It
// checks no ACL: the server that proposes it checked the caller's.
func (t *txn) setConfig(op *Op) (vocab.Stat, error) {
	if op.Path != configPath {
		return vocab.Stat{}, errf(vocab.BadArguments, "reconfig", op.Path)
	}
	n := t.s.lookup(configPath)
	if op.TTL != -1 && op.TTL != n.mzxid {
		return vocab.Stat{}, errf(vocab.BadVersion, "reconfig", op.Path)
	}
	data := make([]byte, 0, len(op.Data)+24)
	data = append(data, op.Data...)
	data = append(data, "version="...)
	data = strconv.AppendInt(data, t.zxid, 16)
	old := len(n.data)
	n = t.s.mutLookup(t.g, configPath)
	n.setData(data)
	n.version = nextVersion(n.version)
	n.mtime = t.cmd.Time
	n.mzxid = t.zxid
	st := n.stat()
	t.quotaChanged(configPath, int64(len(n.data)-old), 0)
	t.fire(configPath, vocab.EventNodeDataChanged, n.acl)
	return st, nil
}
