package fsm

import (
	"bytes"
	"coord/vocab"
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
		apCreate("/q", "abc", vocab.ModePersistent),
		apCreate("/q/a", "12345", vocab.ModePersistent),
		apCreate("/zookeeper/quota/q", "", vocab.ModePersistent),
		apCreate("/zookeeper/quota/q/zookeeper_limits", "count=3,bytes=-1", vocab.ModePersistent),
		apCreate("/zookeeper/quota/q/zookeeper_stats", "count=0,bytes=0", vocab.ModePersistent),
		apCreate("/q/b", "xy", vocab.ModePersistent),
		apSet("/q/a", "1", -1),
		apDelete("/q/b", -1),
		apMulti(apCreate("/q/m", "mm", vocab.ModePersistent), apDelete("/q/missing", -1)), // fails: no change
		apCreate("/qq", "zzzz", vocab.ModePersistent),
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
	more := []Command{apCreate("/q/c", "123", vocab.ModePersistent)}
	f.Apply(1, &more[0])
	more = []Command{apCreate("/q/c", "123", vocab.ModePersistent)}
	g.Apply(1, &more[0])
	if f.View().Digest() != g.View().Digest() {
		t.Fatal("restored replica diverged")
	}
	if data, _, _ := g.View().GetData("/zookeeper/quota/q/zookeeper_stats", nil); string(data) != "count=3,bytes=7" {
		t.Fatalf("stats after restore and a create: %q", data)
	}
}

// enforced returns c stamped as the leader stamps it with -enforce-quota.
func enforced(c Command) Command { c.EnforceQuota = true; return c }

