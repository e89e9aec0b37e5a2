package fsm

import (
	"coord/vocab"
	"slices"
	"strconv"
	"strings"
)

// Quota statistics, as ZooKeeper's DataTree keeps them: a path P has a
// quota while /zookeeper/quota/P/zookeeper_limits exists, and the server
// keeps /zookeeper/quota/P/zookeeper_stats at "count=N,bytes=M" for P's
// subtree (P included): counted in full when the stats node is created,
// then changed by every create, delete and setData whose path lies under
// the deepest P with a quota. The stats node's data changes in place (no
// new version, mzxid or watch event).
//
// Hard limits are enforced only for a command the leader stamped with
// EnforceQuota (ZooKeeper's zookeeper.enforceQuota, off by default), as
// ZooKeeper 3.8's ZooKeeperServer.checkQuota: a create (count +1, bytes +
// its data) or a setData (bytes + the growth of the node's data) under the
// deepest P with a quota fails with QuotaExceeded if it would take the
// stats past countHardLimit or byteHardLimit; soft limits (count, bytes)
// are never refused; a byte check runs only for growth, so shrinking data
// is always allowed. ZooKeeper checks before the log against the committed
// stats; here the check runs at apply, against the stats as they are when
// the command applies, except that each op of a multi is checked against
// the stats before the multi, as ZooKeeper does (its earlier ops are not
// committed yet when it checks the later ones), so a multi may pass a
// limit by the sum of its ops, on both.
const (
	quotaLimitNode = "zookeeper_limits"
	quotaStatNode  = "zookeeper_stats"
)

// quotaPrefix returns the deepest of path and its ancestors that has a
// quota, or "" if none does (the root never counts), as ZooKeeper's
// getMaxPrefixWithQuota.
func (s *state) quotaPrefix(path string) string {
	q := s.lookup(quotaPath)
	if q == nil || q.kids.Len() == 0 || len(path) < 2 {
		return ""
	}
	best, end := "", 0
	n, rest := q, path[1:]
	for {
		seg, tail, more := strings.Cut(rest, "/")
		c, ok := n.kids.Get(seg)
		if !ok {
			return best
		}
		end += 1 + len(seg)
		if _, ok := c.kids.Get(quotaLimitNode); ok {
			best = path[:end]
		}
		if !more {
			return best
		}
		n, rest = c, tail
	}
}

// checkQuota is ZooKeeper's checkQuota for a create or setData at path
// that changes its quota's stats by dBytes and dCount: QuotaExceeded if
// the command enforces quotas and a hard limit would be passed. A limits
// or stats node that does not parse, or is missing, enforces nothing
// (ZooKeeper logs the latter, and fails the request on the former).
func (t *txn) checkQuota(op, path string, dBytes, dCount int64) error {
	if !t.cmd.EnforceQuota {
		return nil
	}
	s := t.s
	if t.quotaBase != nil {
		s = t.quotaBase
	}
	prefix := s.quotaPrefix(path)
	if prefix == "" {
		return nil
	}
	ln := s.lookup(quotaPath + prefix + "/" + quotaLimitNode)
	if ln == nil {
		return nil
	}
	limits, ok := parseStatsTrack(ln.data)
	if !ok {
		return nil
	}
	countHard, byteHard := limits.get("countHardLimit"), limits.get("byteHardLimit")
	checkCount := dCount != 0 && countHard > -1
	checkBytes := dBytes > 0 && byteHard > -1
	if !checkCount && !checkBytes {
		return nil
	}
	sn := s.lookup(quotaPath + prefix + "/" + quotaStatNode)
	if sn == nil {
		return nil
	}
	stats, ok := parseStatsTrack(sn.data)
	if !ok {
		return nil
	}
	if (checkCount && stats.get("count")+dCount > countHard) || (checkBytes && stats.get("bytes")+dBytes > byteHard) {
		return errf(vocab.QuotaExceeded, op, path)
	}
	return nil
}

// quotaChanged records a change of dBytes bytes and dCount nodes at path
// in the stats of the quota it falls under.
func (t *txn) quotaChanged(path string, dBytes, dCount int64) {
	if p := t.s.quotaPrefix(path); p != "" {
		t.updateQuotaStats(p, func(st *statsTrack) {
			st.set("count", st.get("count")+dCount)
			st.set("bytes", st.get("bytes")+dBytes)
		})
	}
}

// quotaStatsCreated is ZooKeeper's updateQuotaForPath, run when the stats
// node of a quota is created under parentPath: it counts the subtree.
func (t *txn) quotaStatsCreated(parentPath string) {
	real := parentPath[len(quotaPath):]
	var count, size int64
	var walk func(n *znode)
	walk = func(n *znode) {
		count++
		size += int64(len(n.data))
		n.kids.Ascend(func(_ string, c *znode) bool { walk(c); return true })
	}
	if n := t.s.lookup(real); n != nil {
		walk(n)
	}
	t.updateQuotaStats(real, func(st *statsTrack) {
		*st = statsTrack{}
		st.set("count", count)
		st.set("bytes", size)
	})
}

// updateQuotaStats rewrites the stats node of the quota at real in place.
// Stats that do not parse are left alone (ZooKeeper fails the whole
// transaction on them).
func (t *txn) updateQuotaStats(real string, change func(*statsTrack)) {
	p := quotaPath + real + "/" + quotaStatNode
	n := t.s.lookup(p)
	if n == nil {
		return
	}
	st, ok := parseStatsTrack(n.data)
	if !ok {
		return
	}
	change(&st)
	t.s.mutLookup(t.g, p).setData([]byte(st.String()))
}

// statsTrack is ZooKeeper's StatsTrack: key=value pairs, count and bytes
// first.
type statsTrack struct {
	keys []string
	vals []int64
}

// parseStatsTrack reads "count=1,bytes=2" and the newer
// "count=1,bytes=2=;countHardLimit=3" forms: pairs split on ',' or ';', an
// empty value is -1.
func parseStatsTrack(s string) (statsTrack, bool) {
	var st statsTrack
	for _, pair := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return st, false
		}
		v, _, _ = strings.Cut(v, "=")
		n := int64(-1)
		if v != "" {
			var err error
			if n, err = strconv.ParseInt(v, 10, 64); err != nil {
				return st, false
			}
		}
		st.set(k, n)
	}
	return st, true
}

func (st *statsTrack) get(k string) int64 {
	if i := slices.Index(st.keys, k); i >= 0 {
		return st.vals[i]
	}
	return -1
}

func (st *statsTrack) set(k string, v int64) {
	if i := slices.Index(st.keys, k); i >= 0 {
		st.vals[i] = v
		return
	}
	st.keys = append(st.keys, k)
	st.vals = append(st.vals, v)
}

// String writes ZooKeeper's form: count and bytes, then any other keys in
// order after a '=' that older parsers ignore.
func (st *statsTrack) String() string {
	var b strings.Builder
	b.WriteString("count=" + strconv.FormatInt(st.get("count"), 10))
	b.WriteString(",bytes=" + strconv.FormatInt(st.get("bytes"), 10))
	var rest []string
	for _, k := range st.keys {
		if k != "count" && k != "bytes" {
			rest = append(rest, k)
		}
	}
	if len(rest) > 0 {
		slices.Sort(rest)
		b.WriteString("=")
		for _, k := range rest {
			b.WriteString(";" + k + "=" + strconv.FormatInt(st.get(k), 10))
		}
	}
	return b.String()
}
