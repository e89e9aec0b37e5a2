package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"time"
)

// -floor measures what one replicated write cannot go below on this
// machine, so that a 1×1 run's latencies can be read against it: a
// durable append (floorEntry bytes written into a preallocated file, then
// fdatasync: the least a log store can do to make an entry durable) and a
// round trip over loopback TCP (a floorEntry-byte request, a 16-byte
// reply, between two goroutines of this process). A write whose leader
// appends before it replicates (hashicorp/raft's) costs at least two
// appends and two round trips in series (client→leader→follower→leader→
// client); ZooKeeper's leader appends while its proposal travels, so its
// floor is two round trips plus the longer of the two appends. The floor's
// percentiles are of sums of independently drawn samples of the parts.
// The parallel floor assumes the servers' appends do not slow each other;
// the "3 appends at once" row measures whether they do on this machine:
// three writers appending to files of their own in dir at the same time,
// as a cluster's three servers do when they share one disk.

const floorEntry = 200

type floorResult struct {
	Samples  int             `json:"samples"`
	Dir      string          `json:"dir"`
	Append   floorPercentile `json:"append"`
	RTT      floorPercentile `json:"round_trip"`
	Serial   floorPercentile `json:"serial"`   // 2 appends + 2 round trips
	Parallel floorPercentile `json:"parallel"` // max(2 appends) + 2 round trips
	// Together: each append of floorWriters writers appending at once.
	Together floorPercentile `json:"append_together"`
}

// floorWriters is how many writers the "at once" row runs: a cluster's
// three servers.
const floorWriters = 3

type floorPercentile struct {
	P50, P99, P999 time.Duration
}

func percentilesOf(h *hist) floorPercentile {
	return floorPercentile{h.percentile(0.50), h.percentile(0.99), h.percentile(0.999)}
}

// measureFloor takes n samples of each part, in dir (the cluster's
// directory: the file system its logs are on).
func measureFloor(dir string, n int) (floorResult, error) {
	res := floorResult{Samples: n, Dir: dir}
	appends, err := appendSamples(dir, "floor.log", n)
	if err != nil {
		return res, err
	}
	together, err := appendsTogether(dir, n)
	if err != nil {
		return res, err
	}
	rtts, err := roundTripSamples(n)
	if err != nil {
		return res, err
	}
	var ha, hr, hs, hp, ht hist
	for _, d := range together {
		ht.record(d)
	}
	res.Together = percentilesOf(&ht)
	for i := range n {
		ha.record(appends[i])
		hr.record(rtts[i])
		pick := func(s []time.Duration) time.Duration { return s[rand.IntN(len(s))] }
		a1, a2 := pick(appends), pick(appends)
		r := pick(rtts) + pick(rtts)
		hs.record(a1 + a2 + r)
		hp.record(max(a1, a2) + r)
	}
	res.Append, res.RTT, res.Serial, res.Parallel = percentilesOf(&ha), percentilesOf(&hr), percentilesOf(&hs), percentilesOf(&hp)
	return res, nil
}

// appendsTogether runs floorWriters appendSamples at once, each on a file
// of its own, and returns all their samples.
func appendsTogether(dir string, n int) ([]time.Duration, error) {
	type result struct {
		d   []time.Duration
		err error
	}
	ch := make(chan result, floorWriters)
	for w := range floorWriters {
		go func() {
			d, err := appendSamples(dir, fmt.Sprintf("floor-%d.log", w), n)
			ch <- result{d, err}
		}()
	}
	var all []time.Duration
	var first error
	for range floorWriters {
		r := <-ch
		if r.err != nil && first == nil {
			first = r.err
		}
		all = append(all, r.d...)
	}
	return all, first
}

// appendSamples times n appends of floorEntry bytes, each followed by
// fdatasync, into the file name in dir, written out for all of them first
// (so that no append changes the file's size, which would make fdatasync
// write metadata).
func appendSamples(dir, name string, n int) ([]time.Duration, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer os.Remove(path)
	defer f.Close()
	if _, err := f.Write(make([]byte, n*floorEntry)); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	buf := make([]byte, floorEntry)
	out := make([]time.Duration, n)
	for i := range n {
		binary.BigEndian.PutUint64(buf, uint64(i))
		t := time.Now()
		if _, err := f.WriteAt(buf, int64(i*floorEntry)); err != nil {
			return nil, err
		}
		if err := datasync(f); err != nil {
			return nil, fmt.Errorf("floor: fdatasync: %w", err)
		}
		out[i] = time.Since(t)
	}
	return out, nil
}

// roundTripSamples times n request/reply round trips over one loopback
// TCP connection.
func roundTripSamples(n int) ([]time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		req, reply := make([]byte, floorEntry), make([]byte, 16)
		for {
			if _, err := io.ReadFull(r, req); err != nil {
				return
			}
			if _, err := c.Write(reply); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	req, reply := make([]byte, floorEntry), make([]byte, 16)
	out := make([]time.Duration, n)
	for i := range n {
		t := time.Now()
		if _, err := c.Write(req); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(c, reply); err != nil {
			return nil, err
		}
		out[i] = time.Since(t)
	}
	return out, nil
}

func printFloor(w io.Writer, f floorResult) {
	fmt.Fprintf(w, "# floor (%d samples each, in %s): a %d-byte durable append (write into a preallocated file + fdatasync), a loopback TCP round trip, and their sums\n", f.Samples, f.Dir, floorEntry)
	fmt.Fprintf(w, "%-36s %9s %9s %9s\n", "floor", "p50(ms)", "p99(ms)", "p999(ms)")
	for _, row := range []struct {
		name string
		p    floorPercentile
	}{
		{"append", f.Append},
		{"round trip", f.RTT},
		{"2 appends + 2 round trips (serial)", f.Serial},
		{"max(2 appends) + 2 round trips", f.Parallel},
		{fmt.Sprintf("append, %d at once (one file each)", floorWriters), f.Together},
	} {
		fmt.Fprintf(w, "%-36s %9s %9s %9s\n", row.name, ms(row.p.P50), ms(row.p.P99), ms(row.p.P999))
	}
}
