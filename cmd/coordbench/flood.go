package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"coord/zk"
)

// -flood N: one ZooKeeper-protocol session on server 1 pipelines N getData
// requests of a prepared znode and never reads the replies, as a broken or
// stalled client does. coordbench writes until its writes block for
// -flood-stall (the server stopped reading and the kernel's buffers are
// full) or all N are written, sampling server 1's resident memory every
// 100 ms, and reports how many requests the server took and its memory
// before and at its peak. Then it closes the connection.

type floodResult struct {
	Requests int   `json:"requests"`
	Written  int   `json:"written"`
	Stalled  bool  `json:"stalled"`
	RSSStart int64 `json:"rss_start_bytes"`
	RSSPeak  int64 `json:"rss_peak_bytes"`
	Seconds  float64
}

func (b *bench) runFlood(ctx context.Context, n int, stall time.Duration) (floodResult, error) {
	res := floodResult{Requests: n}
	rss := func() int64 {
		for _, h := range b.ens.health(ctx) {
			if h.ID == b.ens.name(1) {
				return h.RSS
			}
		}
		return 0
	}
	res.RSSStart = rss()
	res.RSSPeak = res.RSSStart
	nc, err := net.DialTimeout("tcp", b.servers[0], 5*time.Second)
	if err != nil {
		return res, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(zk.AppendFrame(nil, &zk.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})); err != nil {
		return res, err
	}
	if _, err := zk.ReadFrame(nc, zk.DefaultMaxFrame); err != nil {
		return res, fmt.Errorf("connect: %w", err)
	}
	nc.SetDeadline(time.Time{})

	done := make(chan struct{})
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				res.RSSPeak = max(res.RSSPeak, rss())
			}
		}
	}()
	start := time.Now()
	path := b.keys[0]
	var buf []byte
	for res.Written < n && ctx.Err() == nil {
		buf = buf[:0]
		k := min(4096, n-res.Written)
		for i := 0; i < k; i++ {
			buf = zk.AppendFrame(buf, &zk.RequestHeader{Xid: int32(res.Written + i + 1), Type: zk.OpGetData}, &zk.GetDataRequest{Path: path})
		}
		nc.SetWriteDeadline(time.Now().Add(stall))
		w, err := nc.Write(buf)
		res.Written += k * w / len(buf)
		if err != nil {
			res.Stalled = true
			break
		}
	}
	res.Seconds = time.Since(start).Seconds()
	time.Sleep(time.Second) // the server catches up with what it read
	close(done)
	res.RSSPeak = max(res.RSSPeak, rss())
	return res, nil
}

func printFlood(w io.Writer, name string, r floodResult) {
	how := "all written"
	if r.Stalled {
		how = "then the client's writes blocked (the server stopped reading)"
	}
	fmt.Fprintf(w, "flood %s: %d of %d unread getData requests written in %.1fs, %s; server rss %d MB before, %d MB peak\n",
		name, r.Written, r.Requests, r.Seconds, how, r.RSSStart>>20, r.RSSPeak>>20)
}
