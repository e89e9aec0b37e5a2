package fsm

import (
	"coord/vocab"
	"strings"
	"testing"
	"unicode/utf16"
)

// refValidPath states ZooKeeper's rule the long way, as a reference for the
// fuzzer: decode like the wire does (invalid UTF-8 becomes U+FFFD), look at
// UTF-16 code units like Java does, then check the shape segment by segment.
func refValidPath(p string) bool {
	units := utf16.Encode([]rune(p))
	if len(units) == 0 || units[0] != '/' {
		return false
	}
	if p == "/" {
		return true
	}
	for _, c := range units {
		switch {
		case c <= 0x1f,
			c >= 0x7f && c <= 0x9f,
			c >= 0xd800 && c <= 0xf8ff,
			c >= 0xfff0:
			return false
		}
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func FuzzValidatePath(f *testing.F) {
	for _, tc := range validPathCases {
		f.Add(tc.path)
	}
	for _, s := range []string{"/a/", "/a/b/.", "/\x00/", "/\xed\xa0\x80", "/lock-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := ValidatePath(p)
		ok := err == nil
		if want := refValidPath(p); ok != want {
			t.Fatalf("ValidatePath(%q) ok=%v, reference says %v", p, ok, want)
		}
		if !ok {
			if e, isErr := err.(*vocab.Error); !isErr || e.Code != vocab.BadArguments || e.Path != p || e.Op != "" {
				t.Fatalf("ValidatePath(%q) = %#v, want BadArguments on the path", p, err)
			}
		}
		seqOK := ValidateCreatePath(p, true) == nil
		if want := refValidPath(p + "1"); seqOK != want {
			t.Fatalf("ValidateCreatePath(%q, true) ok=%v, reference on path+\"1\" says %v", p, seqOK, want)
		}
		if (ValidateCreatePath(p, false) == nil) != ok {
			t.Fatalf("ValidateCreatePath(%q, false) disagrees with ValidatePath", p)
		}
		parent, name := ParentAndName(p) // must not panic, valid or not
		if !ok {
			return
		}
		if !seqOK {
			t.Fatalf("valid %q is not a valid sequential prefix", p)
		}
		if p == "/" {
			if parent != "" || name != "" {
				t.Fatalf("ParentAndName(/) = (%q, %q)", parent, name)
			}
			return
		}
		if ValidatePath(parent) != nil {
			t.Fatalf("ParentAndName(%q) parent %q is invalid", p, parent)
		}
		if name == "" || strings.Contains(name, "/") {
			t.Fatalf("ParentAndName(%q) name %q", p, name)
		}
		joined := parent + "/" + name
		if parent == "/" {
			joined = "/" + name
		}
		if joined != p {
			t.Fatalf("ParentAndName(%q) = (%q, %q) does not join back", p, parent, name)
		}
		if ValidatePath(p+"/"+name) != nil {
			t.Fatalf("child %q of valid %q rejected", p+"/"+name, p)
		}
	})
}
