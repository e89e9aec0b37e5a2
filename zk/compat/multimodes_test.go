package compat

import (
	"fmt"
	"testing"
)

// rawMultiResult is one result of a multi read raw: its type and error
// code, and the created path if any.
type rawMultiResult struct {
	typ, err int32
	path     string
}

// rawMulti sends a multi of raw sub-ops and returns the header's error,
// the reply zxid and the results.
func (c *rawConn) rawMulti(ops ...func(*jw)) (int32, int64, []rawMultiResult) {
	c.t.Helper()
	rep := c.call(14, func(w *jw) {
		for _, op := range ops {
			op(w)
		}
		w.int(-1)
		w.bool(true)
		w.int(-1)
	})
	if rep.err != 0 {
		return rep.err, rep.zxid, nil
	}
	r := &jr{b: rep.body}
	var out []rawMultiResult
	for {
		typ, done, errc := r.int(), r.bool(), r.int()
		if done || r.err != nil {
			break
		}
		res := rawMultiResult{typ: typ, err: errc}
		switch typ {
		case -1:
			res.err = r.int()
		case 1:
			res.path = r.str()
		case 15, 19, 21:
			res.path = r.str()
			r.stat()
		case 5:
			r.stat()
		}
		out = append(out, res)
	}
	return 0, rep.zxid, out
}

// createSub is a multi's create sub-op of the given op type and flags
// (with a TTL field for createTTL).
func createSub(op int32, path string, flags int32, ttl int64) func(*jw) {
	return func(w *jw) {
		w.int(op)
		w.bool(false)
		w.int(-1)
		w.str(path)
		w.buf(nil)
		w.openACL()
		w.int(flags)
		if op == 21 {
			w.long(ttl)
		}
	}
}

// ZooKeeper rebuilds a multi's creates from their flags: the op type
// matters only for a TTL (which only createTTL carries; a TTL mode on any
// other create type fails the whole multi with MarshallingError, still
// taking a zxid), and the result is create2's for a container or TTL node,
// create's otherwise. Found by the jepsen differential run (seed 2).
func TestMultiCreateModes(t *testing.T) {
	cl := newCluster(t, 1)
	c := rawConnect(t, cl.Addrs()[0], rawConnectOpts{})
	const (
		create, create2, container, ttl = 1, 15, 19, 21
		marshalling                     = -5
	)
	cases := []struct {
		name   string
		op     int32
		flags  int32
		ttl    int64
		header int32   // the reply header's error
		types  []int32 // the results' types (-1: error) when the header is OK
		errs   []int32
	}{
		{"create with a TTL mode", create, 5, 0, marshalling, nil, nil},
		{"create with the sequential TTL mode", create, 6, 0, marshalling, nil, nil},
		{"create2 with a TTL mode", create2, 5, 0, marshalling, nil, nil},
		{"createContainer with a TTL mode", container, 5, 0, marshalling, nil, nil},
		{"create with the container mode", create, 4, 0, 0, []int32{create2, create}, []int32{0, 0}},
		{"create2 with the container mode", create2, 4, 0, 0, []int32{create2, create}, []int32{0, 0}},
		{"create2 persistent", create2, 0, 0, 0, []int32{create, create}, []int32{0, 0}},
		{"createContainer persistent", container, 0, 0, 0, []int32{create, create}, []int32{0, 0}},
		{"createContainer sequential", container, 2, 0, 0, []int32{create, create}, []int32{0, 0}},
		{"createContainer container", container, 4, 0, 0, []int32{create2, create}, []int32{0, 0}},
		{"createTTL persistent", ttl, 0, 1000, 0, []int32{create, create}, []int32{0, 0}},
		{"createTTL ephemeral", ttl, 1, 1000, 0, []int32{create, create}, []int32{0, 0}},
		{"createTTL container", ttl, 4, 1000, 0, []int32{create2, create}, []int32{0, 0}},
		{"createTTL TTL", ttl, 5, 1000, 0, []int32{create2, create}, []int32{0, 0}},
		{"createTTL sequential TTL", ttl, 6, 1000, 0, []int32{create2, create}, []int32{0, 0}},
		{"createTTL TTL 0", ttl, 5, 0, 0, []int32{-1, -1}, []int32{-8, -2}},
		{"create with mode 7", create, 7, 0, 0, []int32{-1, -1}, []int32{-8, -2}},
	}
	last := int64(0)
	for i, tc := range cases {
		p := fmt.Sprintf("/m%d", i)
		herr, zx, res := c.rawMulti(createSub(tc.op, p, tc.flags, tc.ttl), createSub(create, p+"x", 0, 0))
		if zx <= last {
			t.Errorf("%s: reply zxid %#x after %#x: the multi took no zxid", tc.name, zx, last)
		}
		last = zx
		if herr != tc.header {
			t.Errorf("%s: header error %d, want %d (results %+v)", tc.name, herr, tc.header, res)
			continue
		}
		var types, errs []int32
		for _, r := range res {
			types, errs = append(types, r.typ), append(errs, r.err)
		}
		if tc.header == 0 && (fmt.Sprint(types) != fmt.Sprint(tc.types) || fmt.Sprint(errs) != fmt.Sprint(tc.errs)) {
			t.Errorf("%s: results %+v, want types %v errors %v", tc.name, res, tc.types, tc.errs)
		}
	}
	// An op before the TTL one that fails is the multi's failure: the TTL
	// op is never reached.
	herr, _, res := c.rawMulti(createSub(create, "/no/parent", 0, 0), createSub(create, "/m-ttl", 5, 0))
	if herr != 0 || len(res) != 2 || res[0].err != -101 || res[1].err != -2 {
		t.Errorf("multi failing before its TTL create: header %d results %+v, want NoNode then RuntimeInconsistency", herr, res)
	}
	// An ephemeral made through createTTL is the session's.
	st := c.call(3, func(w *jw) { w.str("/m11"); w.bool(false) })
	if st.err != 0 || (&jr{b: st.body}).stat().EphemeralOwner != c.SessionID {
		t.Errorf("exists /m11 (createTTL ephemeral): err %d", st.err)
	}
}
