package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"coord/fsm"
	"coord/server/sessions"
	"coord/vocab"
)

// The tree's calls. Each is requests on the sign-in's session, so the
// session layer's ACL checks decide what each answers, as they do on the
// ZooKeeper port.

// callTimeout bounds one console call's wait for its session.
const callTimeout = 30 * time.Second

type statJSON struct {
	Czxid          string `json:"czxid"`
	Mzxid          string `json:"mzxid"`
	Pzxid          string `json:"pzxid"`
	Ctime          int64  `json:"ctime"`
	Mtime          int64  `json:"mtime"`
	Version        int32  `json:"version"`
	Cversion       int32  `json:"cversion"`
	Aversion       int32  `json:"aversion"`
	EphemeralOwner string `json:"ephemeralOwner"`
	DataLength     int32  `json:"dataLength"`
	NumChildren    int32  `json:"numChildren"`
}

func statOut(s vocab.Stat) statJSON {
	return statJSON{Czxid: hexID(s.Czxid), Mzxid: hexID(s.Mzxid), Pzxid: hexID(s.Pzxid), Ctime: s.Ctime, Mtime: s.Mtime,
		Version: s.Version, Cversion: s.Cversion, Aversion: s.Aversion, EphemeralOwner: hexID(s.EphemeralOwner),
		DataLength: s.DataLength, NumChildren: s.NumChildren}
}

// checkPath refuses what is not a znode path before it reaches a session
// (which would refuse it too, with less to say).
func checkPath(p string) error {
	if err := fsm.ValidatePath(p); err != nil {
		return errorf(http.StatusBadRequest, "BadArguments", fmt.Sprintf("path %q: %v", p, err))
	}
	return nil
}

func (si *signIn) do(r *http.Request, req *sessions.Request) (*sessions.Reply, error) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	l, err := si.conn(ctx)
	if err != nil {
		return nil, err
	}
	return l.call(ctx, req)
}

func (si *signIn) doAll(ctx context.Context, reqs []*sessions.Request) ([]*sessions.Reply, error) {
	l, err := si.conn(ctx)
	if err != nil {
		return nil, err
	}
	return l.calls(ctx, reqs)
}

type childJSON struct {
	Name        string `json:"name"`
	NumChildren int32  `json:"numChildren"`
	DataLength  int32  `json:"dataLength"`
	Ephemeral   bool   `json:"ephemeral"`
}

// children lists a page of a node's children, by name, each with its
// child count (an exists per child, all sent before the first answer is
// awaited).
func (c *Console) children(si *signIn, r *http.Request) (any, error) {
	q := r.URL.Query()
	p := q.Get("path")
	if err := checkPath(p); err != nil {
		return nil, err
	}
	offset, _ := strconv.Atoi(q.Get("offset"))
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 200
	}
	offset = max(offset, 0)
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	rs, err := si.doAll(ctx, []*sessions.Request{{Kind: sessions.OpGetChildren, Path: p, Watch: q.Get("watch") == "1"}})
	if err != nil {
		return nil, err
	}
	if rs[0].Err != vocab.OK {
		return nil, codeError(rs[0].Err, p)
	}
	names := slices.Clone(rs[0].Children)
	slices.Sort(names)
	total := len(names)
	names = names[min(offset, total):min(offset+limit, total)]
	reqs := make([]*sessions.Request, len(names))
	for i, n := range names {
		reqs[i] = &sessions.Request{Kind: sessions.OpExists, Path: join(p, n)}
	}
	stats, err := si.doAll(ctx, reqs)
	if err != nil {
		return nil, err
	}
	out := make([]childJSON, 0, len(names))
	for i, n := range names {
		ch := childJSON{Name: n}
		if stats[i].Err == vocab.OK {
			st := stats[i].Stat
			ch.NumChildren, ch.DataLength, ch.Ephemeral = st.NumChildren, st.DataLength, st.EphemeralOwner != 0
		}
		out = append(out, ch)
	}
	return map[string]any{"path": p, "total": total, "offset": offset, "children": out}, nil
}

func join(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}

