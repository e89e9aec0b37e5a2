package jepsen

import (
	"errors"
	"log/slog"
	"strings"
)

// addNemeses registers the nemeses of nemesis_net.go, nemesis_proc.go,
// nemesis_member.go, nemesis_disk.go and nemesis_power.go. The network ones
// need a Lab; the disk ones share one filesystem on the last voter, the
// power ones a forgetfs mount over every server's data directory.
func addNemeses(m map[string]Nemesis, lab *Lab) {
	m["kill-majority"] = &killMajorityNemesis{}
	m["clock"] = &clockNemesis{}
	m["membership"] = &membershipNemesis{removed: -1}
	d := &nodeDisk{}
	m["disk-full"] = &diskFullNemesis{d: d}
	m["disk-slow"] = &diskSlowNemesis{d: d}
	p := &powerDisks{}
	for _, k := range []string{"one", "minority", "all"} {
		n := &powerLossNemesis{d: p, kind: k}
		m[n.Name()] = n
	}
	m["torn-write"] = &tornWriteNemesis{d: p}
	m["fsync-error"] = &fsyncErrorNemesis{d: p}
	m["bitflip"] = &bitflipNemesis{}
	if lab != nil {
		for _, k := range []string{"bridge", "oneway", "loss", "latency"} {
			n := &netNemesis{lab: lab, kind: k}
			m[n.Name()] = n
		}
	}
}

// needsLab reports whether a nemesis works on the Lab's namespaces.
func needsLab(name string) bool {
	return strings.HasPrefix(name, "partition-") || name == "latency" || name == "loss"
}

// labNeeds says whether the named nemeses need a lab, and how many
// namespaces: one per server, and one more for the observer the membership
// nemesis adds.
func labNeeds(names []string, servers int) (bool, int) {
	need, extra := false, 0
	for _, n := range names {
		need = need || needsLab(n)
		if n == "membership" {
			extra = 1
		}
	}
	return need, servers + extra
}

// prepareNemeses sets up what nemeses need before the servers start (the
// disk nemeses' filesystem). A nemesis that cannot be set up here is left
// out, with a note. cleanup undoes it all once the servers are stopped; it
// may be called more than once and reports anything left behind.
func prepareNemeses(ns []Nemesis, dir string, voters, servers int, log *slog.Logger) (kept []Nemesis, notes []string, cleanup func() error) {
	var prepared []preparer
	for _, n := range ns {
		p, ok := n.(preparer)
		if !ok {
			kept = append(kept, n)
			continue
		}
		if err := p.prepare(dir, voters, servers); err != nil {
			notes = append(notes, n.Name()+" left out: "+err.Error())
			log.Warn("nemesis left out", "nemesis", n.Name(), "err", err)
			continue
		}
		prepared = append(prepared, p)
		kept = append(kept, n)
	}
	return kept, notes, func() error {
		var errs []error
		for _, p := range prepared {
			errs = append(errs, p.cleanup())
		}
		return errors.Join(errs...)
	}
}
