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
		apCreate("/q", "", ModePersistent),
		apCreate("/b", "", ModePersistent),
		apCreate("/zookeeper/quota/q", "", ModePersistent),
		apCreate("/zookeeper/quota/q/zookeeper_limits", "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=2", ModePersistent),
		apCreate("/zookeeper/quota/q/zookeeper_stats", "count=0,bytes=0", ModePersistent),
		apCreate("/zookeeper/quota/b", "", ModePersistent),
		apCreate("/zookeeper/quota/b/zookeeper_limits", "count=1,bytes=-1=;byteHardLimit=10;countHardLimit=-1", ModePersistent),
		apCreate("/zookeeper/quota/b/zookeeper_stats", "count=0,bytes=0", ModePersistent),
	}
	steps := []struct {
		cmd  Command
		want Code
	}{
		{enforced(apCreate("/q/a", "", ModePersistent)), OK},            // count 2 of 2
		{enforced(apCreate("/q/b", "", ModePersistent)), QuotaExceeded}, // 3 of 2
		{enforced(apCreate("/q/s-", "", ModePersistentSequential)), QuotaExceeded},
		{apCreate("/q/unstamped", "", ModePersistent), OK},                                                             // not enforced: 3 of 2
		{enforced(apDelete("/q/unstamped", -1)), OK},                                                                   // deletes are never refused
		{enforced(apSet("/q/a", "any length at all", -1)), OK},                                                         // count unchanged
		{enforced(apCreate("/b/x", "123456", ModePersistent)), OK},                                                     // bytes 6 of 10; soft count passed
		{enforced(apSet("/b/x", "1234567890", -1)), OK},                                                                // 10 of 10
		{enforced(apSet("/b/x", "12345678901", -1)), QuotaExceeded},                                                    // 11 of 10
		{enforced(apSet("/b/x", "12345678901", 99)), QuotaExceeded},                                                    // before the version check
		{enforced(apCreate("/b/y", "", ModePersistent)), OK},                                                           // no data: no byte check
		{enforced(apCreate("/b/z", "1", ModePersistent)), QuotaExceeded},                                               // 11 of 10
		{enforced(apSet("/b/x", "1", -1)), OK},                                                                         // shrinking: 1 of 10
		{enforced(apMulti(apCreate("/b/m1", "1234", ModePersistent), apCreate("/b/m2", "12345", ModePersistent))), OK}, // each fits alone: 10 of 10
		{enforced(apMulti(apSet("/b/m1", "", -1), apCreate("/b/m3", "1", ModePersistent))), QuotaExceeded},             // 11 of 10 before the multi
		{enforced(apMulti(apCreate("/b/m4", "1234567890", ModePersistent), apCreate("/b/m5", "12", ModePersistent))), QuotaExceeded},
		{enforced(apSet("/b/m2", "1", -1)), OK},                                                                       // 6 of 10
		{enforced(apMulti(apCreate("/b/m4", "1234", ModePersistent), apCreate("/b/m5", "1234", ModePersistent))), OK}, // 14 of 10: the multi overshoots, as in ZooKeeper
		{enforced(apCreate("/b/after", "1", ModePersistent)), QuotaExceeded},
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
		if got := CodeOf(r.Err); got != s.want {
			t.Errorf("step %d (%s): %v, want %v", i, describeCmd(&s.cmd), got, s.want)
		}
		if r.Err != nil && (len(trig) != 0 || dumpView(f.View()) != before) {
			t.Errorf("step %d (%s): refused, yet changed the state or fired %v", i, describeCmd(&s.cmd), trig)
		}
		if s.cmd.Type == CmdMulti && s.want == QuotaExceeded && (len(r.Multi) == 0 || r.Multi[len(r.Multi)-1].Code != QuotaExceeded && r.Multi[0].Code != QuotaExceeded) {
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
		if r, _ := h.Apply(1, c); CodeOf(r.Err) == QuotaExceeded {
			t.Errorf("entry %d without the stamp: %v", i, r.Err)
		}
	}
	if h.View().Digest() == f.View().Digest() {
		t.Error("the stamp changed nothing")
	}
}
