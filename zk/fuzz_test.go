package zk

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"coord/vocab"
)

// maxFootprint bounds the Go memory a decoded record may hold per input
// byte. The worst cases are multi ops and results (a ~100-byte struct for
// 14 bytes of input, doubled by append) and vectors of empty strings (a
// 16-byte header for 4 bytes).
const (
	maxFootprintPerByte = 40
	footprintSlack      = 1024
)

// footprint estimates the heap bytes v refers to: string bytes and slice
// capacities, recursively.
func footprint(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return int(v.Elem().Type().Size()) + footprint(v.Elem())
	case reflect.String:
		return v.Len()
	case reflect.Slice:
		n := v.Cap() * int(v.Type().Elem().Size())
		for i := 0; i < v.Len(); i++ {
			n += footprint(v.Index(i))
		}
		return n
	case reflect.Struct:
		n := 0
		for i := 0; i < v.NumField(); i++ {
			n += footprint(v.Field(i))
		}
		return n
	}
	return 0
}

// checkDecode is the property every decoder must have: bad input is an
// ErrMalformed error; good input yields a record of bounded size whose
// encoding decodes again and re-encodes to the same bytes.
func checkDecode(t *testing.T, data []byte, rec Record) {
	err := Unmarshal(data, rec)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("%T: error %v does not wrap ErrMalformed", rec, err)
		}
		return
	}
	if fp := footprint(reflect.ValueOf(rec)); fp > maxFootprintPerByte*len(data)+footprintSlack {
		t.Fatalf("%T: %d input bytes decoded into ~%d bytes", rec, len(data), fp)
	}
	enc := Marshal(rec)
	again := newLike(rec)
	if err := Unmarshal(enc, again); err != nil {
		t.Fatalf("%T: re-decoding its own encoding: %v\ninput % x\nencoding % x", rec, err, data, enc)
	}
	if enc2 := Marshal(again); !bytes.Equal(enc, enc2) {
		t.Fatalf("%T: encoding not stable:\n% x\n% x", rec, enc, enc2)
	}
}

// seedCorpus adds the encodings of the sample records.
func seedCorpus(f *testing.F, keep func(Record) bool) {
	for _, r := range samples() {
		if keep(r) {
			f.Add(Marshal(r))
		}
	}
}

// FuzzDecodeRequest runs whole request frames (header and body) through
// DecodeRequest, the server's entry point, for every op type.
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range samples() {
		for op := range opNames {
			if body, err := NewRequest(op); err == nil && body != nil && reflect.TypeOf(body) == reflect.TypeOf(r) {
				f.Add(AppendRequest(nil, RequestHeader{Xid: 1, Type: op}, r)[4:])
			}
		}
	}
	f.Add(AppendRequest(nil, RequestHeader{Xid: XidPing, Type: OpPing}, nil)[4:])
	f.Fuzz(func(t *testing.T, data []byte) {
		h, body, err := DecodeRequest(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownOp) {
				t.Fatalf("error %v is neither ErrMalformed nor ErrUnknownOp", err)
			}
			return
		}
		if body == nil {
			return
		}
		if fp := footprint(reflect.ValueOf(body)); fp > maxFootprintPerByte*len(data)+footprintSlack {
			t.Fatalf("%v: %d input bytes decoded into ~%d bytes", h.Type, len(data), fp)
		}
		enc := AppendRequest(nil, h, body)[4:]
		h2, body2, err := DecodeRequest(enc)
		if err != nil || h2 != h {
			t.Fatalf("%v: re-decoding: %v (%+v)", h.Type, err, h2)
		}
		if enc2 := AppendRequest(nil, h2, body2)[4:]; !bytes.Equal(enc, enc2) {
			t.Fatalf("%v: encoding not stable:\n% x\n% x", h.Type, enc, enc2)
		}
	})
}

func FuzzConnectRequest(f *testing.F) {
	seedCorpus(f, func(r Record) bool { _, ok := r.(*ConnectRequest); return ok })
	f.Fuzz(func(t *testing.T, data []byte) {
		var r ConnectRequest
		checkDecode(t, data, &r)
	})
}

func FuzzMultiRequest(f *testing.F) {
	seedCorpus(f, func(r Record) bool { _, ok := r.(*MultiRequest); return ok })
	f.Fuzz(func(t *testing.T, data []byte) {
		var r MultiRequest
		checkDecode(t, data, &r)
	})
}

func FuzzCreateRequest(f *testing.F) {
	seedCorpus(f, func(r Record) bool {
		switch r.(type) {
		case *CreateRequest, *CreateTTLRequest:
			return true
		}
		return false
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, &CreateRequest{})
		checkDecode(t, data, &CreateTTLRequest{})
		checkDecode(t, data, &SetACLRequest{})
	})
}

func FuzzSetWatches(f *testing.F) {
	seedCorpus(f, func(r Record) bool {
		switch r.(type) {
		case *SetWatches, *SetWatches2:
			return true
		}
		return false
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, &SetWatches{})
		checkDecode(t, data, &SetWatches2{})
	})
}

// FuzzResponses covers what a client decodes (the server's own tests and
// coord's client use these).
func FuzzResponses(f *testing.F) {
	seedCorpus(f, func(r Record) bool {
		switch r.(type) {
		case *MultiResponse, *GetChildren2Response, *ConnectResponse, *WhoAmIResponse, *WatcherEvent:
			return true
		}
		return false
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, &MultiResponse{})
		checkDecode(t, data, &GetChildren2Response{})
		checkDecode(t, data, &GetACLResponse{})
		checkDecode(t, data, &ConnectResponse{})
		checkDecode(t, data, &WhoAmIResponse{})
		checkDecode(t, data, &WatcherEvent{})
	})
}

// Every sample, and every prefix of it, passes the decode property.
func TestDecodeProperty(t *testing.T) {
	for _, r := range samples() {
		b := Marshal(r)
		for n := 0; n <= len(b); n++ {
			checkDecode(t, b[:n], newLike(r))
		}
	}
}

// The densest inputs stay within the footprint bound the fuzzers check.
func TestWorstCaseFootprint(t *testing.T) {
	const n = 10000
	var reads MultiRequest
	for i := 0; i < n; i++ {
		reads.Ops = append(reads.Ops, MultiOp{Type: OpGetData})
	}
	var results MultiResponse
	for i := 0; i < n; i++ {
		results.Results = append(results.Results, MultiResult{Type: OpDelete})
	}
	for _, r := range []Record{&reads, &results, &GetChildrenResponse{Children: make([]string, n)},
		&GetACLResponse{ACL: make([]vocab.ACL, n)}} {
		data := Marshal(r)
		got := newLike(r)
		if err := Unmarshal(data, got); err != nil {
			t.Fatal(err)
		}
		fp := footprint(reflect.ValueOf(got))
		t.Logf("%T: %d bytes in, ~%d bytes held (%.1f per byte)", r, len(data), fp, float64(fp)/float64(len(data)))
		if fp > maxFootprintPerByte*len(data)+footprintSlack {
			t.Errorf("%T exceeds the bound", r)
		}
	}
}