// node is one node: its data and kind (getData), Stat, and ACL (getACL).
// Data this identity may not read is left out, and so is an ACL it may not
// read; the Stat then comes from exists, which needs no permission.
func (c *Console) node(si *signIn, r *http.Request) (any, error) {
	q := r.URL.Query()
	p := q.Get("path")
	if err := checkPath(p); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	watch := q.Get("watch") == "1"
	rs, err := si.doAll(ctx, []*sessions.Request{
		{Kind: sessions.OpGetData, Path: p, Watch: watch},
		{Kind: sessions.OpGetACL, Path: p},
		{Kind: sessions.OpExists, Path: p, Watch: watch},
	})
	if err != nil {
		return nil, err
	}
	data, acl, ex := rs[0], rs[1], rs[2]
	if ex.Err != vocab.OK {
		return nil, codeError(ex.Err, p)
	}
	out := map[string]any{"path": p, "stat": statOut(ex.Stat), "readable": data.Err == vocab.OK}
	owner := ex.Stat.EphemeralOwner
	if data.Err == vocab.OK {
		out["data"] = data.Data // nil is JSON null: null data
		out["stat"] = statOut(data.Stat)
		if data.Owner != 0 {
			owner = data.Owner
		}
	} else {
		out["error"] = "not allowed to read this node's data (" + data.Err.String() + ")"
	}
	if acl.Err == vocab.OK {
		out["acl"] = vocab.ACLsText(acl.ACL)
	} else {
		out["acl"] = nil
		out["aclError"] = codeName(acl.Err)
	}
	mode, ttl, ok := vocab.NodeKind(owner)
	switch {
	case !ok:
		out["kind"] = "ephemeral"
	case mode == "persistent_ttl":
		out["kind"], out["ttl_ms"] = "ttl", ttl
	default:
		out["kind"] = mode
	}
	return out, nil
}

var createModes = map[string]vocab.CreateMode{
	"persistent": vocab.ModePersistent, "ephemeral": vocab.ModeEphemeral,
	"persistent_sequential": vocab.ModePersistentSequential, "ephemeral_sequential": vocab.ModeEphemeralSequential,
	"container": vocab.ModeContainer, "persistent_ttl": vocab.ModePersistentTTL,
	"persistent_sequential_ttl": vocab.ModePersistentSequentialTTL,
}

