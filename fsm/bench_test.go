package fsm

// Benchmarks for the figures issue 2 asks for. Run them with
//
//	go test ./fsm -run '^$' -bench . -benchtime 1x   # the 1M-znode ones once
//	go test ./fsm -run '^$' -bench 'Apply(Create|SetData|Delete)$' -cpu 1
//
// docs/benchmarks.md records the results.

import (
	"bufio"
	"bytes"
	"coord/vocab"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

const benchDirs = 1000 // the benchmark tree is /bench/dNNN/<20-byte name>

var benchData = bytes.Repeat([]byte("x"), 100)

// benchName is a 20-byte child name.
func benchName(i int) string { return fmt.Sprintf("node-%015d", i) }

func benchPath(i int) string {
	return fmt.Sprintf("/bench/d%03d/%s", i%benchDirs, benchName(i))
}

// benchFSM returns an FSM with the /bench/dNNN parents.
func benchFSM(tb testing.TB) *FSM {
	f := New()
	mk := func(p string) {
		r, _ := f.Apply(1, &Command{Type: CmdCreate, Time: 1, Op: Op{Type: CmdCreate, Path: p, ACL: vocab.OpenACLUnsafe}})
		if r.Err != nil {
			tb.Fatal(r.Err)
		}
	}
	mk("/bench")
	for d := 0; d < benchDirs; d++ {
		mk(fmt.Sprintf("/bench/d%03d", d))
	}
	return f
}

func createCmds(from, n int) []Command {
	cmds := make([]Command, n)
	for i := range cmds {
		cmds[i] = Command{Type: CmdCreate, Time: int64(i), Op: Op{
			Type: CmdCreate, Path: benchPath(from + i), Data: benchData, ACL: vocab.OpenACLUnsafe}}
	}
	return cmds
}

func applyAll(tb testing.TB, f *FSM, cmds []Command) {
	for i := range cmds {
		if r, _ := f.Apply(1, &cmds[i]); r.Err != nil {
			tb.Fatal(r.Err)
		}
	}
}

// BenchmarkApplyCreate applies creates of 100-byte znodes with 20-byte names.
func BenchmarkApplyCreate(b *testing.B) {
	f := benchFSM(b)
	cmds := createCmds(0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	applyAll(b, f, cmds)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

// BenchmarkApplyEntryCreate is BenchmarkApplyCreate with decoding included,
// as the raft adapter will call it.
func BenchmarkApplyEntryCreate(b *testing.B) {
	f := benchFSM(b)
	cmds := createCmds(0, b.N)
	entries := make([][]byte, len(cmds))
	for i := range cmds {
		entries[i] = cmds[i].Encode(nil)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, e := range entries {
		if r, _, err := f.ApplyEntry(1, e); err != nil || r.Err != nil {
			b.Fatal(err, r.Err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

const benchPopulation = 100_000

func BenchmarkApplySetData(b *testing.B) {
	f := benchFSM(b)
	applyAll(b, f, createCmds(0, benchPopulation))
	cmds := make([]Command, b.N)
	for i := range cmds {
		cmds[i] = Command{Type: CmdSetData, Time: int64(i), Op: Op{
			Type: CmdSetData, Path: benchPath(i % benchPopulation), Data: benchData, Version: -1}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	applyAll(b, f, cmds)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "setData/s")
}

func BenchmarkApplyDelete(b *testing.B) {
	f := benchFSM(b)
	applyAll(b, f, createCmds(0, b.N))
	cmds := make([]Command, b.N)
	for i := range cmds {
		cmds[i] = Command{Type: CmdDelete, Time: int64(i), Op: Op{Type: CmdDelete, Path: benchPath(i), Version: -1}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	applyAll(b, f, cmds)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deletes/s")
}

// BenchmarkApplyCreateWithReads interleaves a View with every create, the
// worst case for copy-on-write: every write copies its path.
func BenchmarkApplyCreateWithReads(b *testing.B) {
	f := benchFSM(b)
	cmds := createCmds(0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range cmds {
		f.Apply(1, &cmds[i])
		f.View()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

const bigTree = 1_000_000

var (
	bigOnce sync.Once
	bigFSM  *FSM
)

// big returns a shared FSM holding 1M znodes of 100-byte data.
func big(b *testing.B) *FSM {
	bigOnce.Do(func() {
		bigFSM = benchFSM(b)
		applyAll(b, bigFSM, createCmds(0, bigTree-bigFSM.View().NodeCount()))
	})
	return bigFSM
}

// BenchmarkSnapshotCapture measures taking the snapshot view of 1M znodes
// right after a write (so it is a real capture, not the cached view).
func BenchmarkSnapshotCapture(b *testing.B) {
	f := big(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		f.Apply(1, &Command{Type: CmdSetData, Time: 1, Op: Op{Type: CmdSetData, Path: benchPath(i % bigTree), Data: benchData, Version: -1}})
		b.StartTimer()
		f.View()
	}
	b.ReportMetric(float64(f.View().NodeCount()), "znodes")
}

// BenchmarkSnapshotWrite streams the 1M-znode snapshot.
func BenchmarkSnapshotWrite(b *testing.B) {
	v := big(b).View()
	var n int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, _ = v.WriteTo(io.Discard)
	}
	b.ReportMetric(float64(n), "bytes")
}

// BenchmarkApplyDuringSnapshot applies setData to the 1M-znode tree while a
// snapshot of it is written to a file (and fsynced), and reports the apply
// latency percentiles against the same writes without a snapshot running.
func BenchmarkApplyDuringSnapshot(b *testing.B) {
	f := big(b)
	const writes = 200_000
	mk := func(base int) []Command {
		cmds := make([]Command, writes)
		for i := range cmds {
			cmds[i] = Command{Type: CmdSetData, Time: 2, Op: Op{Type: CmdSetData, Path: benchPath((base + i*7919) % bigTree), Data: benchData, Version: -1}}
		}
		return cmds
	}
	run := func(cmds []Command, stop func() bool) []time.Duration {
		lat := make([]time.Duration, 0, len(cmds))
		for i := range cmds {
			if stop != nil && stop() {
				break
			}
			t0 := time.Now()
			f.Apply(1, &cmds[i])
			lat = append(lat, time.Since(t0))
		}
		return lat
	}
	for i := 0; i < b.N; i++ {
		base := run(mk(i), nil)
		v := f.View()
		done := make(chan time.Duration)
		file, err := os.Create(filepath.Join(b.TempDir(), "snapshot"))
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			t0 := time.Now()
			w := bufio.NewWriterSize(file, 1<<20)
			if _, err := v.WriteTo(w); err != nil {
				panic(err)
			}
			if err := w.Flush(); err != nil {
				panic(err)
			}
			if err := file.Sync(); err != nil {
				panic(err)
			}
			file.Close()
			done <- time.Since(t0)
		}()
		var snapTime time.Duration
		finished := false
		during := run(mk(i+1), func() bool {
			select {
			case snapTime = <-done:
				finished = true
				return true
			default:
				return false
			}
		})
		if !finished {
			snapTime = <-done
		}
		pb, pd := percentiles(base), percentiles(during)
		b.ReportMetric(float64(len(during)), "writes-during-snapshot")
		b.ReportMetric(snapTime.Seconds()*1000, "snapshot-ms")
		b.ReportMetric(float64(pb[0].Nanoseconds()), "base-p50-ns")
		b.ReportMetric(float64(pb[1].Nanoseconds()), "base-p99-ns")
		b.ReportMetric(float64(pd[0].Nanoseconds()), "during-p50-ns")
		b.ReportMetric(float64(pd[1].Nanoseconds()), "during-p99-ns")
		b.ReportMetric(float64(pd[2].Nanoseconds()), "during-max-ns")
	}
}

func percentiles(d []time.Duration) [3]time.Duration {
	if len(d) == 0 {
		return [3]time.Duration{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return [3]time.Duration{s[len(s)/2], s[len(s)*99/100], s[len(s)-1]}
}

// BenchmarkRestore restores the 1M-znode snapshot into a fresh FSM, the
// decoding on the building goroutine (serial) or on one of its own
// (pipelined, as a server restores).
func BenchmarkRestore(b *testing.B) {
	var buf bytes.Buffer
	big(b).View().WriteTo(&buf)
	snap := buf.Bytes()
	for _, mode := range []struct {
		name  string
		spawn func(func())
	}{{"serial", nil}, {"pipelined", func(decode func()) { go decode() }}} {
		b.Run(mode.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				g := New()
				if err := g.RestorePipelined(bytes.NewReader(snap), mode.spawn); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(snap)), "snapshot-bytes")
		})
	}
}

// BenchmarkHeapPerZnode builds 1M znodes (100-byte data, 20-byte names) and
// reports the live heap they take, and what is left once the data and the
// name are taken off.
func BenchmarkHeapPerZnode(b *testing.B) {
	for i := 0; i < b.N; i++ {
		f := benchFSM(b)
		before := liveHeap()
		cmds := createCmds(0, bigTree)
		// Data must be each node's own, as after decoding a log entry.
		for j := range cmds {
			cmds[j].Op.Data = bytes.Clone(benchData)
		}
		applyAll(b, f, cmds)
		cmds = nil
		after := liveHeap()
		per := (float64(after) - float64(before)) / bigTree
		b.ReportMetric(per, "heap-bytes/znode")
		b.ReportMetric(per-100-20, "overhead-bytes/znode")
		runtime.KeepAlive(f)
	}
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
