package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"coord/api"
	"coord/internal/freeport"
	"coord/vocab"
)

// membershipNemesis changes the raft configuration under load through
// coord's Admin RPCs (what coordctl add-voter/add-observer/remove/
// move-leader call), one of:
//   - remove a voter that is not the leader (it is killed) and, at Heal,
//     add it back as a voter and restart it;
//   - start a new server process (an extra namespace in the lab, fresh
//     data), add it as an observer and, at Heal, remove it and stop it;
//   - transfer leadership to another voter (Heal has nothing to undo).
//
// Heal ends only when the configuration is the original voter set again
// (bounded by its context).
type membershipNemesis struct {
	removed int // voter index removed, or -1
	extra   *node
	seq     int // extra servers started so far
	next    int // the next change, counting from 1
	note    string
}

func (n *membershipNemesis) Name() string { return "membership" }

func (n *membershipNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	n.removed, n.note = -1, ""
	before, err := c.Members(ctx)
	if err != nil {
		return "membership", err
	}
	// The first change is a random one, then they take turns.
	if n.seq == 0 && n.next == 0 {
		n.next = 1 + r.Intn(3)
	}
	var desc string
	k := n.next % 3
	n.next++
	switch k {
	case 0:
		desc, err = n.removeVoter(ctx, c, r)
	case 1:
		desc, err = n.addObserver(ctx, c)
	default:
		desc, err = n.transfer(ctx, c, r)
	}
	after, merr := c.Members(ctx)
	if merr != nil {
		after = merr.Error()
	}
	return fmt.Sprintf("%s; members %s -> %s", desc, before, after), err
}

func (n *membershipNemesis) removeVoter(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	l, err := c.WaitLeader(ctx)
	if err != nil {
		return "remove a voter", err
	}
	i := (l + 1 + r.Intn(c.Voters()-1)) % c.Voters()
	desc := "remove voter " + c.ID(i)
	// Heal adds it back even if the call fails: a removal cut short by a
	// leader change (say) may have been committed all the same.
	n.removed = i
	err = c.admin(ctx, func(ctx context.Context, a api.AdminClient) error {
		_, err := a.RemoveServer(ctx, &api.RemoveServerRequest{Id: c.ID(i)})
		return err
	})
	if err != nil {
		return desc, err
	}
	// A removed server stays up outside the configuration; it is stopped
	// until Heal adds it back, as an operator would.
	c.Kill(i)
	return desc + " (and stop it)", nil
}

