package jepsen

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"coord/api"
)

// convergedWindow bounds the wait for every server to stand at one index.
const convergedWindow = 30 * time.Second

// convergedVerdict checks, once the cluster has recovered, that every
// server holds the same state: asked (Admin HashKV) for the digest of its
// state at the highest applied index any of them reported, all answer at
// one index with one digest. The workloads' checkers see what clients
// read; this sees what no client asked for, e.g. a server that restored a
// corrupt snapshot or replayed a corrupt log entry without noticing and
// now differs from the others (DESIGN.md invariants 6 and 11).
func convergedVerdict(ctx context.Context, c *Cluster) Verdict {
	v := Verdict{Checker: "converged"}
	ctx, cancel := context.WithTimeout(ctx, convergedWindow)
	defer cancel()
	var last []string
	var want uint64
	for attempt := 0; ctx.Err() == nil; attempt++ {
		resps := make([]*api.HashKVResponse, c.Size())
		last = last[:0]
		for i := range resps {
			err := c.adminAt(ctx, i, func(ctx context.Context, a api.AdminClient) error {
				resp, err := a.HashKV(ctx, &api.HashKVRequest{MinIndex: want})
				resps[i] = resp
				return err
			})
			if err != nil {
				last = append(last, fmt.Sprintf("%s: %v", c.ID(i), err))
				continue
			}
			want = max(want, resps[i].AppliedIndex)
			last = append(last, fmt.Sprintf("%s at index %d: %s", c.ID(i), resps[i].AppliedIndex, hex.EncodeToString(resps[i].Digest)[:16]))
		}
		if same, differ := compareDigests(resps); same {
			v.Result = Pass
			v.Summary = fmt.Sprintf("%d servers at index %d hold one state (digest %s)", c.Size(), resps[0].AppliedIndex, hex.EncodeToString(resps[0].Digest)[:16])
			return v
		} else if differ {
			v.Result = Failed
			v.Summary = fmt.Sprintf("servers at index %d hold different states", resps[0].AppliedIndex)
			v.Details = append([]string(nil), last...)
			return v
		}
		time.Sleep(200 * time.Millisecond)
	}
	v.Result = Unknown
	v.Summary = fmt.Sprintf("the servers were not at one index within %v", convergedWindow)
	v.Details = last
	return v
}

// compareDigests says whether every server answered at one index with one
// digest (same), or at one index with different ones (differ).
func compareDigests(resps []*api.HashKVResponse) (same, differ bool) {
	for _, r := range resps {
		if r == nil || r.AppliedIndex != resps[0].AppliedIndex {
			return false, false
		}
	}
	for _, r := range resps[1:] {
		if string(r.Digest) != string(resps[0].Digest) {
			return false, true
		}
	}
	return true, false
}