func (c *Console) create(si *signIn, r *http.Request) (any, error) {
	var req struct {
		Path  string          `json:"path"`
		Data  []byte          `json:"data"`
		Mode  string          `json:"mode"`
		TTLms int64           `json:"ttl_ms"`
		ACL   []vocab.ACLText `json:"acl"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	if err := checkPath(req.Path); err != nil {
		return nil, err
	}
	mode, ok := createModes[orDefault(req.Mode, "persistent")]
	if !ok {
		return nil, errorf(http.StatusBadRequest, "BadArguments", "unknown mode "+strconv.Quote(req.Mode))
	}
	acl := vocab.OpenACLUnsafe
	if req.ACL != nil {
		var err error
		if acl, err = vocab.ACLsFromText(req.ACL); err != nil {
			return nil, errorf(http.StatusBadRequest, "InvalidACL", err.Error())
		}
	}
	res, err := si.do(r, &sessions.Request{Kind: sessions.OpCreate, Write: fsm.Op{Type: fsm.CmdCreate, Path: req.Path,
		Data: req.Data, ACL: acl, Mode: mode, TTL: req.TTLms}})
	if err == nil && res.Err != vocab.OK {
		err = codeError(res.Err, orDefault(res.ErrPath, req.Path))
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": res.Path, "stat": statOut(res.Stat)}, nil
}

// orDefault is s, or dflt when s is empty.
func orDefault(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// set writes a node's data at the version the page read: a change by
// anyone since answers BadVersion, never overwrites.
func (c *Console) set(si *signIn, r *http.Request) (any, error) {
	var req struct {
		Path    string `json:"path"`
		Data    []byte `json:"data"`
		Version *int32 `json:"version"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	if err := checkPath(req.Path); err != nil {
		return nil, err
	}
	if req.Version == nil {
		return nil, errorf(http.StatusBadRequest, "BadArguments", "set needs the version the data was read at")
	}
	res, err := si.do(r, &sessions.Request{Kind: sessions.OpSetData, Write: fsm.Op{Type: fsm.CmdSetData, Path: req.Path,
		Data: req.Data, Version: *req.Version}})
	if err == nil && res.Err != vocab.OK {
		err = codeError(res.Err, req.Path)
		if res.Err == vocab.BadVersion {
			err = errorf(http.StatusConflict, "BadVersion", req.Path+" was changed by someone else since you read it (version "+
				strconv.Itoa(int(*req.Version))+" is no longer its version); reload to see the change")
		}
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"stat": statOut(res.Stat)}, nil
}

func (c *Console) setACL(si *signIn, r *http.Request) (any, error) {
	var req struct {
		Path     string          `json:"path"`
		ACL      []vocab.ACLText `json:"acl"`
		Aversion *int32          `json:"aversion"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	if err := checkPath(req.Path); err != nil {
		return nil, err
	}
	acl, err := vocab.ACLsFromText(req.ACL)
	if err != nil || req.Aversion == nil {
		return nil, errorf(http.StatusBadRequest, "BadArguments", "setacl needs an ACL (letters of cdrwa) and the aversion it was read at")
	}
	res, err := si.do(r, &sessions.Request{Kind: sessions.OpSetACL, Write: fsm.Op{Type: fsm.CmdSetACL, Path: req.Path,
		ACL: acl, Version: *req.Aversion}})
	if err == nil && res.Err != vocab.OK {
		err = codeError(res.Err, req.Path)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"stat": statOut(res.Stat)}, nil
}

// walked is one node of a subtree walk.
type walked struct {
	path  string
	stat  vocab.Stat
	kind  int64 // getData's kind owner (containers, TTL nodes), or the ephemeral owner
	data  []byte
	acl   []vocab.ACL
	depth int
}

// walkLimit bounds the nodes one console call walks.
const walkLimit = 100000

// walk reads the subtree under root, parents first, at most limit nodes
// (truncated says it stopped there). full also reads each node's data and
// ACL. A child this identity may not list is counted but not entered.
func (si *signIn) walk(ctx context.Context, root string, limit int, full bool) (nodes []walked, truncated bool, err error) {
	first, err := si.doAll(ctx, []*sessions.Request{{Kind: sessions.OpExists, Path: root}})
	if err != nil {
		return nil, false, err
	}
	if first[0].Err != vocab.OK {
		return nil, false, codeError(first[0].Err, root)
	}
	nodes = []walked{{path: root, stat: first[0].Stat, kind: first[0].Stat.EphemeralOwner}}
	for i := 0; i < len(nodes); i++ {
		if full {
			rs, err := si.doAll(ctx, []*sessions.Request{{Kind: sessions.OpGetData, Path: nodes[i].path}, {Kind: sessions.OpGetACL, Path: nodes[i].path}})
			if err != nil {
				return nil, false, err
			}
			if rs[0].Err != vocab.OK {
				return nil, false, codeError(rs[0].Err, nodes[i].path)
			}
			if rs[1].Err != vocab.OK {
				return nil, false, codeError(rs[1].Err, nodes[i].path)
			}
			nodes[i].data, nodes[i].stat, nodes[i].acl = rs[0].Data, rs[0].Stat, rs[1].ACL
			if rs[0].Owner != 0 {
				nodes[i].kind = rs[0].Owner
			}
		}
		if nodes[i].stat.NumChildren == 0 {
			continue
		}
		rs, err := si.doAll(ctx, []*sessions.Request{{Kind: sessions.OpGetChildren, Path: nodes[i].path}})
		if err != nil {
			return nil, false, err
		}
		if rs[0].Err == vocab.NoNode {
			continue
		}
		if rs[0].Err != vocab.OK {
			if full {
				return nil, false, codeError(rs[0].Err, nodes[i].path)
			}
			continue
		}
		names := slices.Clone(rs[0].Children)
		slices.Sort(names)
		reqs := make([]*sessions.Request, 0, len(names))
		for _, n := range names {
			if nodes[i].path == "/" && n == "zookeeper" {
				continue // ZooKeeper's own subtree is nobody's to copy or delete
			}
			reqs = append(reqs, &sessions.Request{Kind: sessions.OpExists, Path: join(nodes[i].path, n)})
		}
		if len(nodes)+len(reqs) > limit {
			reqs = reqs[:max(0, limit-len(nodes))]
			truncated = true
		}
		stats, err := si.doAll(ctx, reqs)
		if err != nil {
			return nil, false, err
		}
		for j, st := range stats {
			if st.Err == vocab.OK {
				nodes = append(nodes, walked{path: reqs[j].Path, stat: st.Stat, kind: st.Stat.EphemeralOwner, depth: nodes[i].depth + 1})
			}
		}
		if truncated {
			break
		}
	}
	return nodes, truncated, nil
}

// subtree is walk for a call that needs the whole subtree: one of more
// than limit nodes is TooLarge, saying what to use instead.
func (si *signIn) subtree(ctx context.Context, root string, limit int, full bool, instead string) ([]walked, error) {
	nodes, truncated, err := si.walk(ctx, root, limit, full)
	if err == nil && truncated {
		err = errorf(http.StatusRequestEntityTooLarge, "TooLarge", fmt.Sprintf("%s holds more than %d nodes; %s", root, limit, instead))
	}
	return nodes, err
}

func (c *Console) count(si *signIn, r *http.Request) (any, error) {
	p := r.URL.Query().Get("path")
	if err := checkPath(p); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	nodes, truncated, err := si.walk(ctx, p, walkLimit, false)
	if err != nil {
		return nil, err
	}
	eph := 0
	for _, n := range nodes {
		if n.stat.EphemeralOwner != 0 {
			eph++
		}
	}
	return map[string]any{"count": len(nodes), "ephemerals": eph, "truncated": truncated}, nil
}

// multiBatch is the most ops one multi of a console call carries.
const multiBatch = 1000

// delete deletes a node (at the version the page read) or a subtree whose
// size the person confirmed: children first, in multis of at most
// multiBatch deletes (one atomic multi for a subtree that fits). A subtree
// that is no longer the size confirmed is not touched: the page asks
// again.
func (c *Console) delete(si *signIn, r *http.Request) (any, error) {
	var req struct {
		Path      string `json:"path"`
		Version   *int32 `json:"version"`
		Recursive bool   `json:"recursive"`
		Count     int    `json:"count"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	if err := checkPath(req.Path); err != nil {
		return nil, err
	}
	if req.Path == "/" || req.Path == "/zookeeper" || strings.HasPrefix(req.Path, "/zookeeper/") {
		return nil, errorf(http.StatusBadRequest, "BadArguments", req.Path+" cannot be deleted")
	}
	if !req.Recursive {
		v := int32(-1)
		if req.Version != nil {
			v = *req.Version
		}
		res, err := si.do(r, &sessions.Request{Kind: sessions.OpDelete, Write: fsm.Op{Type: fsm.CmdDelete, Path: req.Path, Version: v}})
		if err == nil && res.Err != vocab.OK {
			err = codeError(res.Err, req.Path)
		}
		if err != nil {
			return nil, err
		}
		return map[string]any{"deleted": 1}, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*callTimeout)
	defer cancel()
	nodes, err := si.subtree(ctx, req.Path, walkLimit, false, "delete it with coordctl")
	if err != nil {
		return nil, err
	}
	if len(nodes) != req.Count {
		return nil, errorf(http.StatusConflict, "Changed", fmt.Sprintf("%s now holds %d nodes, not the %d you confirmed; confirm again", req.Path, len(nodes), req.Count))
	}
	// Deepest first, so every node's children go before it.
	slices.SortStableFunc(nodes, func(a, b walked) int { return b.depth - a.depth })
	deleted := 0
	for len(nodes) > 0 {
		n := min(len(nodes), multiBatch)
		ops := make([]fsm.Op, n)
		for i, nd := range nodes[:n] {
			ops[i] = fsm.Op{Type: fsm.CmdDelete, Path: nd.path, Version: -1}
		}
		if err := si.multi(ctx, ops); err != nil {
			if deleted > 0 {
				err = errorf(http.StatusConflict, "Changed", fmt.Sprintf("deleted %d of %d nodes, then: %v", deleted, req.Count, err))
			}
			return nil, err
		}
		deleted += n
		nodes = nodes[n:]
	}
	return map[string]any{"deleted": deleted}, nil
}

// multi runs ops as one multi; a failed op fails it with that op's code
// and path.
func (si *signIn) multi(ctx context.Context, ops []fsm.Op) error {
	rs, err := si.doAll(ctx, []*sessions.Request{{Kind: sessions.OpMulti, Writes: ops}})
	if err != nil {
		return err
	}
	res := rs[0]
	if res.Err != vocab.OK && len(res.Multi) == 0 {
		return codeError(res.Err, "")
	}
	for i, m := range res.Multi {
		if m.Code != vocab.OK && m.Code != vocab.RuntimeInconsistency {
			return codeError(m.Code, ops[i].Path)
		}
	}
	if res.Err != vocab.OK {
		return codeError(res.Err, "")
	}
	return nil
}

// maxCopyBytes bounds what one copy or move carries in its one multi
// (ZooKeeper's jute.maxbuffer is 1 MiB).
const maxCopyBytes = 900 << 10

// copy copies (or, with move, renames) a subtree in one multi: the copy is
// of the subtree as it was at one moment (each source is checked at the
// version read, so a concurrent change fails the whole multi), and a move
// deletes the source in the same multi.
func (c *Console) copy(si *signIn, r *http.Request) (any, error) {
	var req struct {
		From string `json:"from"`
		To   string `json:"to"`
		Move bool   `json:"move"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	for _, p := range []string{req.From, req.To} {
		if err := checkPath(p); err != nil {
			return nil, err
		}
	}
	if req.From == "/" || req.From == "/zookeeper" || strings.HasPrefix(req.From, "/zookeeper/") {
		return nil, errorf(http.StatusBadRequest, "BadArguments", req.From+" cannot be copied or moved")
	}
	if req.To == req.From || strings.HasPrefix(req.To, req.From+"/") {
		return nil, errorf(http.StatusBadRequest, "BadArguments", "cannot copy or move "+req.From+" into itself")
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*callTimeout)
	defer cancel()
	nodes, err := si.subtree(ctx, req.From, multiBatch, true, "more than one multi: use coordctl export and import")
	if err != nil {
		return nil, err
	}
	var ops []fsm.Op
	size, created := 0, 0
	for _, n := range nodes {
		mode, ttl, ok := vocab.NodeKind(n.kind)
		if !ok {
			if req.Move {
				return nil, errorf(http.StatusConflict, "Ephemeral", n.path+" is an ephemeral node of a live session; a subtree holding one cannot be moved")
			}
			continue // a copy leaves ephemerals out, as an export does
		}
		cm := vocab.ModePersistent
		switch mode {
		case "container":
			cm = vocab.ModeContainer
		case "persistent_ttl":
			cm = vocab.ModePersistentTTL
		}
		size += len(n.data) + len(n.path) + 64
		created++
		ops = append(ops, fsm.Op{Type: fsm.CmdCheck, Path: n.path, Version: n.stat.Version},
			fsm.Op{Type: fsm.CmdCreate, Path: vocab.JoinRel(req.To, vocab.RelPath(req.From, n.path)), Data: n.data, ACL: n.acl, Mode: cm, TTL: ttl})
	}
	if size > maxCopyBytes {
		return nil, errorf(http.StatusRequestEntityTooLarge, "TooLarge", fmt.Sprintf("%s holds %d bytes, more than one multi carries; use coordctl export and import", req.From, size))
	}
	if req.Move {
		for i := len(nodes) - 1; i >= 0; i-- {
			ops = append(ops, fsm.Op{Type: fsm.CmdDelete, Path: nodes[i].path, Version: nodes[i].stat.Version})
		}
	}
	if err := si.multi(ctx, ops); err != nil {
		return nil, err
	}
	return map[string]any{"copied": created}, nil
}

// export is the subtree in coordctl's export format (ephemerals and, from
// /, ZooKeeper's own subtree left out).
func (c *Console) export(si *signIn, w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if err := checkPath(p); err != nil {
		reply(w, nil, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*callTimeout)
	defer cancel()
	nodes, err := si.subtree(ctx, p, walkLimit, true, "export it with coordctl")
	if err != nil {
		reply(w, nil, err)
		return
	}
	f := vocab.ExportFile{Format: vocab.ExportFormat, Root: p}
	for _, n := range nodes {
		mode, ttl, ok := vocab.NodeKind(n.kind)
		if !ok {
			continue
		}
		f.Nodes = append(f.Nodes, vocab.ExportNode{Path: vocab.RelPath(p, n.path), Data: n.data, ACL: vocab.ACLsText(n.acl), Mode: mode, TTLms: ttl})
	}
	f.Digest = vocab.ExportDigest(f.Nodes)
	name := strings.ReplaceAll(strings.Trim(p, "/"), "/", "_")
	if name == "" {
		name = "root"
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.json"`)
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.Encode(f)
}

// importTree creates an export file's nodes under to, parents first, in
// multis of at most multiBatch creates; an existing node stops it.
func (c *Console) importTree(si *signIn, r *http.Request) (any, error) {
	to := r.URL.Query().Get("to")
	if err := checkPath(to); err != nil {
		return nil, err
	}
	var f vocab.ExportFile
	if err := readJSON(r, &f); err != nil {
		return nil, err
	}
	if f.Format != vocab.ExportFormat {
		return nil, errorf(http.StatusBadRequest, "BadArguments", fmt.Sprintf("not an export file (format %q, want %q)", f.Format, vocab.ExportFormat))
	}
	if d := vocab.ExportDigest(f.Nodes); f.Digest != "" && d != f.Digest {
		return nil, errorf(http.StatusBadRequest, "BadArguments", "the file's digest does not match its nodes: it was changed or cut short")
	}
	var ops []fsm.Op
	for _, n := range f.Nodes {
		acl, err := vocab.ACLsFromText(n.ACL)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "InvalidACL", n.Path+": "+err.Error())
		}
		mode := vocab.ModePersistent
		switch n.Mode {
		case "container":
			mode = vocab.ModeContainer
		case "persistent_ttl":
			mode = vocab.ModePersistentTTL
		case "persistent":
		default:
			return nil, errorf(http.StatusBadRequest, "BadArguments", n.Path+": unknown mode "+strconv.Quote(n.Mode))
		}
		p := vocab.JoinRel(to, n.Path)
		if n.Path == "" && p != "/" {
			// The root exists already when importing into a node that is there.
			if rs, err := si.do(r, &sessions.Request{Kind: sessions.OpExists, Path: p}); err == nil && rs.Err == vocab.OK {
				continue
			}
		}
		if p == "/" {
			continue
		}
		ops = append(ops, fsm.Op{Type: fsm.CmdCreate, Path: p, Data: n.Data, ACL: acl, Mode: mode, TTL: n.TTLms})
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*callTimeout)
	defer cancel()
	created := 0
	for len(ops) > 0 {
		n, size := 0, 0
		for n < len(ops) && n < multiBatch && size < maxCopyBytes {
			size += len(ops[n].Data) + len(ops[n].Path) + 64
			n++
		}
		if err := si.multi(ctx, ops[:n]); err != nil {
			if created > 0 {
				err = errorf(http.StatusConflict, "Changed", fmt.Sprintf("created %d nodes, then: %v", created, err))
			}
			return nil, err
		}
		created += n
		ops = ops[n:]
	}
	return map[string]any{"created": created}, nil
}

