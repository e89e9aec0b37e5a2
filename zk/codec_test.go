package zk

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
)

func TestDecoderPrimitives(t *testing.T) {
	b := []byte{
		0xff, 0xff, 0xff, 0xfe, // int -2
		0x80, 0, 0, 0, 0, 0, 0, 1, // long min+1
		7,          // bool: any non-zero byte is true
		0, 0, 0, 0, // empty buffer
		0xff, 0xff, 0xff, 0xff, // null buffer
		0, 0, 0, 2, 'h', 'i', // string
	}
	d := NewDecoder(b)
	if v := d.Int32(); v != -2 {
		t.Errorf("Int32 = %d", v)
	}
	if v := d.Int64(); v != -1<<63+1 {
		t.Errorf("Int64 = %d", v)
	}
	if !d.Bool() {
		t.Error("Bool(7) = false")
	}
	if v := d.Buffer(); v == nil || len(v) != 0 {
		t.Errorf("empty buffer = %#v", v)
	}
	if v := d.Buffer(); v != nil {
		t.Errorf("null buffer = %#v", v)
	}
	if v := d.UString(); v != "hi" {
		t.Errorf("String = %q", v)
	}
	if d.Err() != nil || d.Remaining() != 0 || d.Offset() != len(b) {
		t.Errorf("err %v remaining %d offset %d", d.Err(), d.Remaining(), d.Offset())
	}
	// Reading past the end is sticky.
	if d.Int32() != 0 || !errors.Is(d.Err(), ErrTruncated) || d.UString() != "" {
		t.Errorf("past end: %v", d.Err())
	}
}

func TestDecoderCopies(t *testing.T) {
	b := []byte{0, 0, 0, 1, 'x'}
	d := NewDecoder(b)
	p := d.Buffer()
	b[4] = 'y'
	if p[0] != 'x' {
		t.Fatal("Buffer aliases its input")
	}
}

func TestBadLengths(t *testing.T) {
	cases := []struct {
		name string
		rec  Record
		in   []byte
	}{
		{"negative length", &SyncRequest{}, []byte{0xff, 0xff, 0xff, 0xfe, 'a'}},
		{"min int length", &SyncRequest{}, []byte{0x80, 0, 0, 0}},
		{"length past end", &SyncRequest{}, []byte{0, 0, 0, 5, 'a', 'b'}},
		{"huge length", &SyncRequest{}, []byte{0x7f, 0xff, 0xff, 0xff}},
		{"huge buffer", &SASLRequest{}, []byte{0x7f, 0xff, 0xff, 0xff}},
		{"negative count", &GetChildrenResponse{}, []byte{0x80, 0, 0, 0}},
		{"count -2", &GetChildrenResponse{}, []byte{0xff, 0xff, 0xff, 0xfe}},
		{"count past end", &GetChildrenResponse{}, []byte{0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0}}, // 3 strings need 12 bytes
		{"huge count", &GetChildrenResponse{}, []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0}},
		{"acl count too big", &GetACLResponse{}, []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}}, // one ACL needs 12
		{"client info count", &WhoAmIResponse{}, []byte{0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0}}, // two need 16
	}
	for _, c := range cases {
		err := Unmarshal(c.in, c.rec)
		if err == nil {
			t.Errorf("%s: decoded %+v", c.name, c.rec)
		} else if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v is not ErrMalformed", c.name, err)
		}
	}
}

// A length or count that claims more than the input holds must not allocate
// for it.
func TestNoAllocationBeyondInput(t *testing.T) {
	inputs := [][]byte{
		{0x7f, 0xff, 0xff, 0xff},                   // a 2 GiB string
		{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0}, // 2^31 children
		{0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff},       // one child of 2 GiB
	}
	var before, after runtime.MemStats
	for _, in := range inputs {
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := 0; i < 100; i++ {
			var c GetChildrenResponse
			_ = Unmarshal(in, &c)
			var s SyncRequest
			_ = Unmarshal(in, &s)
			var m MultiRequest
			_ = Unmarshal(in, &m)
		}
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 100*1024 {
			t.Errorf("% x: %d bytes allocated in 100 decodes", in, got)
		}
	}
}