// Hard quota limits, as ZooKeeper 3.8's checkQuota with enforceQuota on
// (zk/compat's TestQuotaEnforced checks the same against ZooKeeper): a
// create or setData passing countHardLimit or byteHardLimit fails with
// QuotaExceeded and changes nothing; soft limits and shrinking data pass; a
// multi's ops are checked against the stats before the multi; a command
// without the leader's stamp is never refused. Replaying the encoded log on
// another FSM gives byte-identical state.
func TestQuotaEnforcedApply(t *testing.T) {
	setup := []Command{
		apCreate("/q", "", vocab.ModePersistent),
		apCreate("/b", "", vocab.ModePersistent),
		apCreate("/zookeeper/quota/q", "", vocab.ModePersistent),
		apCreate("/zookeeper/quota/q/zookeeper_limits", "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=2", vocab.ModePersistent),
		apCreate("/zookeeper/quota/q/zookeeper_stats", "count=0,bytes=0", vocab.ModePersistent),
		apCreate("/zookeeper/quota/b", "", vocab.ModePersistent),
		apCreate("/zookeeper/quota/b/zookeeper_limits", "count=1,bytes=-1=;byteHardLimit=10;countHardLimit=-1", vocab.ModePersistent),
		apCreate("/zookeeper/quota/b/zookeeper_stats", "count=0,bytes=0", vocab.ModePersistent),
	}
	steps := []struct {
		cmd  Command
		want vocab.Code
	}{
		{enforced(apCreate("/q/a", "", vocab.ModePersistent)), vocab.OK},            // count 2 of 2
		{enforced(apCreate("/q/b", "", vocab.ModePersistent)), vocab.QuotaExceeded}, // 3 of 2
		{enforced(apCreate("/q/s-", "", vocab.ModePersistentSequential)), vocab.QuotaExceeded},
		{apCreate("/q/unstamped", "", vocab.ModePersistent), vocab.OK},                                                                   // not enforced: 3 of 2
		{enforced(apDelete("/q/unstamped", -1)), vocab.OK},                                                                               // deletes are never refused
		{enforced(apSet("/q/a", "any length at all", -1)), vocab.OK},                                                                     // count unchanged
		{enforced(apCreate("/b/x", "123456", vocab.ModePersistent)), vocab.OK},                                                           // bytes 6 of 10; soft count passed
		{enforced(apSet("/b/x", "1234567890", -1)), vocab.OK},                                                                            // 10 of 10
		{enforced(apSet("/b/x", "12345678901", -1)), vocab.QuotaExceeded},                                                                // 11 of 10
		{enforced(apSet("/b/x", "12345678901", 99)), vocab.QuotaExceeded},                                                                // before the version check
		{enforced(apCreate("/b/y", "", vocab.ModePersistent)), vocab.OK},                                                                 // no data: no byte check
		{enforced(apCreate("/b/z", "1", vocab.ModePersistent)), vocab.QuotaExceeded},                                                     // 11 of 10
		{enforced(apSet("/b/x", "1", -1)), vocab.OK},                                                                                     // shrinking: 1 of 10
		{enforced(apMulti(apCreate("/b/m1", "1234", vocab.ModePersistent), apCreate("/b/m2", "12345", vocab.ModePersistent))), vocab.OK}, // each fits alone: 10 of 10
		{enforced(apMulti(apSet("/b/m1", "", -1), apCreate("/b/m3", "1", vocab.ModePersistent))), vocab.QuotaExceeded},                   // 11 of 10 before the multi
		{enforced(apMulti(apCreate("/b/m4", "1234567890", vocab.ModePersistent), apCreate("/b/m5", "12", vocab.ModePersistent))), vocab.QuotaExceeded},
		{enforced(apSet("/b/m2", "1", -1)), vocab.OK},                                                                                   // 6 of 10
		{enforced(apMulti(apCreate("/b/m4", "1234", vocab.ModePersistent), apCreate("/b/m5", "1234", vocab.ModePersistent))), vocab.OK}, // 14 of 10: the multi overshoots, as in ZooKeeper
		{enforced(apCreate("/b/after", "1", vocab.ModePersistent)), vocab.QuotaExceeded},
	}
	f := New()
	var log [][]byte
	for i := range setup {
		log = append(log, setup[i].Encode(nil))
		if r, _ := f.Apply(1, &setup[i]); r.Err != nil {
			t.Fatalf("setup %d: %v", i, r.Err)
		}
	}
	for i, s := range steps {
		log = append(log, s.cmd.Encode(nil))
		before := dumpView(f.View())
		r, trig := f.Apply(1, &s.cmd)
		if got := vocab.CodeOf(r.Err); got != s.want {
			t.Errorf("step %d (%s): %v, want %v", i, describeCmd(&s.cmd), got, s.want)
		}
		if r.Err != nil && (len(trig) != 0 || dumpView(f.View()) != before) {
			t.Errorf("step %d (%s): refused, yet changed the state or fired %v", i, describeCmd(&s.cmd), trig)
		}
		if s.cmd.Type == CmdMulti && s.want == vocab.QuotaExceeded && (len(r.Multi) == 0 || r.Multi[len(r.Multi)-1].Code != vocab.QuotaExceeded && r.Multi[0].Code != vocab.QuotaExceeded) {
			t.Errorf("step %d: multi results %+v, want a QuotaExceeded op", i, r.Multi)
		}
	}
	for p, want := range map[string]string{"/q": "count=2,bytes=17", "/b": "count=7,bytes=14"} {
		if data, _, _ := f.View().GetData("/zookeeper/quota"+p+"/zookeeper_stats", nil); string(data) != want {
			t.Errorf("stats of %s: %q, want %q", p, data, want)
		}
	}

	// Another server replays the log: the verdicts travel in it.
	g := New()
	for i, e := range log {
		if _, _, err := g.ApplyEntry(1, e); err != nil {
			t.Fatalf("replaying entry %d: %v", i, err)
		}
	}
	if f.View().Digest() != g.View().Digest() {
		t.Fatal("a replay of the same log reached another state")
	}
	// The same commands without the stamp (an old log, or a leader without
	// -enforce-quota) refuse nothing: the stamp, not the server, decides.
	h := New()
	for i, e := range log {
		c, err := DecodeCommand(e)
		if err != nil {
			t.Fatal(err)
		}
		c.EnforceQuota = false
		if r, _ := h.Apply(1, c); vocab.CodeOf(r.Err) == vocab.QuotaExceeded {
			t.Errorf("entry %d without the stamp: %v", i, r.Err)
		}
	}
	if h.View().Digest() == f.View().Digest() {
		t.Error("the stamp changed nothing")
	}
}
