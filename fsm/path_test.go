package fsm

import (
	"coord/vocab"
	"errors"
	"testing"
)

// validPathCases holds paths and whether ZooKeeper's PathUtils.validatePath
// accepts them. The first group restates PathUtilsTest; the rest were
// checked against PathUtils in the zookeeper-3.8.0 jar (the class is
// unchanged since), with the bytes decoded as ZooKeeper's wire decoder does.
var validPathCases = []struct {
	path string
	ok   bool
}{
	// PathUtilsTest
	{"/this is / a valid/path", true},
	{"", false},
	{"not/valid", false},
	{"/ends/with/slash/", false},
	{"/test\u0000", false},
	{"/double//slash", false},
	{"/single/./period", false},
	{"/double/../period", false},
	{"/name/with.period.", true},
	{"/test\u0001", false},
	{"/test\u001F", false},
	{"/test\u0020", true},
	{"/test\u007e", true},
	{"/test\u007f", false},
	{"/test\u009f", false},
	{"/test\uf8ff", false},
	{"/test\uffef", true},
	{"/test\ufff0", false},

	// shape
	{"/", true},
	{"//", false},
	{"a", false},
	{" /a", false},
	{"/a", true},
	{"/a/b/c", true},
	{"/a//b", false},
	{"/.", false},
	{"/..", false},
	{"/...", true},
	{"/.a", true},
	{"/a.", true},
	{"/..a", true},
	{"/a..", true},
	{"/a/.", false},
	{"/a/..", false},
	{"/./a", false},
	{"/../a", false},
	{"/a/./b", false},
	{"/a/.../b", true},
	{"/zookeeper", true},
	{"/zookeeper/quota", true},

	// characters
	{"/\x00", false},
	{"/a\x00b", false},
	{"/\t", false},
	{"/\n", false},
	{"/ ", true},
	{"/~", true},
	{"/\u0080", false},
	{"/\u0085", false},
	{"/\u00a0", true},
	{"/é", true},
	{"/日本", true},
	{"/\ud7ff", true},
	{"/\ue000", false}, // private use area
	{"/\uf900", true},
	{"/\ufeff", true},
	{"/\ufffd", false},
	{"/\uffff", false},
	{"/\U00010000", false}, // outside the BMP: a surrogate pair in Java
	{"/\U0001F600", false},
	{"/\U0010FFFF", false},

	// invalid UTF-8 (decoded by ZooKeeper to U+FFFD, which it rejects)
	{"/\xff", false},
	{"/\xc3", false},
	{"/a\xc3(b", false},
	{"/\xc0\xaf", false},         // overlong '/'
	{"/\xc0\x80", false},         // modified-UTF-8 NUL
	{"/\xed\xa0\x80", false},     // encoded surrogate
	{"/\xf4\x90\x80\x80", false}, // beyond U+10FFFF
}

func TestValidatePath(t *testing.T) {
	for _, tc := range validPathCases {
		err := ValidatePath(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("ValidatePath(%q) = %v, want ok=%v", tc.path, err, tc.ok)
		}
	}
}

func TestValidatePathError(t *testing.T) {
	err := ValidatePath("/a//b")
	var e *vocab.Error
	if !errors.As(err, &e) {
		t.Fatalf("ValidatePath error %T is not *Error", err)
	}
	if e.Code != vocab.BadArguments || e.Op != "" || e.Path != "/a//b" {
		t.Errorf("ValidatePath error = %+v, want BadArguments on /a//b", *e)
	}
	if !errors.Is(err, vocab.BadArguments) {
		t.Errorf("errors.Is(%v, BadArguments) = false", err)
	}
	if err := ValidateCreatePath("a", true); vocab.CodeOf(err) != vocab.BadArguments || err.(*vocab.Error).Path != "a" {
		t.Errorf("ValidateCreatePath(a, true) = %v, want BadArguments on a", err)
	}
}

func TestValidateCreatePath(t *testing.T) {
	tests := []struct {
		path       string
		sequential bool
		ok         bool
	}{
		{"/a", false, true},
		{"/a", true, true},
		{"/", false, true},
		{"/", true, true}, // "/1"
		{"/a/", false, false},
		{"/a/", true, true}, // "/a/1": the server names the child
		{"/a//", true, false},
		{"//", true, false},
		{"/.", false, false},
		{"/.", true, true}, // "/.1"
		{"/..", true, true},
		{"/./", true, false},
		{"/../", true, false},
		{"/a/./", true, false},
		{"/a/.", true, true},
		{"", true, false},
		{"a", true, false},
		{"a/", true, false},
		{"/a\x00", true, false},
		{"/a\x00/", true, false},
		{"/\U0001F600/", true, false},
		{"/\xff/", true, false},
		{"/lock-", true, true},
		{"/queue/item-", true, true},
	}
	for _, tc := range tests {
		err := ValidateCreatePath(tc.path, tc.sequential)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateCreatePath(%q, %v) = %v, want ok=%v", tc.path, tc.sequential, err, tc.ok)
		}
		if !tc.sequential && (err == nil) != (ValidatePath(tc.path) == nil) {
			t.Errorf("ValidateCreatePath(%q, false) disagrees with ValidatePath", tc.path)
		}
		if tc.sequential && (err == nil) != (ValidatePath(tc.path+"1") == nil) {
			t.Errorf("ValidateCreatePath(%q, true) disagrees with ValidatePath(path+\"1\")", tc.path)
		}
	}
	for _, tc := range validPathCases {
		seq := ValidateCreatePath(tc.path, true) == nil
		if want := ValidatePath(tc.path+"1") == nil; seq != want {
			t.Errorf("ValidateCreatePath(%q, true) ok=%v, ValidatePath(path+\"1\") ok=%v", tc.path, seq, want)
		}
	}
}

func TestParentAndName(t *testing.T) {
	tests := []struct{ path, parent, name string }{
		{"/", "", ""},
		{"/a", "/", "a"},
		{"/a/b", "/a", "b"},
		{"/a/b/c", "/a/b", "c"},
		{"/a b/c.d", "/a b", "c.d"},
		{"/日本/語", "/日本", "語"},
		// invalid paths: unspecified, but no panic
		{"", "", ""},
		{"abc", "", ""},
	}
	for _, tc := range tests {
		parent, name := ParentAndName(tc.path)
		if parent != tc.parent || name != tc.name {
			t.Errorf("ParentAndName(%q) = (%q, %q), want (%q, %q)", tc.path, parent, name, tc.parent, tc.name)
		}
	}
}

func TestValidatePathNoAlloc(t *testing.T) {
	for _, p := range []string{"/", "/a/b/c", "/日本/語", "/queue/item-"} {
		allocs := testing.AllocsPerRun(100, func() {
			if ValidatePath(p) != nil || ValidateCreatePath(p, true) != nil {
				t.Fatalf("%q rejected", p)
			}
			ParentAndName(p)
		})
		if allocs != 0 {
			t.Errorf("ValidatePath(%q) allocates %v times", p, allocs)
		}
	}
}

func BenchmarkValidatePath(b *testing.B) {
	const p = "/services/payments/instances/instance-0000000042"
	for b.Loop() {
		if ValidatePath(p) != nil {
			b.Fatal("rejected")
		}
	}
}
