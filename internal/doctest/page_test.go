package doctest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// stepKind is what the runner does with a step.
type stepKind int

const (
	stepRun        stepKind = iota // run; the exit code (and the output, if given) must match
	stepServer                     // start in the background; later steps wait for its health
	stepAssign                     // shell variable assignments kept for later steps
	stepTranscript                 // a "$ " command with the output the page shows
	stepStop                       // stop the servers started so far (the reader's Ctrl-C)
	stepWait                       // wait for the servers started so far (the page's end)
)

// step is one command of a page.
type step struct {
	kind   stepKind
	line   int      // the page's line of the command
	cmd    string   // the command, after the rewrites
	want   []string // stepTranscript: the output lines the page shows
	exit   int      // stepTranscript: the exit code the page shows
	hidden bool     // from a "<!-- doc:" block the reader does not see
	noWait bool     // stepServer: ended with "&": not waited for (it is not healthy yet)

	printed *printed // a transcript step's output, where it differed from want
}

// printed is what a command printed and its exit code.
type printed struct {
	lines []string
	exit  int
}

// page is what parse found in one markdown page.
type page struct {
	steps   []step
	skipped []string // "line N: reason" of each block skipped
	// docker: "<!-- doc: docker -->": the page runs Docker containers. It
	// runs in a copy of this checkout, in the machine's own network (the
	// containers publish their ports there), and only where Docker answers.
	docker bool
}

var (
	fenceRe   = regexp.MustCompile("^\\s*```\\s*([A-Za-z0-9_-]*)")
	skipRe    = regexp.MustCompile(`^<!--\s*doc:\s*skip\b\s*(.*?)\s*-->\s*$`)
	hiddenRe  = regexp.MustCompile(`^<!--\s*doc:\s*$`)
	stopRe    = regexp.MustCompile(`^<!--\s*doc:\s*stop\s*-->$`)
	dockerRe  = regexp.MustCompile(`^<!--\s*doc:\s*docker\s*-->$`)
	exitRe    = regexp.MustCompile(`^\[exit (\d+)\]$`)
	assignRe  = regexp.MustCompile(`^(export\s+)?[A-Za-z_][A-Za-z0-9_]*=('[^']*'|"[^"]*"|[^\s;&|]*)(\s+[A-Za-z_][A-Za-z0-9_]*=('[^']*'|"[^"]*"|[^\s;&|]*))*\s*(#.*)?$`)
	goRunRe   = regexp.MustCompile(`\bgo run \./cmd/([a-z]+)\b`)
	goBuildRe = regexp.MustCompile(`^go build -o (\S+) \./cmd/([a-z]+)\s*(#.*)?$`)
)

// parse reads a page's blocks into steps.
func parse(md string) (page, error) {
	var p page
	lines := strings.Split(md, "\n")
	skipNext := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := skipRe.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			skipNext = m[1]
			if skipNext == "" {
				return p, fmt.Errorf("line %d: doc: skip needs a reason", i+1)
			}
			continue
		}
		if dockerRe.MatchString(strings.TrimSpace(l)) {
			p.docker = true
			continue
		}
		if stopRe.MatchString(strings.TrimSpace(l)) {
			p.steps = append(p.steps, step{kind: stepStop, line: i + 1, cmd: "(stop the servers)"})
			continue
		}
		if hiddenRe.MatchString(strings.TrimSpace(l)) {
			start := i + 1
			var body []string
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "-->"; i++ {
				body = append(body, lines[i])
			}
			if i == len(lines) {
				return p, fmt.Errorf("line %d: <!-- doc: without -->", start)
			}
			if err := p.addBlock(body, start+1, "sh", true); err != nil {
				return p, err
			}
			continue
		}
		m := fenceRe.FindStringSubmatch(l)
		if m == nil {
			if strings.TrimSpace(l) != "" {
				skipNext = ""
			}
			continue
		}
		start := i + 1
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			return p, fmt.Errorf("line %d: fence not closed", start)
		}
		if skipNext != "" {
			p.skipped = append(p.skipped, fmt.Sprintf("line %d: %s", start, skipNext))
			skipNext = ""
			continue
		}
		if err := p.addBlock(body, start+1, m[1], false); err != nil {
			return p, err
		}
	}
	p.steps = append(p.steps, step{kind: stepWait, line: len(lines), cmd: "(wait for the servers)"})
	return p, nil
}