func (n *membershipNemesis) addObserver(ctx context.Context, c *Cluster) (string, error) {
	nd, err := c.newExtraNode(n.seq)
	if err != nil {
		return "add an observer", err
	}
	n.seq++
	n.extra = nd
	desc := "start " + nd.id + " at " + nd.raft + " and add it as an observer"
	if err := c.startNode(nd); err != nil {
		return desc, err
	}
	err = c.admin(ctx, func(ctx context.Context, a api.AdminClient) error {
		_, err := a.AddServer(ctx, &api.AddServerRequest{Id: nd.id, RaftAddr: nd.raft, Observer: true})
		return err
	})
	if err != nil {
		return desc, err
	}
	// The observer has caught up once it reports healthy.
	for ctx.Err() == nil {
		if h, err := c.healthOf(ctx, nd); err == nil && h.Healthy {
			return desc + "; " + nd.id + " healthy as " + h.Role, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return desc, fmt.Errorf("observer %s not healthy: %w", nd.id, ctx.Err())
}

func (n *membershipNemesis) transfer(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	l, err := c.WaitLeader(ctx)
	if err != nil {
		return "transfer leadership", err
	}
	to := (l + 1 + r.Intn(c.Voters()-1)) % c.Voters()
	desc := fmt.Sprintf("transfer leadership %s -> %s", c.ID(l), c.ID(to))
	var got string
	err = c.admin(ctx, func(ctx context.Context, a api.AdminClient) error {
		resp, err := a.TransferLeadership(ctx, &api.TransferLeadershipRequest{Id: c.ID(to)})
		if err == nil {
			got = resp.LeaderId
		}
		return err
	})
	return desc + "; new leader " + got, err
}

func (n *membershipNemesis) Heal(ctx context.Context, c *Cluster) error {
	var errs []error
	if nd := n.extra; nd != nil {
		n.extra = nil
		err := c.admin(ctx, func(ctx context.Context, a api.AdminClient) error {
			_, err := a.RemoveServer(ctx, &api.RemoveServerRequest{Id: nd.id})
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("remove observer %s: %w", nd.id, err))
		}
		c.killNode(nd)
		if err := os.RemoveAll(filepath.Join(nd.dir, "data")); err != nil {
			errs = append(errs, err)
		}
	}
	if i := n.removed; i >= 0 {
		n.removed = -1
		err := c.admin(ctx, func(ctx context.Context, a api.AdminClient) error {
			_, err := a.AddServer(ctx, &api.AddServerRequest{Id: c.ID(i), RaftAddr: c.nodes[i].raft})
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("add voter %s back: %w", c.ID(i), err))
		}
		if !c.Running(i) {
			if err := c.Start(i); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Wait for the original configuration: exactly the cluster's servers,
	// the voters as voters.
	want := c.originalMembers()
	var got string
	for {
		var err error
		if got, err = c.Members(ctx); err == nil && got == want {
			break
		}
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("members %s, want %s: %w", got, want, ctx.Err()))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.note = "members after heal " + got
	return errors.Join(errs...)
}

// HealNote is the configuration Heal ended with.
func (n *membershipNemesis) HealNote() string { return n.note }

// admin calls f with an Admin client of the current leader, trying again
// (bounded by ctx) while there is none or it says it is not the leader.
func (c *Cluster) admin(ctx context.Context, f func(context.Context, api.AdminClient) error) error {
	var last error
	for ctx.Err() == nil {
		l, err := c.WaitLeader(ctx)
		if err != nil {
			break
		}
		last = c.adminAt(ctx, l, f)
		if last == nil || !strings.Contains(last.Error(), "not the leader") {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last == nil {
		last = ctx.Err()
	}
	return last
}

// adminAt calls f once with an Admin client of server i, as the runner's
// admin identity.
func (c *Cluster) adminAt(ctx context.Context, i int, f func(context.Context, api.AdminClient) error) error {
	cc, err := grpc.NewClient(c.nodes[i].grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Adding, removing and moving the leader need an admin identity.
	cctx = metadata.AppendToOutgoingContext(cctx, api.AdminDigestMetadata, adminUserPassword)
	return f(cctx, api.NewAdminClient(cc))
}

// Members is the leader's raft configuration, sorted: "s1:voter s2:voter
// s4:observer".
func (c *Cluster) Members(ctx context.Context) (string, error) {
	var out []string
	err := c.admin(ctx, func(ctx context.Context, a api.AdminClient) error {
		resp, err := a.Members(ctx, &api.MembersRequest{})
		if err != nil {
			return err
		}
		out = out[:0]
		for _, m := range resp.Members {
			out = append(out, m.Id+":"+m.Role)
		}
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, " "), err
}

// originalMembers is the configuration StartCluster made, as Members
// writes it.
func (c *Cluster) originalMembers() string {
	var out []string
	for i, nd := range c.nodes {
		role := "voter"
		if i >= c.cfg.Voters {
			role = "observer"
		}
		out = append(out, nd.id+":"+role)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// newExtraNode makes (but does not start) an observer that is not one of
// the cluster's indexed servers: the nemesis that adds it removes it. In
// the lab it takes the namespace after the cluster's (the runner makes the
// lab one bigger for this); otherwise it gets free loopback ports. Its id
// is s<Size+1> (with a suffix after the first) and its data is fresh.
func (c *Cluster) newExtraNode(seq int) (*node, error) {
	k := c.Size()
	id := fmt.Sprintf("s%d", k+1)
	if seq > 0 {
		id = fmt.Sprintf("s%dx%d", k+1, seq)
	}
	nd := &node{id: id, dir: filepath.Join(c.cfg.Dir, id), log: filepath.Join(c.cfg.Dir, id+".log")}
	if lab := c.cfg.Lab; lab != nil {
		if lab.Size() <= k {
			return nil, fmt.Errorf("jepsen: the lab has no namespace for an extra server")
		}
		nd.ns = lab.NS(k)
		a := func(p int) string { return fmt.Sprintf("%s:%d", lab.Host(k), p) }
		nd.raft, nd.grpc, nd.zk, nd.http = a(nsPorts[0]), a(nsPorts[1]), a(nsPorts[2]), a(nsPorts[3])
	} else {
		ports, err := freeport.Ports(4)
		if err != nil {
			return nil, err
		}
		a := func(p int) string { return fmt.Sprintf("127.0.0.1:%d", p) }
		nd.raft, nd.grpc, nd.zk, nd.http = a(ports[0]), a(ports[1]), a(ports[2]), a(ports[3])
	}
	var peers []string
	for i, o := range append(append([]*node{}, c.nodes...), nd) {
		spec := fmt.Sprintf("%s=%s,%s", o.id, o.raft, o.grpc)
		if i >= c.cfg.Voters {
			spec += ",observer"
		}
		peers = append(peers, spec)
	}
	nd.args = []string{"-id", nd.id, "-data-dir", filepath.Join(nd.dir, "data"),
		"-raft-addr", nd.raft, "-grpc-addr", nd.grpc, "-zk-addr", nd.zk, "-http-addr", nd.http,
		"-gossip-addr", "", "-tick", "200ms", "-min-session-timeout", "400ms", "-max-session-timeout", "20s",
		"-raft-timeout", "300ms", "-peers", strings.Join(peers, ";"), "-observer", "-bootstrap=false",
		"-cluster-key-file", c.keyFile, "-super-digest", vocab.Digest(adminUserPassword)}
	nd.args = append(nd.args, c.cfg.Args...)
	if err := os.MkdirAll(nd.dir, 0o755); err != nil {
		return nil, err
	}
	return nd, nil
}

// killNode is Kill for a server outside the index.
func (c *Cluster) killNode(nd *node) {
	nd.mu.Lock()
	if !nd.runningLocked() {
		nd.mu.Unlock()
		return
	}
	nd.cmd.Process.Kill()
	done := nd.done
	nd.mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// healthOf is Health for a server outside the index.
func (c *Cluster) healthOf(ctx context.Context, nd *node) (Health, error) {
	var h Health
	if err := getJSON(ctx, "http://"+nd.http+"/health", &h); err != nil {
		return h, err
	}
	return h, nil
}

func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
