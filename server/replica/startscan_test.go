package replica

import (
	"bytes"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"coord/server/internal/logbridge"
)

// recordingFSM keeps the data of every command applied to it.
type recordingFSM struct {
	mu      sync.Mutex
	applied map[uint64][]byte
}

func (f *recordingFSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied[l.Index] = append([]byte(nil), l.Data...)
	return nil
}

func (f *recordingFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, raft.ErrNothingNewToSnapshot }
func (f *recordingFSM) Restore(io.ReadCloser) error         { return nil }

func (f *recordingFSM) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.applied)
}

// Real raft on a real checked WAL: raft's startup scan over a log of
// commands with a configuration change and a no-op in it gets every
// command without its data, still finds the configuration change, and
// everything it applies afterwards has its data. A scan that answered a
// configuration entry without data (or answered past the scan) fails here.
func TestStartupScanSkipsCommandData(t *testing.T) {
	dir := t.TempDir()
	addrA, trans := raft.NewInmemTransport("")
	confA := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "a", Address: addrA}}}
	confAB := raft.Configuration{Servers: append(confA.Servers, raft.Server{Suffrage: raft.Nonvoter, ID: "b", Address: "b:1"})}
	const last, confAt, noopAt = 200, 100, 150
	{
		s, _, _, closer := openChecked(t, dir, LogStoreWAL, nil)
		if err := s.SetUint64(keyCurrentTerm, 1); err != nil {
			t.Fatal(err)
		}
		logs := entries(1, last, 64)
		logs[0] = &raft.Log{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(confA)}
		logs[confAt-1] = &raft.Log{Index: confAt, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(confAB)}
		logs[noopAt-1] = &raft.Log{Index: noopAt, Term: 1, Type: raft.LogNoop}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
		closer.Close()
	}
	s, _, _, closer := openChecked(t, dir, LogStoreWAL, nil)
	defer closer.Close()
	if _, err := s.verify(); err != nil {
		t.Fatal(err)
	}
	scan := armStartupScan(s, s.types)
	fsm := &recordingFSM{applied: map[uint64][]byte{}}
	rc := raft.DefaultConfig()
	rc.LocalID = "a"
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	rc.Logger = logbridge.HCLog(discardLog, "raft")
	r, err := raft.NewRaft(rc, fsm, scan, s, raft.NewInmemSnapshotStore(), trans)
	scan.disarm()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown()
	// Every entry before the last but the two configurations (the no-op too).
	if got, want := scan.skipped.Load(), uint64(last-1-2); got != want {
		t.Errorf("the scan was answered without data for %d entries, want %d", got, want)
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	if got := f.Configuration().Servers; len(got) != 2 || got[1].ID != "b" || got[1].Suffrage != raft.Nonvoter {
		t.Fatalf("raft's configuration after the scan: %+v, want the change at %d (a voter and nonvoter b)", got, confAt)
	}
	// a is the only voter: it leads, commits its no-op, and applies the
	// commands, each with its data.
	deadline := time.Now().Add(10 * time.Second)
	for fsm.count() < last-3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for i := uint64(2); i <= last; i++ {
		if i == confAt || i == noopAt {
			continue
		}
		fsm.mu.Lock()
		d, ok := fsm.applied[i]
		fsm.mu.Unlock()
		if !ok || !bytes.Contains(d, marker(i)) {
			t.Fatalf("entry %d applied with %q (applied: %v), want its data", i, d, ok)
		}
	}
}

// readCounter counts the entries read from it and makes up each one.
type readCounter struct {
	raft.LogStore
	reads int
}

func (c *readCounter) GetLog(index uint64, l *raft.Log) error {
	c.reads++
	*l = raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: []byte("data")}
	return nil
}

// Only the exact sequence of raft's scan is answered without data: the
// last entry first, then from the first index asked in order; a call out of
// order, or past the scan, ends the answers for good.
func TestStartupScanEndsOffSequence(t *testing.T) {
	types := newLogTypes(1, 10)
	for i := uint64(1); i <= 10; i++ {
		types.add(&raft.Log{Index: i, Term: 1 + i/5, Type: raft.LogCommand})
	}
	for _, tc := range []struct {
		name    string
		calls   []uint64
		skipped uint64
	}{
		{"raft's scan", []uint64{10, 4, 5, 6, 7, 8, 9, 10, 3, 4}, 6},
		{"not the last entry first", []uint64{3, 4, 5}, 0},
		{"out of order", []uint64{10, 4, 5, 7, 8}, 2},
		{"past the last", []uint64{10, 9, 11, 9}, 1},
	} {
		c := &readCounter{}
		s := armStartupScan(c, types)
		for _, i := range tc.calls {
			var l raft.Log
			if err := s.GetLog(i, &l); err != nil || l.Index != i {
				t.Fatalf("%s: GetLog(%d) = %+v, %v", tc.name, i, l, err)
			}
			if l.Data == nil && l.Term != 1+i/5 {
				t.Errorf("%s: entry %d answered with term %d, want %d", tc.name, i, l.Term, 1+i/5)
			}
		}
		if got := s.skipped.Load(); got != tc.skipped || c.reads != len(tc.calls)-int(tc.skipped) {
			t.Errorf("%s: %d answered without data, %d read; want %d without data", tc.name, got, c.reads, tc.skipped)
		}
	}
	// Disarmed (NewRaft returned): everything is read.
	c := &readCounter{}
	s := armStartupScan(c, types)
	s.disarm()
	var l raft.Log
	for _, i := range []uint64{10, 4, 5} {
		s.GetLog(i, &l)
	}
	if s.skipped.Load() != 0 || c.reads != 3 {
		t.Errorf("disarmed: %d without data, %d read", s.skipped.Load(), c.reads)
	}
}
