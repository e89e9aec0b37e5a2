package recipes

import (
	"context"
	"errors"
	"reflect"
	"strings"

	"coord/vocab"
)

// Two-phase commit (ZooKeeper's recipe): the coordinator creates the
// transaction node dir/<id> with a child per site; each site joins (marking
// its child and creating an ephemeral dir/<id>/<site>/alive) and votes by
// writing "commit" or "abort" into its child. The outcome is the node
// dir/<id>/outcome, created once: its creator decides, everyone else reads
// it, so every participant learns the same outcome.
//
// The decision: abort as soon as one site votes abort, or a site that
// joined dies (its alive node vanishes with its session) before voting;
// commit once every site voted commit. The coordinator decides; if the
// coordinator's session ends before an outcome exists (its ephemeral
// dir/<id>/coordinator vanishes), the sites decide by the same rule, so the
// transaction still ends. A coordinator whose Decide context ends first
// aborts. A vote is final: it can only be written once, and only while the
// voter's session lives.
const (
	txCommit = "commit"
	txAbort  = "abort"
	txJoined = "joined"
)

// Transaction is the coordinator's handle of a two-phase commit.
type Transaction struct {
	c     Conn
	path  string
	sites []string
}

// StartTransaction creates transaction id under dir for the named sites.
func StartTransaction(ctx context.Context, c Conn, dir, id string, sites []string, opts ...Option) (*Transaction, error) {
	o := buildOptions(opts)
	if err := ensurePath(ctx, c, dir, o.acl); err != nil {
		return nil, err
	}
	path := join(dir, id)
	ops := []Op{CreateOp{Path: path, Data: []byte(strings.Join(sites, "\n")), Mode: vocab.ModePersistent, ACL: o.acl}}
	for _, s := range sites {
		ops = append(ops, CreateOp{Path: join(path, s), Mode: vocab.ModePersistent, ACL: o.acl})
	}
	ops = append(ops, CreateOp{Path: join(path, "coordinator"), Mode: vocab.ModeEphemeral, ACL: o.acl})
	if _, err := c.Multi(ctx, ops...); err != nil {
		return nil, lost(err)
	}
	return &Transaction{c: c, path: path, sites: sites}, nil
}

// Decide waits for the votes and records the outcome: true for commit.
// If ctx ends before the votes are in, it records abort.
func (tx *Transaction) Decide(ctx context.Context) (bool, error) {
	ok, err := decide(ctx, tx.c, tx.path, tx.sites, nil)
	if err != nil && ctx.Err() != nil {
		cctx, cancel := cleanupCtx()
		defer cancel()
		return writeOutcome(cctx, tx.c, tx.path, false)
	}
	return ok, err
}

// TxSite is a site's handle of a two-phase commit.
type TxSite struct {
	c     Conn
	path  string
	site  string
	sites []string
}

// JoinTransaction joins transaction id under dir as site, waiting for the
// coordinator to create it.
func JoinTransaction(ctx context.Context, c Conn, dir, id, site string) (*TxSite, error) {
	path := join(dir, id)
	// The site may come before the coordinator has created the
	// transaction (or before its server has applied it): wait for it.
	var data []byte
	for {
		var ok bool
		var w <-chan Event
		err := retry(ctx, c, func() (err error) {
			ok, _, w, err = c.ExistsW(ctx, path)
			return err
		})
		if err != nil {
			return nil, err
		}
		if ok {
			err = retry(ctx, c, func() (err error) {
				data, _, err = c.Get(ctx, path)
				return err
			})
			if err != nil {
				return nil, err
			}
			break
		}
		if err := waitWatch(ctx, c, w); err != nil {
			return nil, err
		}
	}
	_, err := c.Multi(ctx,
		SetDataOp{Path: join(path, site), Data: []byte(txJoined), Version: 0},
		CreateOp{Path: join(join(path, site), "alive"), Mode: vocab.ModeEphemeral, ACL: vocab.OpenACLUnsafe})
	if err != nil {
		return nil, lost(err)
	}
	return &TxSite{c: c, path: path, site: site, sites: strings.Split(string(data), "\n")}, nil
}

