package fsm

import (
	"bytes"
	"coord/vocab"
	"strings"
	"testing"
)

// WriteToWithoutPasswords writes WriteTo's format with every session's
// password left out: no password's bytes are in the stream, it restores to
// the same tree and session table (ids, timeouts, owners, ephemerals) with
// empty passwords, its digest is DigestWithoutPasswords, and writing the
// restored state again gives the same bytes.
func TestSnapshotWithoutPasswords(t *testing.T) {
	rs := richFSM(t, 50)
	pw := bytes.Repeat([]byte{0xa5, 0x5a, 0x3c, 0xc3}, 4) // 16 bytes, unlike anything else in the state
	s4 := mustApply(t, rs.f, 4, Command{Type: CmdCreateSession, Time: snapT0, Timeout: 5000, Password: pw}).SessionID
	mustApply(t, rs.f, 4, as(s4, mkCreate("/s4-eph", nil, vocab.ModeEphemeral)))
	v := rs.f.View()

	full := snapshotBytes(t, v)
	var buf bytes.Buffer
	n, err := v.WriteToWithoutPasswords(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteToWithoutPasswords = %d, %v; %d bytes written", n, err, buf.Len())
	}
	scrubbed := buf.Bytes()
	if !bytes.Contains(full, pw) || !bytes.Contains(full, []byte("secret-1")) {
		t.Fatal("the full snapshot does not carry the passwords (the test proves nothing)")
	}
	if bytes.Contains(scrubbed, pw) || bytes.Contains(scrubbed, []byte("secret-1")) {
		t.Fatal("the snapshot without passwords carries a session password")
	}

	g := restoreBytes(t, scrubbed)
	rv := g.View()
	if d := rv.Digest(); d != v.DigestWithoutPasswords() {
		t.Fatalf("restored digest %x, DigestWithoutPasswords %x", d, v.DigestWithoutPasswords())
	}
	if d := rv.Digest(); d == v.Digest() {
		t.Fatal("the state without passwords hashes as the state with them")
	}
	if rv.DigestWithoutPasswords() != rv.Digest() {
		t.Fatal("a state without passwords: its two digests differ")
	}
	if again := snapshotBytes(t, rv); !bytes.Equal(again, scrubbed) {
		t.Fatal("the restored state does not write the same stream back")
	}
	want, got := v.Sessions(), rv.Sessions()
	if len(want) != len(got) || len(got) != 4 {
		t.Fatalf("sessions: %d restored, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.ID != g.ID || w.Timeout != g.Timeout || w.Owner != g.Owner || w.Ephemerals != g.Ephemerals {
			t.Fatalf("session %d restored as %+v, want %+v", i, g, w)
		}
		if len(g.Password) != 0 {
			t.Fatalf("session 0x%x restored with a password %x", g.ID, g.Password)
		}
	}
	// Everything but the passwords is the same: the trees dump equal (the
	// sessions, compared above, left out of the dumps: they show passwords).
	treeOnly := func(v *View) string {
		var keep []string
		for _, l := range strings.Split(dumpView(v), "\n") {
			if !strings.HasPrefix(l, "session ") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	if treeOnly(rv) != treeOnly(restoreBytes(t, full).View()) {
		t.Fatal("the tree restored without passwords differs from the full one")
	}
}
