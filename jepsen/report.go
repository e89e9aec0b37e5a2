package jepsen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// writeReport writes the run's directory: params.json (the configuration
// and seed), verdicts.json, history.jsonl (every operation, in invocation
// order), report.html (the verdicts and a timeline) next to the servers'
// logs (s1.log, ..., or coord1.log, ... for the compose cluster's
// containers: logs lists them, once the history is written) and whatever
// the checkers wrote.
func writeReport(rep *Report, hist *History, logs func(dir string) []string) error {
	if err := writeJSON(filepath.Join(rep.Dir, "params.json"), rep.Config); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(rep.Dir, "verdicts.json"), rep); err != nil {
		return err
	}
	ops := sortedOps(hist)
	f, err := os.Create(filepath.Join(rep.Dir, "history.jsonl"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, op := range ops {
		enc.Encode(op)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(rep.Dir, "report.html"), []byte(reportHTML(rep, ops, logs(rep.Dir))), 0o644)
}

func reportHTML(rep *Report, ops []Op, logs []string) string {
	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, "<!doctype html><html><head><meta charset=utf-8><title>jepsen %s</title>", esc(filepath.Base(rep.Dir)))
	b.WriteString(`<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:left;vertical-align:top}.pass{color:#070}.fail{color:#b00}.unknown{color:#a60}pre{background:#f4f4f4;padding:6px}</style></head><body>`)
	fmt.Fprintf(&b, "<h1>coord jepsen run %s</h1>", esc(filepath.Base(rep.Dir)))
	cfg, _ := json.MarshalIndent(rep.Config, "", "  ")
	fmt.Fprintf(&b, "<p>Seed <b>%d</b>, %d voters + %d observers, %v of clients, took %s.</p><details><summary>parameters</summary><pre>%s</pre></details>",
		rep.Config.Seed, rep.Config.Voters, rep.Config.Observers, rep.Config.Duration, esc(rep.Elapsed), esc(string(cfg)))
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "<p class=unknown>%s</p>", esc(n))
	}
	b.WriteString("<h2>Verdicts</h2><table><tr><th>checker</th><th>result</th><th>summary</th><th>details</th></tr>")
	for _, v := range rep.Verdicts {
		var d strings.Builder
		for _, x := range v.Details {
			fmt.Fprintf(&d, "%s<br>", esc(x))
		}
		for _, f := range v.Files {
			fmt.Fprintf(&d, `<a href="%s">%s</a><br>`, esc(f), esc(f))
		}
		fmt.Fprintf(&b, "<tr><td>%s</td><td class=%s>%s</td><td>%s</td><td>%s</td></tr>", esc(v.Checker), v.Result, v.Result, esc(v.Summary), d.String())
	}
	b.WriteString("</table><h2>Timeline</h2>")
	b.WriteString(timelineSVG(rep, ops))
	b.WriteString("<h2>Faults</h2><table><tr><th>from</th><th>to</th><th>nemesis</th><th>what</th></tr>")
	for _, f := range rep.Faults {
		fmt.Fprintf(&b, "<tr><td>%.2fs</td><td>%.2fs</td><td>%s</td><td>%s %s</td></tr>", secs(f.Start), secs(f.End), esc(f.Nemesis), esc(f.Desc), esc(f.Err))
	}
	b.WriteString("</table><h2>Leader changes</h2><p>")
	for _, r := range rep.Roles {
		l := r.Leader
		if l == "" {
			l = "none"
		}
		fmt.Fprintf(&b, "%.2fs: %s; ", secs(r.At), esc(l))
	}
	b.WriteString(`</p><h2>Files</h2><p><a href="history.jsonl">history.jsonl</a> <a href="params.json">params.json</a> <a href="verdicts.json">verdicts.json</a> `)
	for _, l := range logs {
		fmt.Fprintf(&b, `<a href="%s">%s</a> `, esc(l), esc(l))
	}
	b.WriteString("</p></body></html>\n")
	return b.String()
}

func secs(ns int64) float64 { return time.Duration(ns).Seconds() }