// addBlock adds a fenced (or hidden) block's steps; first is the page line
// of its first body line.
func (p *page) addBlock(body []string, first int, info string, hidden bool) error {
	transcript := false
	for _, l := range body {
		if strings.HasPrefix(l, "$ ") {
			transcript = true
		}
	}
	if transcript {
		return p.addTranscript(body, first, hidden)
	}
	switch info {
	case "sh", "bash", "shell":
	default:
		return nil // JSON, Go, a sample of output: nothing to run
	}
	for i := 0; i < len(body); i++ {
		line := first + i
		cmd := strings.TrimSpace(body[i])
		for strings.HasSuffix(cmd, "\\") && i+1 < len(body) {
			i++
			cmd = strings.TrimSuffix(cmd, "\\") + " " + strings.TrimSpace(body[i])
		}
		if cmd == "" || strings.HasPrefix(cmd, "#") {
			continue
		}
		s, ok := classify(cmd)
		if !ok {
			continue
		}
		s.line, s.hidden = line, hidden
		p.steps = append(p.steps, s)
	}
	return nil
}

// addTranscript adds a block of "$ " commands with their outputs.
func (p *page) addTranscript(body []string, first int, hidden bool) error {
	var cur *step
	flush := func() {
		if cur == nil {
			return
		}
		if n := len(cur.want); n > 0 {
			if m := exitRe.FindStringSubmatch(cur.want[n-1]); m != nil {
				cur.exit, _ = strconv.Atoi(m[1])
				cur.want = cur.want[:n-1]
			}
		}
		p.steps = append(p.steps, *cur)
		cur = nil
	}
	for i, l := range body {
		if !strings.HasPrefix(l, "$ ") {
			if cur == nil {
				if strings.TrimSpace(l) == "" {
					continue
				}
				return fmt.Errorf("line %d: output before the first $ command", first+i)
			}
			cur.want = append(cur.want, l)
			continue
		}
		flush()
		s, ok := classify(strings.TrimSpace(strings.TrimPrefix(l, "$ ")))
		if !ok {
			return fmt.Errorf("line %d: a transcript command that cannot run here: %s", first+i, l)
		}
		if s.kind != stepRun {
			return fmt.Errorf("line %d: a server or an assignment in a transcript: %s", first+i, l)
		}
		s.kind, s.line, s.hidden = stepTranscript, first+i, hidden
		cur = &s
	}
	flush()
	return nil
}

// classify rewrites one command line and says how it runs; false: it does
// not run here (go test: this test).
func classify(cmd string) (step, bool) {
	if strings.HasPrefix(cmd, "go test") {
		return step{}, false
	}
	if m := goBuildRe.FindStringSubmatch(cmd); m != nil {
		return step{kind: stepRun, cmd: fmt.Sprintf(`cp "$DOCBIN/%s" %s`, m[2], m[1])}, true
	}
	cmd = goRunRe.ReplaceAllString(cmd, "$1")
	if assignRe.MatchString(cmd) {
		return step{kind: stepAssign, cmd: cmd}, true
	}
	if isServer(cmd) {
		bare := stripComment(cmd)
		if b, ok := strings.CutSuffix(bare, "&"); ok && !strings.HasSuffix(b, "&") {
			return step{kind: stepServer, cmd: strings.TrimSpace(b), noWait: true}, true
		}
		return step{kind: stepServer, cmd: cmd}, true
	}
	return step{kind: stepRun, cmd: cmd}, true
}

