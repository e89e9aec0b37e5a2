package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"coord/vocab"
)

// view is what a command prints, in each output format. json is the value
// marshalled for --output json; text writes the human form; rows, when set,
// gives the table's header and rows (without it, table is text).
type view struct {
	json any
	text func(w io.Writer)
	rows func() ([]string, [][]string)
}

func (g *globals) show(v view) error {
	switch g.output {
	case "json":
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v.json)
	case "table":
		if v.rows != nil {
			head, rows := v.rows()
			writeTable(g.stdout, head, rows)
			return nil
		}
	}
	if v.text != nil {
		v.text(g.stdout)
	}
	return nil
}

// nouns says how many: nouns(1, "node", "nodes") is "1 node", nouns(2,
// ...) "2 nodes".
func nouns(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func writeTable(w io.Writer, head []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// statJSON is a Stat with ZooKeeper's field names.
type statJSON struct {
	Czxid          int64 `json:"czxid"`
	Mzxid          int64 `json:"mzxid"`
	Ctime          int64 `json:"ctime"`
	Mtime          int64 `json:"mtime"`
	Version        int32 `json:"version"`
	Cversion       int32 `json:"cversion"`
	Aversion       int32 `json:"aversion"`
	EphemeralOwner int64 `json:"ephemeralOwner"`
	DataLength     int32 `json:"dataLength"`
	NumChildren    int32 `json:"numChildren"`
	Pzxid          int64 `json:"pzxid"`
}

func statOut(s vocab.Stat) statJSON { return statJSON(s) }

// writeStat prints a Stat as zkCli.sh does.
func writeStat(w io.Writer, s vocab.Stat) {
	ms := func(t int64) string { return time.UnixMilli(t).UTC().Format("Mon Jan 02 15:04:05 UTC 2006") }
	fmt.Fprintf(w, "cZxid = 0x%x\nctime = %s\nmZxid = 0x%x\nmtime = %s\npZxid = 0x%x\n",
		s.Czxid, ms(s.Ctime), s.Mzxid, ms(s.Mtime), s.Pzxid)
	fmt.Fprintf(w, "cversion = %d\ndataVersion = %d\naclVersion = %d\nephemeralOwner = 0x%x\ndataLength = %d\nnumChildren = %d\n",
		s.Cversion, s.Version, s.Aversion, uint64(s.EphemeralOwner), s.DataLength, s.NumChildren)
}

func statRows(s vocab.Stat) ([]string, [][]string) {
	return []string{"FIELD", "VALUE"}, [][]string{
		{"czxid", fmt.Sprintf("0x%x", s.Czxid)}, {"mzxid", fmt.Sprintf("0x%x", s.Mzxid)},
		{"pzxid", fmt.Sprintf("0x%x", s.Pzxid)}, {"ctime", fmt.Sprint(s.Ctime)}, {"mtime", fmt.Sprint(s.Mtime)},
		{"version", fmt.Sprint(s.Version)}, {"cversion", fmt.Sprint(s.Cversion)}, {"aversion", fmt.Sprint(s.Aversion)},
		{"ephemeralOwner", fmt.Sprintf("0x%x", uint64(s.EphemeralOwner))}, {"dataLength", fmt.Sprint(s.DataLength)},
		{"numChildren", fmt.Sprint(s.NumChildren)},
	}
}

// progress reports how far a long operation is: a bar on a terminal,
// a plain line every few seconds otherwise (logs, CI), nothing with
// --output json on standard error either way (it goes to stderr). unit
// names what it counts (nodes, bytes, seconds).
type progress struct {
	bar   *progressbar.ProgressBar
	w     io.Writer
	what  string
	unit  string
	total int64
	n     int64
	last  time.Time
}

func (g *globals) progress(what, unit string, total int64) *progress {
	p := &progress{w: g.stderr, what: what, unit: unit, total: total, last: time.Now()}
	if f, ok := g.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString(unit),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	return p
}

// add records n more items done.
func (p *progress) add(n int) {
	p.n += int64(n)
	if p.bar != nil {
		p.bar.Add(n)
		return
	}
	if time.Since(p.last) >= 2*time.Second {
		p.last = time.Now()
		if p.total > 0 {
			fmt.Fprintf(p.w, "%s: %d/%d %s\n", p.what, p.n, p.total, p.unit)
		} else {
			fmt.Fprintf(p.w, "%s: %d %s\n", p.what, p.n, p.unit)
		}
	}
}

func (p *progress) done() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