// timelineSVG draws, per second, the operations completed (ok, fail and
// indeterminate stacked) and the p50 and max latency of ok ones, with the
// fault windows shaded and leader changes marked.
func timelineSVG(rep *Report, ops []Op) string {
	const W, H, left, top, plotH, gap = 960, 420, 60, 20, 150, 60
	var end int64
	for _, op := range ops {
		end = max(end, op.Complete)
	}
	for _, f := range rep.Faults {
		end = max(end, f.End)
	}
	nb := int(end/int64(time.Second)) + 1
	type bucket struct {
		ok, fail, info int
		lat            []float64
	}
	bs := make([]bucket, nb)
	for _, op := range ops {
		i := int(op.Complete / int64(time.Second))
		switch op.Outcome {
		case OK:
			bs[i].ok++
			bs[i].lat = append(bs[i].lat, float64(op.Latency())/float64(time.Millisecond))
		case Fail:
			bs[i].fail++
		default:
			bs[i].info++
		}
	}
	maxOps, maxLat := 1, 1.0
	for i := range bs {
		maxOps = max(maxOps, bs[i].ok+bs[i].fail+bs[i].info)
		sort.Float64s(bs[i].lat)
		if n := len(bs[i].lat); n > 0 {
			maxLat = max(maxLat, bs[i].lat[n-1])
		}
	}
	plotW := float64(W - left - 20)
	x := func(ns int64) float64 { return left + plotW*float64(ns)/float64(max(end, 1)) }
	bw := plotW / float64(nb)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-size="11">`, W, H)
	lat0 := top + plotH + gap
	for _, f := range rep.Faults {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#f6c8c8" opacity="0.6"><title>%s</title></rect>`,
			x(f.Start), top, max(x(f.End)-x(f.Start), 1), lat0+plotH-top, html.EscapeString(f.Desc))
	}
	for i, bk := range bs {
		y := float64(top + plotH)
		for _, part := range []struct {
			n     int
			color string
		}{{bk.ok, "#4a7"}, {bk.fail, "#e90"}, {bk.info, "#c33"}} {
			h := float64(plotH) * float64(part.n) / float64(maxOps)
			y -= h
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, left+float64(i)*bw, y, max(bw-1, 1), h, part.color)
		}
	}
	var p50, pmax strings.Builder
	for i, bk := range bs {
		n := len(bk.lat)
		if n == 0 {
			continue
		}
		cx := left + (float64(i)+0.5)*bw
		fmt.Fprintf(&p50, "%.1f,%.1f ", cx, float64(lat0+plotH)-float64(plotH)*bk.lat[n/2]/maxLat)
		fmt.Fprintf(&pmax, "%.1f,%.1f ", cx, float64(lat0+plotH)-float64(plotH)*bk.lat[n-1]/maxLat)
	}
	fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#36c"/><polyline points="%s" fill="none" stroke="#c3c"/>`, p50.String(), pmax.String())
	for _, r := range rep.Roles {
		l := r.Leader
		if l == "" {
			l = "no leader"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#000" stroke-dasharray="3,3"/><text x="%.1f" y="%d">%s</text>`,
			x(r.At), x(r.At), top, lat0+plotH, x(r.At)+2, lat0-8, html.EscapeString(l))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>`,
		left, top+plotH, W-20, top+plotH, left, lat0+plotH, W-20, lat0+plotH)
	fmt.Fprintf(&b, `<text x="4" y="%d">%d ops/s</text><text x="4" y="%d">0</text>`, top+10, maxOps, top+plotH)
	fmt.Fprintf(&b, `<text x="4" y="%d">%.0f ms</text><text x="4" y="%d">0</text>`, lat0+10, maxLat, lat0+plotH)
	for s := 0; s < nb; s += max(1, nb/10) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%ds</text>`, left+float64(s)*bw, lat0+plotH+14, s)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">operations per second: ok (green), failed (orange), indeterminate (red); faults shaded; dashed: leader changes</text>`, left, top+plotH+16)
	fmt.Fprintf(&b, `<text x="%d" y="%d">latency of ok operations: p50 (blue), max (magenta)</text>`, left, H-4)
	b.WriteString("</svg>")
	return b.String()
}