// search walks the tree from root (at most searchVisit nodes) for paths
// that start with q (prefix) or hold it (substring).
func (c *Console) search(si *signIn, r *http.Request) (any, error) {
	q := r.URL.Query()
	text, root := q.Get("q"), orDefault(q.Get("root"), "/")
	if err := checkPath(root); err != nil {
		return nil, err
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	substring := q.Get("mode") == "substring"
	if !substring && strings.HasPrefix(text, "/") {
		// A prefix search starts at the deepest node the prefix names.
		if i := strings.LastIndexByte(text, '/'); i > 0 && checkPath(text[:i]) == nil && strings.HasPrefix(text[:i], strings.TrimSuffix(root, "/")) {
			root = text[:i]
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	nodes, truncated, err := si.walk(ctx, root, searchVisit, false)
	if err != nil {
		return nil, err
	}
	if root == "/" && !truncated {
		// The walk leaves ZooKeeper's own subtree out (it is nobody's to
		// copy or delete); the tree shows it, so a search finds it too.
		zk, more, err := si.walk(ctx, "/zookeeper", searchVisit-len(nodes), false)
		if err != nil {
			return nil, err
		}
		nodes, truncated = append(nodes, zk...), more
	}
	results := []string{}
	for _, n := range nodes {
		match := strings.Contains(n.path, text)
		if !substring {
			match = strings.HasPrefix(n.path, text)
		}
		if match && text != "" {
			if len(results) == limit {
				truncated = true
				break
			}
			results = append(results, n.path)
		}
	}
	return map[string]any{"results": results, "visited": len(nodes), "truncated": truncated}, nil
}

const searchVisit = 20000

// events streams the sign-in's watch events (server-sent events) until the
// page goes or the sign-in ends.
func (c *Console) events(si *signIn, w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		reply(w, nil, errorf(http.StatusInternalServerError, "Error", "streaming unsupported"))
		return
	}
	ch, unsubscribe := si.subscribe()
	defer unsubscribe()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": coord console events\n\n")
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case ev := <-ch:
			if ev.Session != "" {
				b, _ := json.Marshal(map[string]string{"state": ev.Session})
				fmt.Fprintf(w, "event: session\ndata: %s\n\n", b)
				if ev.Session == "closed" || ev.Session == "expired" || ev.Session == "stopping" {
					fl.Flush()
					return
				}
			} else {
				b, _ := json.Marshal(ev)
				fmt.Fprintf(w, "data: %s\n\n", b)
			}
		}
		fl.Flush()
	}
}