// isServer says whether a command starts coord servers: coord (or ./coord)
// with no command word, or coord local.
func isServer(cmd string) bool {
	f := strings.Fields(stripComment(cmd))
	for len(f) > 0 && assignRe.MatchString(f[0]) { // VAR=value coord ...
		f = f[1:]
	}
	if len(f) == 0 || (f[0] != "coord" && f[0] != "./coord") {
		return false
	}
	return len(f) == 1 || strings.HasPrefix(f[1], "-") || f[1] == "local"
}

// stripComment drops a trailing "# ..." that is outside quotes.
func stripComment(cmd string) string {
	var q rune
	for i, r := range cmd {
		switch {
		case q != 0:
			if r == q {
				q = 0
			}
		case r == '\'' || r == '"':
			q = r
		case r == '#' && (i == 0 || cmd[i-1] == ' '):
			return strings.TrimSpace(cmd[:i])
		}
	}
	return cmd
}

// serverHealth is the HTTP addresses of the servers a server command starts,
// read from its flags as coord reads them.
func serverHealth(cmd string) []string {
	f := strings.Fields(stripComment(cmd))
	flag := func(name, def string) string {
		for i, a := range f {
			if (a == "-"+name || a == "--"+name) && i+1 < len(f) {
				return strings.Trim(f[i+1], `"'`)
			}
			if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
				return strings.Trim(v, `"'`)
			}
		}
		return def
	}
	local := false
	for _, a := range f {
		if a == "local" {
			local = true
		}
	}
	if !local {
		return []string{flag("http-addr", "127.0.0.1:8080")}
	}
	base, _ := strconv.Atoi(flag("base-port", "2880"))
	voters, _ := strconv.Atoi(flag("voters", "3"))
	observers, _ := strconv.Atoi(flag("observers", "1"))
	var addrs []string
	for i := 1; i <= voters+observers; i++ {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", base+300+i))
	}
	return addrs
}

var normalizers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d [A-Z]{2,5} \d{4}\b`), "<date>"},
	{regexp.MustCompile(`\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?`), "<time>"},
	{regexp.MustCompile(`\b[0-9a-f]{64}\b`), "<sha256>"},
	{regexp.MustCompile(`\b0x[0-9a-fA-F]{6,}\b`), "0x<hex>"},
	{regexp.MustCompile(`\b\d{10,}\b`), "<n>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|us|ms|s|m|h)\b`), "<dur>"},
	{regexp.MustCompile(`\b\d+(\.\d+)? ?(kB|KB|MB|GB|KiB|MiB|GiB)\b`), "<size>"},
	// a snapshot's bytes: whether a session was still open when it was taken
	// changes it by a few dozen
	{regexp.MustCompile(`\b\d+ bytes\b`), "<n> bytes"},
	{regexp.MustCompile(`\s+`), " "},
}

// normalize makes a line of output comparable across runs.
func normalize(l string) string {
	l = strings.TrimSpace(l)
	for _, n := range normalizers {
		l = n.re.ReplaceAllString(l, n.with)
	}
	return l
}

// lineMatches compares one output line with the page's line, in which "..."
// matches any text.
func lineMatches(want, got string) bool {
	w, g := normalize(want), normalize(got)
	if !strings.Contains(w, "...") {
		return w == g
	}
	// "..." may stand in for part of a value that normalizing replaces
	// whole (sha256:319d7a1d...3b59): then it matches the line as printed.
	re := func(w string) *regexp.Regexp {
		parts := strings.Split(w, "...")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
	}
	blanks := regexp.MustCompile(`\s+`)
	return re(w).MatchString(g) || re(blanks.ReplaceAllString(strings.TrimSpace(want), " ")).MatchString(blanks.ReplaceAllString(strings.TrimSpace(got), " "))
}

// outputMatches compares an output with the page's lines; a page line that
// is only "..." matches any number of lines.
func outputMatches(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for k := 0; k <= len(got); k++ {
			if outputMatches(want[1:], got[k:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && lineMatches(want[0], got[0]) && outputMatches(want[1:], got[1:])
}

// splitOutput is an output's lines without the final newline's empty one.
func splitOutput(out string) []string {
	out = strings.TrimRight(strings.ReplaceAll(out, "\r\n", "\n"), "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}
