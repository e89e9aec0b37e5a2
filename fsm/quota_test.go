package fsm

import (
	"bytes"
	"testing"
)

func TestStatsTrackFormat(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{"count=2,bytes=9", "count=2,bytes=9"},
		{"", "count=-1,bytes=-1"},
		{"count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=3", "count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=3"},
		{"bytes=4;count=1", "count=1,bytes=4"},
		{"count=,bytes=7", "count=-1,bytes=7"},
	} {
		st, ok := parseStatsTrack(c.in)
		if !ok || st.String() != c.out {
			t.Errorf("parse(%q) = %q, %v; want %q", c.in, st.String(), ok, c.out)
		}
	}
	for _, bad := range []string{"count", "count=x", "count=1,bytes"} {
		if _, ok := parseStatsTrack(bad); ok {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

// Quota stats change inside apply, deterministically: they survive a
// snapshot and restore, and a replica that replays the same commands holds
// the same bytes. (Their behaviour is checked against ZooKeeper by
// zk/compat's TestQuotaStats.)
func TestQuotaStatsApply(t *testing.T) {
	cmds := []Command{
		apCreate("/q", "abc", ModePersistent),
		apCreate("/q/a", "12345", ModePersistent),
		apCreate("/zookeeper/quota/q", "", ModePersistent),
		apCreate("/zookeeper/quota/q/zookeeper_limits", "count=3,bytes=-1", ModePersistent),
		apCreate("/zookeeper/quota/q/zookeeper_stats", "count=0,bytes=0", ModePersistent),
		apCreate("/q/b", "xy", ModePersistent),
		apSet("/q/a", "1", -1),
		apDelete("/q/b", -1),
		apMulti(apCreate("/q/m", "mm", ModePersistent), apDelete("/q/missing", -1)), // fails: no change
		apCreate("/qq", "zzzz", ModePersistent),
	}
	f := New()
	for i := range cmds {
		f.Apply(1, &cmds[i])
	}
	data, st, err := f.View().GetData("/zookeeper/quota/q/zookeeper_stats", nil)
	if err != nil || string(data) != "count=2,bytes=4" {
		t.Fatalf("stats %q, %v", data, err)
	}
	if st.Version != 0 || st.DataLength != int32(len(data)) {
		t.Fatalf("stats node Stat %+v", st)
	}

	var snap bytes.Buffer
	if _, err := f.View().WriteTo(&snap); err != nil {
		t.Fatal(err)
	}
	g := New()
	if err := g.Restore(bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatal(err)
	}
	more := []Command{apCreate("/q/c", "123", ModePersistent)}
	f.Apply(1, &more[0])
	more = []Command{apCreate("/q/c", "123", ModePersistent)}
	g.Apply(1, &more[0])
	if f.View().Digest() != g.View().Digest() {
		t.Fatal("restored replica diverged")
	}
	if data, _, _ := g.View().GetData("/zookeeper/quota/q/zookeeper_stats", nil); string(data) != "count=3,bytes=7" {
		t.Fatalf("stats after restore and a create: %q", data)
	}
}