// Decoding a small request allocates only its strings and slices.
func TestDecodeAllocs(t *testing.T) {
	frame := AppendRequest(nil, RequestHeader{Xid: 1, Type: OpGetData}, &GetDataRequest{Path: "/a/b", Watch: true})[4:]
	n := testing.AllocsPerRun(100, func() {
		var r GetDataRequest
		d := Decoder{b: frame[8:]}
		if err := r.Decode(&d); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 {
		t.Errorf("GetDataRequest decode: %v allocs, want 1 (the path)", n)
	}
	out := make([]byte, 0, 256)
	resp := &GetDataResponse{Data: []byte("hello"), Stat: testStat}
	n = testing.AllocsPerRun(100, func() {
		out = AppendReply(out[:0], ReplyHeader{Xid: 1, Zxid: 2}, resp)
	})
	if n > 1 {
		t.Errorf("AppendReply into a big enough buffer: %v allocs, want at most 1", n)
	}
	// A connection's own Encoder, reused, allocates nothing.
	e := NewEncoder(out[:0])
	want := append([]byte(nil), out...)
	n = testing.AllocsPerRun(100, func() {
		e.Reset(out[:0])
		start := e.BeginFrame()
		h := ReplyHeader{Xid: 1, Zxid: 2}
		h.Encode(e)
		resp.Encode(e)
		e.EndFrame(start)
	})
	if n != 0 || !bytes.Equal(e.Bytes(), want) {
		t.Errorf("reused Encoder: %v allocs, bytes equal %v", n, bytes.Equal(e.Bytes(), want))
	}
}

type countingReader struct {
	r    io.Reader
	read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func TestReadFrame(t *testing.T) {
	two := AppendFrame(AppendFrame(nil, &SyncRequest{Path: "/a"}), &SyncRequest{Path: "/bc"})
	r := bytes.NewReader(two)
	for _, want := range []string{"/a", "/bc"} {
		body, err := ReadFrame(r, DefaultMaxFrame)
		var s SyncRequest
		if err != nil || Unmarshal(body, &s) != nil || s.Path != want {
			t.Fatalf("frame %q: %v %q", want, err, s.Path)
		}
	}
	if _, err := ReadFrame(r, DefaultMaxFrame); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}

	// Too large and negative lengths are refused without reading the body.
	for _, prefix := range [][]byte{{0x7f, 0xff, 0xff, 0xff}, {0xff, 0xff, 0xff, 0xff}, {0, 0x10, 0, 0}} {
		cr := &countingReader{r: bytes.NewReader(append(prefix, make([]byte, 64)...))}
		if _, err := ReadFrame(cr, DefaultMaxFrame); !errors.Is(err, ErrFrameTooLarge) || cr.read != 4 {
			t.Errorf("% x: err %v, read %d bytes", prefix, err, cr.read)
		}
	}
	// The limit itself is allowed (ZooKeeper rejects only len > jute.maxbuffer).
	if n, err := FrameLength([]byte{0, 0x0f, 0xff, 0xff}, DefaultMaxFrame); err != nil || n != DefaultMaxFrame {
		t.Errorf("len = maxbuffer: %d %v", n, err)
	}
	// Truncated body and truncated prefix.
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 5, 1, 2}), 100); err != io.ErrUnexpectedEOF {
		t.Errorf("short body: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0}), 100); err != io.ErrUnexpectedEOF {
		t.Errorf("short prefix: %v", err)
	}
	if body, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 0}), 100); err != nil || body == nil || len(body) != 0 {
		t.Errorf("empty frame: %v %#v", err, body)
	}
}

func TestFourLetterWords(t *testing.T) {
	for _, w := range []string{"ruok", "srvr", "stat", "mntr", "conf", "cons", "crst", "wchs", "wchc", "wchp",
		"envi", "dump", "isro", "srst", "dirs", "gtmk", "stmk", "hash"} {
		got, ok := IsFourLetterWord([]byte(w))
		if !ok || got != w {
			t.Errorf("%s: %q %v", w, got, ok)
		}
		// Every command reads as a length ZooKeeper would refuse anyway.
		if _, err := FrameLength([]byte(w), DefaultMaxFrame); !errors.Is(err, ErrFrameTooLarge) {
			t.Errorf("%s as a length: %v", w, err)
		}
	}
	if got, ok := IsFourLetterWord([]byte{0xff, 0xf4, 0xff, 0xfd}); !ok || got != "telnet close" {
		t.Errorf("telnet close: %q %v", got, ok)
	}
	for _, b := range [][]byte{[]byte("RUOK"), []byte("kill"), []byte("ruo"), nil, {0, 0, 0, 45}} {
		if got, ok := IsFourLetterWord(b); ok {
			t.Errorf("%q recognised as %q", b, got)
		}
	}
}