// Vote records the site's vote (once; only while the site's session
// lives). Outcome then waits for the decision.
func (s *TxSite) Vote(ctx context.Context, commit bool) error {
	v := txAbort
	if commit {
		v = txCommit
	}
	_, err := s.c.Multi(ctx,
		CheckOp{Path: join(join(s.path, s.site), "alive"), Version: AnyVersion},
		SetDataOp{Path: join(s.path, s.site), Data: []byte(v), Version: 1})
	return lost(err)
}

// Outcome waits for the transaction's outcome, true for commit (deciding
// it, by the same rule, if the coordinator is gone).
func (s *TxSite) Outcome(ctx context.Context) (bool, error) {
	return decide(ctx, s.c, s.path, s.sites, &s.site)
}

// decide reaches the outcome of the transaction at path. A site (self !=
// nil) only waits, unless the coordinator is gone.
func decide(ctx context.Context, c Conn, path string, sites []string, self *string) (bool, error) {
	outcome := join(path, "outcome")
	for {
		var ok bool
		var ow <-chan Event
		if err := retry(ctx, c, func() (err error) {
			ok, _, ow, err = c.ExistsW(ctx, outcome)
			return err
		}); err != nil {
			return false, err
		}
		if ok {
			return readOutcome(ctx, c, path)
		}
		chans := []<-chan Event{ow}
		if self != nil {
			var coord bool
			var cw <-chan Event
			if err := retry(ctx, c, func() (err error) {
				coord, _, cw, err = c.ExistsW(ctx, join(path, "coordinator"))
				return err
			}); err != nil {
				return false, err
			}
			if coord {
				if err := waitAnyEvent(ctx, c, append(chans, cw)); err != nil {
					return false, err
				}
				continue
			}
		}
		pending, abort := false, false
		for _, s := range sites {
			var data []byte
			var w <-chan Event
			if err := retry(ctx, c, func() (err error) {
				data, _, w, err = c.GetW(ctx, join(path, s))
				return err
			}); err != nil {
				return false, err
			}
			chans = append(chans, w)
			switch string(data) {
			case txCommit:
			case txAbort:
				abort = true
			case txJoined:
				var alive bool
				var aw <-chan Event
				if err := retry(ctx, c, func() (err error) {
					alive, _, aw, err = c.ExistsW(ctx, join(join(path, s), "alive"))
					return err
				}); err != nil {
					return false, err
				}
				chans = append(chans, aw)
				if alive {
					pending = true
				} else {
					abort = true // died before voting
				}
			default:
				pending = true // not joined yet
			}
			if abort {
				break
			}
		}
		if abort || !pending {
			return writeOutcome(ctx, c, path, !abort)
		}
		if err := waitAnyEvent(ctx, c, chans); err != nil {
			return false, err
		}
	}
}

func writeOutcome(ctx context.Context, c Conn, path string, commit bool) (bool, error) {
	v := txAbort
	if commit {
		v = txCommit
	}
	err := retry(ctx, c, func() error {
		_, err := c.Create(ctx, join(path, "outcome"), []byte(v), vocab.ModePersistent, vocab.OpenACLUnsafe)
		return err
	})
	if err != nil && !errors.Is(err, vocab.NodeExists) {
		return false, err
	}
	return readOutcome(ctx, c, path)
}

func readOutcome(ctx context.Context, c Conn, path string) (bool, error) {
	var data []byte
	err := retry(ctx, c, func() (err error) {
		data, _, err = c.Get(ctx, join(path, "outcome"))
		return err
	})
	return string(data) == txCommit, err
}

// waitAnyEvent waits for one of the one-shot watches, ctx or the end of
// the session.
func waitAnyEvent(ctx context.Context, c Conn, chans []<-chan Event) error {
	for {
		st, changed := c.State()
		if !st.Live() {
			return sessionErr(st)
		}
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(changed)},
		}
		for _, ch := range chans {
			if ch != nil {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
			}
		}
		switch chosen, _, _ := reflect.Select(cases); chosen {
		case 0:
			return ctx.Err()
		case 1:
			continue
		}
		return nil
	}
}
