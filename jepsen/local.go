package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"time"
)

// localCluster is Run's runCluster: coord processes it starts itself (a
// Cluster), on loopback or, for the network nemeses, in the lab's
// namespaces or behind the TCP proxy.
type localCluster struct {
	cfg     Config
	binDir  string // the binary built for the run (removed at close)
	lab     *Lab
	proxy   *Proxy
	cleanup func() error // undoes prepareNemeses
	cl      *Cluster
}

func (l *localCluster) configure(cfg Config) error {
	switch cfg.Net {
	case "", "auto", "netns", "proxy":
	default:
		return fmt.Errorf("jepsen: Config.Net %q: want netns, proxy or auto", cfg.Net)
	}
	l.cfg = cfg
	return nil
}

func (l *localCluster) options() runOptions {
	return runOptions{faultTimeout: 20 * time.Second}
}

func (l *localCluster) start(ctx context.Context, rep *Report) ([]fault, error) {
	bin, err := l.binary(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.network(rep); err != nil {
		return nil, err
	}
	nemeses, err := l.nemeses()
	if err != nil {
		return nil, err
	}
	nemeses, notes, cleanup := prepareNemeses(nemeses, rep.Dir, l.cfg.Voters, l.cfg.Voters+l.cfg.Observers, l.cfg.Log)
	rep.Notes = append(rep.Notes, notes...)
	l.cleanup = cleanup

	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	l.cl, err = StartCluster(startCtx, ClusterConfig{Bin: bin, Dir: rep.Dir, Voters: l.cfg.Voters, Observers: l.cfg.Observers,
		Lab: l.lab, Proxy: l.proxy, Env: l.cfg.Env, Args: l.cfg.Args, Log: l.cfg.Log})
	cancel()
	if err != nil {
		return nil, err
	}
	l.cfg.Log.Info("cluster up", "servers", l.cl.Size(), "addrs", l.cl.Addrs(), "dir", rep.Dir)
	faults := make([]fault, len(nemeses))
	for i, n := range nemeses {
		faults[i] = boundNemesis{n, l.cl}
	}
	return faults, nil
}

// binary is cfg.Bin, or ./cmd/coord built with cfg.Tags.
func (l *localCluster) binary(ctx context.Context) (string, error) {
	if l.cfg.Bin != "" {
		return l.cfg.Bin, nil
	}
	var err error
	if l.binDir, err = os.MkdirTemp("", "jepsen-bin-"); err != nil {
		return "", err
	}
	return BuildCoord(ctx, l.binDir, l.cfg.Tags...)
}

// network makes what the network nemeses need. Partitions need the lab;
// without it (or with Net "proxy") they go through the TCP proxy, and the
// report says so.
func (l *localCluster) network(rep *Report) error {
	needLab, labSize := labNeeds(l.cfg.Nemeses, l.cfg.Voters+l.cfg.Observers)
	if !needLab {
		return nil
	}
	if l.cfg.Net != "proxy" {
		lab, err := NewLab(labSize, l.cfg.Log)
		if err == nil {
			l.lab = lab
			return nil
		}
		if !errors.Is(err, ErrNoLab) || l.cfg.Net == "netns" {
			return err
		}
		rep.Notes = append(rep.Notes, "no network namespaces ("+err.Error()+"): the network nemeses (partitions, latency, loss) go through a TCP proxy per peer link")
		l.cfg.Log.Warn("no network lab: network nemeses through the TCP proxy", "err", err)
	} else {
		rep.Notes = append(rep.Notes, "-net proxy: the network nemeses (partitions, latency, loss) go through a TCP proxy per peer link")
	}
	l.proxy = NewProxy(l.cfg.Seed, l.cfg.Log)
	return nil
}

// nemeses are the nemeses cfg.Nemeses names; those that need the lab are
// left out where there is neither lab nor proxy.
func (l *localCluster) nemeses() ([]Nemesis, error) {
	known := Nemeses(l.lab)
	if l.proxy != nil {
		addProxyNemeses(known, l.proxy)
	}
	var nemeses []Nemesis
	for _, name := range l.cfg.Nemeses {
		n, ok := known[name]
		if !ok {
			if l.lab == nil && needsLab(name) {
				continue
			}
			return nil, fmt.Errorf("jepsen: unknown nemesis %q (known: %v)", name, NemesisNames(l.lab))
		}
		nemeses = append(nemeses, n)
	}
	return nemeses, nil
}

func (l *localCluster) addrs() (zk, grpc []string)            { return l.cl.Addrs(), l.cl.GRPCAddrs() }
func (l *localCluster) restarts() *Cluster                    { return l.cl }
func (l *localCluster) Leader(ctx context.Context) int        { return l.cl.Leader(ctx) }
func (l *localCluster) ID(i int) string                       { return l.cl.ID(i) }
func (l *localCluster) waitHealthy(ctx context.Context) error { return l.cl.WaitHealthy(ctx) }

// restartStopped starts every server a nemesis left down.
func (l *localCluster) restartStopped() []error {
	var errs []error
	for i := 0; i < l.cl.Size(); i++ {
		if !l.cl.Running(i) {
			if err := l.cl.Start(i); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// halt stops the servers and undoes what the nemeses prepared.
func (l *localCluster) halt() error {
	l.cl.Close()
	return l.cleanup()
}

// logs are the servers' own log files, already in dir.
func (l *localCluster) logs(dir string) []string {
	var logs []string
	for i := 0; i < l.cl.Size(); i++ {
		logs = append(logs, filepath.Base(l.cl.LogPath(i)))
	}
	return logs
}

// close stops and removes, in this order, the servers, what the nemeses
// prepared, the proxy, the lab and the binary built, as far as they were
// made.
func (l *localCluster) close() {
	if l.cl != nil {
		l.cl.Close()
	}
	if l.cleanup != nil {
		l.cleanup()
	}
	if l.proxy != nil {
		l.proxy.Close()
	}
	if l.lab != nil {
		if err := l.lab.Close(); err != nil {
			l.cfg.Log.Error("lab cleanup", "err", err)
		}
	}
	if l.binDir != "" {
		os.RemoveAll(l.binDir)
	}
}

// boundNemesis is a Nemesis with the Cluster it acts on.
type boundNemesis struct {
	n  Nemesis
	cl *Cluster
}

func (b boundNemesis) Name() string { return b.n.Name() }
func (b boundNemesis) Inject(ctx context.Context, r *rand.Rand) (string, error) {
	return b.n.Inject(ctx, b.cl, r)
}
func (b boundNemesis) Heal(ctx context.Context) error { return b.n.Heal(ctx, b.cl) }

// HealNote is the nemesis's own, if it has one.
func (b boundNemesis) HealNote() string {
	if hn, ok := b.n.(interface{ HealNote() string }); ok {
		return hn.HealNote()
	}
	return ""
}
