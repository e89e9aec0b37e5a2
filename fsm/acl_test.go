package fsm

import (
	"coord/vocab"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The expectations on ZooKeeper's providers below were checked against
// DigestAuthenticationProvider and PathUtils from the zookeeper-3.8.0 jar and
// IPAuthenticationProvider as of ZooKeeper 3.9.5 (the first with IPv6).

var (
	bobDigest   = "bob:fyVmFCwVbTJYrznoSu1koqYEYF0=" // vocab.DigestID("bob", "secret")
	aliceDigest = vocab.DigestID("alice", "wonderland")
	bob         = vocab.Id{Scheme: "digest", ID: bobDigest}
	alice       = vocab.Id{Scheme: "digest", ID: aliceDigest}
	superID     = vocab.Id{Scheme: "super", ID: ""}
	ipCaller    = vocab.Id{Scheme: "ip", ID: "10.1.2.3"}
	ip6Caller   = vocab.Id{Scheme: "ip", ID: "2001:db8:0:0:0:0:0:1"}
)

func acl1(p vocab.Perm, scheme, id string) vocab.ACL {
	return vocab.ACL{Perms: p, ID: vocab.Id{Scheme: scheme, ID: id}}
}

func TestIsOpenACL(t *testing.T) {
	tests := []struct {
		acl  []vocab.ACL
		want bool
	}{
		{vocab.OpenACLUnsafe, true},
		{[]vocab.ACL{acl1(vocab.PermAll, "world", "anyone")}, true},
		{nil, false},
		{[]vocab.ACL{}, false},
		{vocab.ReadACLUnsafe, false},
		{vocab.CreatorAllACL, false},
		{[]vocab.ACL{acl1(vocab.PermAll, "world", "anyone"), acl1(vocab.PermAll, "world", "anyone")}, false},
		{[]vocab.ACL{acl1(vocab.PermAll|1<<5, "world", "anyone")}, false},
		{[]vocab.ACL{acl1(vocab.PermAll, "world", "Anyone")}, false},
		{[]vocab.ACL{acl1(vocab.PermAll, "digest", "anyone")}, false},
	}
	for _, tc := range tests {
		if got := IsOpenACL(tc.acl); got != tc.want {
			t.Errorf("IsOpenACL(%v) = %v, want %v", tc.acl, got, tc.want)
		}
	}
}

func TestCheckACL(t *testing.T) {
	readBob := []vocab.ACL{acl1(vocab.PermRead, "digest", bobDigest)}
	tests := []struct {
		name string
		acl  []vocab.ACL
		perm vocab.Perm
		ids  []vocab.Id
		want bool
	}{
		{"empty acl allows all", nil, vocab.PermAdmin, nil, true},
		{"empty acl allows perm 0", []vocab.ACL{}, 0, nil, true},
		{"open", vocab.OpenACLUnsafe, vocab.PermWrite, nil, true},
		{"open, perm 0", vocab.OpenACLUnsafe, 0, nil, false},
		{"read-only world, write", vocab.ReadACLUnsafe, vocab.PermWrite, nil, false},
		{"read-only world, read", vocab.ReadACLUnsafe, vocab.PermRead, nil, true},
		{"any bit of perm suffices", vocab.ReadACLUnsafe, vocab.PermRead | vocab.PermAdmin, nil, true},
		{"no bit of perm", vocab.ReadACLUnsafe, vocab.PermWrite | vocab.PermAdmin, []vocab.Id{ipCaller, bob}, false},
		{"super beats any acl", readBob, vocab.PermAdmin, []vocab.Id{ipCaller, superID}, true},
		{"super with any id string", readBob, vocab.PermAdmin, []vocab.Id{{Scheme: "super", ID: "whatever"}}, true},
		{"super beats perm 0", readBob, 0, []vocab.Id{superID}, true},
		{"Super is not super", readBob, vocab.PermAdmin, []vocab.Id{{Scheme: "Super"}}, false},

		{"digest match", readBob, vocab.PermRead, []vocab.Id{ipCaller, bob}, true},
		{"digest, wrong perm", readBob, vocab.PermWrite, []vocab.Id{bob}, false},
		{"digest, other user", readBob, vocab.PermRead, []vocab.Id{alice}, false},
		{"digest, no ids", readBob, vocab.PermRead, nil, false},
		{"digest id under another scheme", readBob, vocab.PermRead, []vocab.Id{{Scheme: "ip", ID: bobDigest}}, false},
		{"second entry matches", []vocab.ACL{acl1(vocab.PermAll, "digest", aliceDigest), acl1(vocab.PermRead, "digest", bobDigest)}, vocab.PermRead, []vocab.Id{bob}, true},
		{"matching entry lacks the bit", []vocab.ACL{acl1(vocab.PermWrite, "digest", bobDigest), acl1(vocab.PermRead, "digest", aliceDigest)}, vocab.PermRead, []vocab.Id{bob}, false},

		{"ip exact", []vocab.ACL{acl1(vocab.PermRead, "ip", "10.1.2.3")}, vocab.PermRead, []vocab.Id{ipCaller}, true},
		{"ip exact, other host", []vocab.ACL{acl1(vocab.PermRead, "ip", "10.1.2.4")}, vocab.PermRead, []vocab.Id{ipCaller}, false},
		{"ip /8", []vocab.ACL{acl1(vocab.PermRead, "ip", "10.0.0.0/8")}, vocab.PermRead, []vocab.Id{ipCaller}, true},
		{"ip /8 miss", []vocab.ACL{acl1(vocab.PermRead, "ip", "11.0.0.0/8")}, vocab.PermRead, []vocab.Id{ipCaller}, false},
		{"ip /8 host bits ignored", []vocab.ACL{acl1(vocab.PermRead, "ip", "10.9.9.9/8")}, vocab.PermRead, []vocab.Id{ipCaller}, true},
		{"ip v6 prefix", []vocab.ACL{acl1(vocab.PermRead, "ip", "2001:db8::/32")}, vocab.PermRead, []vocab.Id{ip6Caller}, true},
		{"ip v6 vs v4 caller", []vocab.ACL{acl1(vocab.PermRead, "ip", "::/0")}, vocab.PermRead, []vocab.Id{ipCaller}, false},
		{"ip v4 vs v6 caller", []vocab.ACL{acl1(vocab.PermRead, "ip", "0.0.0.0/0")}, vocab.PermRead, []vocab.Id{ip6Caller}, false},
		{"ip entry, digest caller", []vocab.ACL{acl1(vocab.PermRead, "ip", "10.1.2.3")}, vocab.PermRead, []vocab.Id{{Scheme: "digest", ID: "10.1.2.3"}}, false},
		{"ip invalid entry", []vocab.ACL{acl1(vocab.PermRead, "ip", "10.1.2.3/33")}, vocab.PermRead, []vocab.Id{ipCaller}, false},

		{"world non-anyone never matches", []vocab.ACL{acl1(vocab.PermAll, "world", "bob")}, vocab.PermRead, []vocab.Id{{Scheme: "world", ID: "bob"}}, false},
		{"auth entry never matches", []vocab.ACL{acl1(vocab.PermAll, "auth", "")}, vocab.PermRead, []vocab.Id{{Scheme: "auth", ID: ""}, bob}, false},
		{"other scheme matches by equality", []vocab.ACL{acl1(vocab.PermAll, "x509", "CN=bob")}, vocab.PermRead, []vocab.Id{{Scheme: "x509", ID: "CN=bob"}}, true},
		{"other scheme, other id", []vocab.ACL{acl1(vocab.PermAll, "x509", "CN=bob")}, vocab.PermRead, []vocab.Id{{Scheme: "x509", ID: "CN=alice"}}, false},
		{"world anyone after non-matching entries", []vocab.ACL{acl1(vocab.PermAll, "digest", aliceDigest), acl1(vocab.PermRead, "world", "anyone")}, vocab.PermRead, nil, true},
	}
	for _, tc := range tests {
		if got := CheckACL(tc.acl, tc.perm, tc.ids); got != tc.want {
			t.Errorf("%s: CheckACL(%v, %d, %v) = %v, want %v", tc.name, tc.acl, tc.perm, tc.ids, got, tc.want)
		}
	}
}

func TestCheckACLNoAlloc(t *testing.T) {
	ids := []vocab.Id{ipCaller, bob}
	cases := [][]vocab.ACL{
		vocab.OpenACLUnsafe,
		{acl1(vocab.PermRead, "digest", bobDigest)},
		{acl1(vocab.PermRead, "ip", "10.0.0.0/8")},
		{acl1(vocab.PermRead, "ip", "2001:db8::/32")},
	}
	for _, acl := range cases {
		allocs := testing.AllocsPerRun(100, func() {
			CheckACL(acl, vocab.PermRead, ids)
			CheckACL(acl, vocab.PermWrite, ids)
		})
		if allocs != 0 {
			t.Errorf("CheckACL(%v) allocates %v times", acl, allocs)
		}
	}
}

func TestParseAuthDigest(t *testing.T) {
	tests := []struct {
		auth string
		want string // "" when the payload is refused
	}{
		{"super:test", "super:D/InIHSb7yEEbrWz8b9l71RjZJU="},
		{"bob:secret", bobDigest},
		{"a:b:c", "a:cLzgnoJ6mP5qz3w+mwvPE2vDgu0="},
		{"nocolon", "nocolon:Ra+cHr2ZoHvBjtNArFGNGlVie4g="},
		{"", ":2jmj7l5rSw0yVb/vlWAYkK/YBwk="},
		{"bob:\xff", ""},
	}
	for _, tc := range tests {
		id, err := ParseAuthDigest(tc.auth)
		if tc.want == "" {
			if vocab.CodeOf(err) != vocab.AuthFailed {
				t.Errorf("ParseAuthDigest(%q) = %v, %v; want AuthFailed", tc.auth, id, err)
			}
			continue
		}
		if err != nil || id != (vocab.Id{Scheme: "digest", ID: tc.want}) {
			t.Errorf("ParseAuthDigest(%q) = %v, %v; want digest:%s", tc.auth, id, err, tc.want)
		}
	}
	for _, up := range [][2]string{{"bob", "secret"}, {"a:b", "c"}, {"", ""}} {
		id, err := ParseAuthDigest(up[0] + ":" + up[1])
		if err != nil || id.ID != vocab.DigestID(up[0], up[1]) {
			t.Errorf("ParseAuthDigest and vocab.DigestID disagree on %q", up)
		}
	}
}

// digestValidCases is DigestAuthenticationProvider.isValid: id.split(":")
// has two elements.
var digestValidCases = []struct {
	id string
	ok bool
}{
	{bobDigest, true},
	{"u:h", true},
	{":h", true},   // empty user
	{"u:h:", true}, // trailing empty parts are dropped
	{"u:h::", true},
	{"", false},
	{"u", false},
	{"u:", false},
	{"u::", false},
	{":", false},
	{"::", false},
	{"::h", false},
	{"u::h", false},
	{"u:h:x", false},
	{"u:h:x:", false},
}

func TestValidDigestID(t *testing.T) {
	for _, tc := range digestValidCases {
		if got := validDigestID(tc.id); got != tc.ok {
			t.Errorf("validDigestID(%q) = %v, want %v", tc.id, got, tc.ok)
		}
	}
}

// ipValidCases is IPAuthenticationProvider.isValid.
var ipValidCases = []struct {
	id string
	ok bool
}{
	{"10.0.0.1", true},
	{"10.0.0.0/8", true},
	{"0.0.0.0/0", true},
	{"255.255.255.255/32", true},
	{"10.0.0.0/33", false},
	{"10.0.0.0/-1", false},
	{"10.0.0.0/", false},
	{"10.0.0.0/x", false},
	{"10.0.0.0/8/8", false},
	{"10.0.0.0/+8", true},  // Integer.parseInt takes a sign
	{"10.0.0.0/-0", true},  // and "-0"
	{"10.0.0.0/008", true}, // and leading zeros
	{"10.0.0", false},
	{"10.0.0.0.0", false},
	{"10.0.0.", false},
	{".10.0.0", false},
	{"10..0.0", false},
	{"256.0.0.0", false},
	{"-1.0.0.0", false},
	{"+1.0.0.0", true},
	{"-0.0.0.0", true},
	{"010.0.0.1", true}, // decimal, not octal
	{"0000000000000000000001.0.0.1", true},
	{"2147483648.0.0.1", false},
	{"1 .0.0.1", false},
	{"a.b.c.d", false},
	{"١٠.0.0.1", true}, // Arabic-Indic digits are Java digits
	{"１０.0.0.1", true}, // so are fullwidth ones
	{"1\U0001D7CE.0.0.1", false},
	{"localhost", false},
	{"", false},
	{"/8", false},
	{"1", false},

	{"::", true},
	{"::1", true},
	{"::1/128", true},
	{"::/0", true},
	{"::1/129", false},
	{"2001:db8::/32", true},
	{"2001:db8:0:0:0:0:0:1", true},
	{"2001:DB8:0:0:0:0:0:1", true},
	{"2001:db8:0:0:0:0:1", false},     // seven groups, no "::"
	{"2001:db8:0:0:0:0:0:0:1", false}, // nine
	{"1:2:3:4:5:6:7::", true},
	{"::2:3:4:5:6:7:8", true},
	{"1:2:3:4::5:6:7:8", false}, // "::" standing for nothing
	{"1::2::3", false},
	{":::", false},
	{"1:::2", false},
	{"::::", false},
	{":1::", false},
	{"1:", false},
	{":1", false},
	{"12345::", false},
	{"0ffff::", false},
	{"ffff::", true},
	{"g::", false},
	{"-1::", true}, // parseInt(-1, 16): ffff
	{"+f::", true},
	{"-::", false},
	{"ｆ::", true}, // fullwidth letters are hex digits to Java
	{"１２３４::", true},
	{"::ffff:1.2.3.4", false}, // no embedded IPv4
	{"fe80::1%eth0", false},   // no zones
	{"fe80::1%2", false},
}

func TestValidIPACL(t *testing.T) {
	for _, tc := range ipValidCases {
		if got := validIPACL(tc.id); got != tc.ok {
			t.Errorf("validIPACL(%q) = %v, want %v", tc.id, got, tc.ok)
		}
	}
}

// ipMatchCases is IPAuthenticationProvider.matches(caller, acl).
var ipMatchCases = []struct {
	caller, acl string
	ok          bool
}{
	{"10.1.2.3", "10.1.2.3", true},
	{"10.1.2.3", "10.1.2.4", false},
	{"10.1.2.3", "10.1.2.3/32", true},
	{"10.1.2.3", "10.1.2.0/24", true},
	{"10.1.3.3", "10.1.2.0/24", false},
	{"172.31.255.255", "172.16.0.0/12", true},
	{"172.32.0.0", "172.16.0.0/12", false},
	{"172.15.255.255", "172.16.0.0/12", false},
	{"1.2.3.4", "0.0.0.0/0", true},
	{"1.2.3.4", "9.9.9.9/0", true},
	{"010.1.2.3", "10.1.2.3", true},
	{"10.1.2.3", "10.1.2.3/33", false},
	{"10.1.2.3", "bogus", false},
	{"bogus", "0.0.0.0/0", false},
	{"10.1.2.3/8", "10.0.0.0/8", false}, // a caller id is an address, not a range
	{"::1", "0:0:0:0:0:0:0:1", true},
	{"0:0:0:0:0:0:0:1", "::1/128", true},
	{"2001:db8:0:0:0:0:0:1", "2001:db8::/32", true},
	{"2001:db9:0:0:0:0:0:1", "2001:db8::/32", false},
	{"2001:db8:ffff:0:0:0:0:1", "2001:db8::/33", false},
	{"2001:db8:7fff:0:0:0:0:1", "2001:db8::/33", true},
	{"ffff:0:0:0:0:0:0:0", "-1::/16", true},
	{"fe80:0:0:0:0:0:0:1%eth0", "fe80::/10", false},
	{"::ffff:10.1.2.3", "10.0.0.0/8", false},
	{"0:0:0:0:0:ffff:a01:203", "10.0.0.0/8", false}, // families never mix
	{"10.1.2.3", "::/0", false},
}

func TestIPMatches(t *testing.T) {
	for _, tc := range ipMatchCases {
		if got := ipMatches(tc.caller, tc.acl); got != tc.ok {
			t.Errorf("ipMatches(%q, %q) = %v, want %v", tc.caller, tc.acl, got, tc.ok)
		}
	}
}

func TestJavaParseInt(t *testing.T) {
	tests := []struct {
		s     string
		radix int
		v     int
		ok    bool
	}{
		{"0", 10, 0, true},
		{"255", 10, 255, true},
		{"+7", 10, 7, true},
		{"-7", 10, -7, true},
		{"-0", 10, 0, true},
		{"007", 10, 7, true},
		{"2147483647", 10, 2147483647, true},
		{"-2147483648", 10, -2147483648, true},
		{"2147483648", 10, 0, false},
		{"-2147483649", 10, 0, false},
		{"99999999999999999999999", 10, 0, false},
		{"", 10, 0, false},
		{"+", 10, 0, false},
		{"-", 10, 0, false},
		{"+-1", 10, 0, false},
		{" 1", 10, 0, false},
		{"1a", 10, 0, false},
		{"ff", 16, 255, true},
		{"FF", 16, 255, true},
		{"-ff", 16, -255, true},
		{"fg", 16, 0, false},
		{"١٢", 10, 12, true},
		{"𝟏", 10, 0, false}, // outside the BMP
		{"ｆ", 16, 15, true},
		{"Ｆ", 16, 15, true},
		{"ｇ", 16, 0, false},
		{"\xff", 10, 0, false},
	}
	for _, tc := range tests {
		v, ok := javaParseInt(tc.s, tc.radix)
		if v != tc.v || ok != tc.ok {
			t.Errorf("javaParseInt(%q, %d) = %d, %v; want %d, %v", tc.s, tc.radix, v, ok, tc.v, tc.ok)
		}
	}
}

func TestFixupACL(t *testing.T) {
	readAnyone := acl1(vocab.PermRead, "world", "anyone")
	allBob := acl1(vocab.PermAll, "digest", bobDigest)
	tests := []struct {
		name string
		acl  []vocab.ACL
		ids  []vocab.Id
		want []vocab.ACL // nil: InvalidACL
	}{
		{"nil", nil, nil, nil},
		{"empty", []vocab.ACL{}, []vocab.Id{bob}, nil},
		{"open", vocab.OpenACLUnsafe, nil, vocab.OpenACLUnsafe},
		{"read world", vocab.ReadACLUnsafe, nil, vocab.ReadACLUnsafe},
		{"duplicates dropped, first kept", []vocab.ACL{readAnyone, allBob, readAnyone, allBob}, nil, []vocab.ACL{readAnyone, allBob}},
		{"same id, other perms kept", []vocab.ACL{readAnyone, acl1(vocab.PermWrite, "world", "anyone")}, nil, []vocab.ACL{readAnyone, acl1(vocab.PermWrite, "world", "anyone")}},
		{"world other id", []vocab.ACL{acl1(vocab.PermAll, "world", "everyone")}, nil, nil},
		{"world is case-sensitive", []vocab.ACL{acl1(vocab.PermAll, "World", "anyone")}, nil, nil},
		{"anyone is case-sensitive", []vocab.ACL{acl1(vocab.PermAll, "world", "Anyone")}, nil, nil},

		{"auth expands to digest ids", vocab.CreatorAllACL, []vocab.Id{ipCaller, bob, superID, alice}, []vocab.ACL{allBob, acl1(vocab.PermAll, "digest", aliceDigest)}},
		{"auth keeps its perms", []vocab.ACL{acl1(vocab.PermRead|vocab.PermAdmin, "auth", "")}, []vocab.Id{bob}, []vocab.ACL{acl1(vocab.PermRead|vocab.PermAdmin, "digest", bobDigest)}},
		{"auth ignores its id", []vocab.ACL{acl1(vocab.PermAll, "auth", "whoever")}, []vocab.Id{bob}, []vocab.ACL{allBob}},
		{"auth in place", []vocab.ACL{readAnyone, acl1(vocab.PermWrite, "auth", ""), acl1(vocab.PermRead, "ip", "10.0.0.0/8")}, []vocab.Id{bob},
			[]vocab.ACL{readAnyone, acl1(vocab.PermWrite, "digest", bobDigest), acl1(vocab.PermRead, "ip", "10.0.0.0/8")}},
		{"auth without ids", vocab.CreatorAllACL, nil, nil},
		{"auth with only ip", vocab.CreatorAllACL, []vocab.Id{ipCaller}, nil},
		{"auth with only super", vocab.CreatorAllACL, []vocab.Id{superID}, nil},
		{"auth expansion is not deduplicated", []vocab.ACL{acl1(vocab.PermAll, "auth", ""), allBob}, []vocab.Id{bob}, []vocab.ACL{allBob, allBob}},
		{"auth duplicates dropped before expansion", []vocab.ACL{acl1(vocab.PermAll, "auth", ""), acl1(vocab.PermAll, "auth", "")}, []vocab.Id{bob}, []vocab.ACL{allBob}},

		{"digest", []vocab.ACL{allBob}, nil, []vocab.ACL{allBob}},
		{"digest with empty user", []vocab.ACL{acl1(vocab.PermAll, "digest", ":h")}, nil, []vocab.ACL{acl1(vocab.PermAll, "digest", ":h")}},
		{"digest without hash", []vocab.ACL{acl1(vocab.PermAll, "digest", "bob")}, nil, nil},
		{"digest with two colons", []vocab.ACL{acl1(vocab.PermAll, "digest", "bob:h:x")}, nil, nil},
		{"ip", []vocab.ACL{acl1(vocab.PermAll, "ip", "10.0.0.0/8")}, nil, []vocab.ACL{acl1(vocab.PermAll, "ip", "10.0.0.0/8")}},
		{"ip v6", []vocab.ACL{acl1(vocab.PermAll, "ip", "2001:db8::/32")}, nil, []vocab.ACL{acl1(vocab.PermAll, "ip", "2001:db8::/32")}},
		{"ip bad prefix", []vocab.ACL{acl1(vocab.PermAll, "ip", "10.0.0.0/33")}, nil, nil},
		{"ip hostname", []vocab.ACL{acl1(vocab.PermAll, "ip", "localhost")}, nil, nil},
		{"super scheme", []vocab.ACL{acl1(vocab.PermAll, "super", "")}, []vocab.Id{superID}, nil},
		{"sasl scheme", []vocab.ACL{acl1(vocab.PermAll, "sasl", "bob")}, nil, []vocab.ACL{acl1(vocab.PermAll, "sasl", "bob")}},
		{"sasl without a name", []vocab.ACL{acl1(vocab.PermAll, "sasl", "")}, nil, nil},
		{"x509 scheme", []vocab.ACL{acl1(vocab.PermAll, "x509", "CN=bob")}, nil, []vocab.ACL{acl1(vocab.PermAll, "x509", "CN=bob")}},
		{"empty scheme", []vocab.ACL{acl1(vocab.PermAll, "", "")}, nil, nil},
		{"one bad entry spoils the list", []vocab.ACL{readAnyone, allBob, acl1(vocab.PermAll, "digest", "x")}, nil, nil},
		{"invalid duplicate", []vocab.ACL{acl1(vocab.PermAll, "ip", "x"), acl1(vocab.PermAll, "ip", "x")}, nil, nil},

		{"perms 0 accepted", []vocab.ACL{acl1(0, "world", "anyone")}, nil, []vocab.ACL{acl1(0, "world", "anyone")}},
		{"perms beyond PermAll accepted", []vocab.ACL{acl1(-1, "world", "anyone")}, nil, []vocab.ACL{acl1(-1, "world", "anyone")}},
		{"perms high bit accepted", []vocab.ACL{acl1(1<<10, "digest", bobDigest)}, nil, []vocab.ACL{acl1(1<<10, "digest", bobDigest)}},
	}
	for _, tc := range tests {
		before := append([]vocab.ACL(nil), tc.acl...)
		got, err := FixupACL(tc.acl, tc.ids)
		if !slices.Equal(tc.acl, before) {
			t.Errorf("%s: FixupACL modified its input", tc.name)
		}
		if tc.want == nil {
			var e *vocab.Error
			if !errors.As(err, &e) || e.Code != vocab.InvalidACL || e.Op != "" || e.Path != "" {
				t.Errorf("%s: FixupACL(%v, %v) = %v, %v; want InvalidACL", tc.name, tc.acl, tc.ids, got, err)
			}
			if got != nil {
				t.Errorf("%s: FixupACL returned %v with its error", tc.name, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: FixupACL(%v, %v) = %v, %v; want %v", tc.name, tc.acl, tc.ids, got, err, tc.want)
		}
	}
}

func TestFixupACLLongList(t *testing.T) {
	// Past the pairwise threshold duplicates go through a set; the result
	// must be the same.
	var acl, want []vocab.ACL
	for i := range 40 {
		a := acl1(vocab.PermRead, "ip", fmt.Sprintf("10.0.0.%d", i%25))
		acl = append(acl, a)
		if i < 25 {
			want = append(want, a)
		}
	}
	got, err := FixupACL(acl, nil)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("FixupACL(40 entries) = %v, %v; want the first 25", got, err)
	}
	if got, err := FixupACL(acl[:25], nil); err != nil || &got[0] != &acl[0] {
		t.Errorf("FixupACL of an already fixed-up list should return it as is: %v, %v", got, err)
	}
}

func TestFixupACLOpenNoAlloc(t *testing.T) {
	ids := []vocab.Id{ipCaller, bob}
	allocs := testing.AllocsPerRun(100, func() {
		got, err := FixupACL(vocab.OpenACLUnsafe, ids)
		if err != nil || len(got) != 1 {
			t.Fatal("FixupACL(OpenACLUnsafe) failed")
		}
		if aclKey(got) != openACLKey {
			t.Fatal("aclKey(OpenACLUnsafe) is not openACLKey")
		}
	})
	if allocs != 0 {
		t.Errorf("FixupACL + aclKey of OpenACLUnsafe allocate %v times", allocs)
	}
}

func TestRedactACL(t *testing.T) {
	in := []vocab.ACL{
		acl1(vocab.PermRead, "world", "anyone"),
		acl1(vocab.PermAll, "digest", bobDigest),
		acl1(vocab.PermRead, "ip", "10.0.0.0/8"),
		acl1(vocab.PermWrite, "digest", "alice:abc:def"),
	}
	want := []vocab.ACL{
		acl1(vocab.PermRead, "world", "anyone"),
		acl1(vocab.PermAll, "digest", "bob:x"),
		acl1(vocab.PermRead, "ip", "10.0.0.0/8"),
		acl1(vocab.PermWrite, "digest", "alice:x"),
	}
	before := append([]vocab.ACL(nil), in...)
	got := RedactACL(in)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RedactACL = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(in, before) {
		t.Errorf("RedactACL modified its input")
	}
	if got := RedactACL(vocab.OpenACLUnsafe); &got[0] != &vocab.OpenACLUnsafe[0] {
		t.Errorf("RedactACL without digest entries should return its input")
	}
	if got := RedactACL(nil); got != nil {
		t.Errorf("RedactACL(nil) = %v", got)
	}
}

func TestRedactDigestID(t *testing.T) {
	// Java's id.replaceAll(":.*", ":x").
	tests := []struct{ id, want string }{
		{bobDigest, "bob:x"},
		{"a:b:c", "a:x"},
		{":x", ":x"},
		{"u:", "u:x"},
		{":", ":x"},
		{"nocolon", "nocolon"},
		{"", ""},
		{"a:b\nc:d", "a:x\nc:x"},
		{"a:b\r\nc:d", "a:x\r\nc:x"},
		{"a:b\rc", "a:x\rc"},
		{"u:h\u0085x:y", "u:x\u0085x:x"},
		{"u:h\u2028x:y", "u:x\u2028x:x"},
		{"u:h\u2029x", "u:x\u2029x"},
		{"u:h\u2027x:y", "u:x"}, // not a line terminator
		{"a\n:b", "a\n:x"},
		{"a:\n\n:b", "a:x\n\n:x"},
	}
	for _, tc := range tests {
		if got := redactDigestID(tc.id); got != tc.want {
			t.Errorf("redactDigestID(%q) = %q, want %q", tc.id, got, tc.want)
		}
	}
}

// decodeACLKey inverts aclKey; it exists to test that aclKey is injective.
func decodeACLKey(key string) ([]vocab.ACL, error) {
	tags := [...]string{"", "world", "digest", "ip", "auth", "super"}
	var out []vocab.ACL
	b := []byte(key)
	str := func() (string, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", errors.New("bad string length")
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, nil
	}
	for len(b) > 0 {
		p, k := binary.Uvarint(b)
		if k <= 0 || p > 0xffffffff {
			return nil, errors.New("bad perms")
		}
		b = b[k:]
		if len(b) == 0 || int(b[0]) >= len(tags) {
			return nil, errors.New("bad scheme tag")
		}
		a := vocab.ACL{Perms: vocab.Perm(int32(uint32(p))), ID: vocab.Id{Scheme: tags[b[0]]}}
		tag := b[0]
		b = b[1:]
		var err error
		if tag == 0 {
			if a.ID.Scheme, err = str(); err != nil {
				return nil, err
			}
			if schemeTag(a.ID.Scheme) != 0 {
				return nil, errors.New("tagged scheme spelled out")
			}
		}
		if a.ID.ID, err = str(); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func TestACLKey(t *testing.T) {
	lists := [][]vocab.ACL{
		nil,
		vocab.OpenACLUnsafe,
		vocab.ReadACLUnsafe,
		vocab.CreatorAllACL,
		{acl1(vocab.PermAll, "world", "anyone"), acl1(vocab.PermAll, "world", "anyone")},
		{acl1(vocab.PermAll, "digest", bobDigest)},
		{acl1(vocab.PermAll, "digest", bobDigest), acl1(vocab.PermRead, "world", "anyone")},
		{acl1(vocab.PermRead, "world", "anyone"), acl1(vocab.PermAll, "digest", bobDigest)},
		{acl1(vocab.PermAll, "x509", "CN=bob")},
		{acl1(vocab.PermAll, "x509C", "N=bob")},
		{acl1(vocab.PermAll, "", "")},
		{acl1(vocab.PermAll, "", ""), acl1(vocab.PermAll, "", "")},
		{acl1(0, "", "")},
		{acl1(-1, "world", "anyone")},
		{acl1(1<<31-1, "world", "anyone")},
		{acl1(-1<<31, "world", "anyone")},
		{acl1(vocab.PermAll, "ip", "10.0.0.0/8")},
		{acl1(vocab.PermAll, "ip", "10.0.0.0/8\x1f\x01\x06anyone")},
		{acl1(vocab.PermAll, "ip", "10.0.0.0/8"), acl1(vocab.PermAll, "world", "anyone")},
		{acl1(vocab.PermAll, "super", ""), acl1(vocab.PermAll, "auth", "")},
		{acl1(vocab.PermAll, "ip", strings.Repeat("x", 300))},
	}
	seen := map[string]int{}
	for i, acl := range lists {
		key := aclKey(acl)
		if j, dup := seen[key]; dup {
			t.Errorf("aclKey(%v) == aclKey(%v) = %q", acl, lists[j], key)
		}
		seen[key] = i
		if key != aclKey(append([]vocab.ACL(nil), acl...)) {
			t.Errorf("aclKey(%v) depends on the slice, not its contents", acl)
		}
		back, err := decodeACLKey(key)
		if err != nil || !reflect.DeepEqual(back, acl) && !(len(back) == 0 && len(acl) == 0) {
			t.Errorf("decodeACLKey(aclKey(%v)) = %v, %v", acl, back, err)
		}
	}
	if aclKey([]vocab.ACL{}) != "" {
		t.Errorf("aclKey of an empty list is not empty")
	}
	// The shortcut for OpenACLUnsafe must agree with the general encoding.
	general := aclKey([]vocab.ACL{acl1(vocab.PermAll, "world", "anyone"), acl1(vocab.PermAll, "world", "anyone")})
	if general != openACLKey+openACLKey {
		t.Errorf("general encoding of world:anyone = %q, want %q twice", general, openACLKey)
	}
}

func FuzzACLKey(f *testing.F) {
	f.Add(uint32(vocab.PermAll), "world", "anyone", uint32(vocab.PermRead), "digest", bobDigest, true)
	f.Add(uint32(0), "", "", uint32(0xffffffff), "x509", "\x00\xff", false)
	f.Add(uint32(31), "auth", "", uint32(31), "ip", "10.0.0.0/8", true)
	f.Fuzz(func(t *testing.T, p1 uint32, s1, id1 string, p2 uint32, s2, id2 string, two bool) {
		acl := []vocab.ACL{{Perms: vocab.Perm(int32(p1)), ID: vocab.Id{Scheme: s1, ID: id1}}}
		if two {
			acl = append(acl, vocab.ACL{Perms: vocab.Perm(int32(p2)), ID: vocab.Id{Scheme: s2, ID: id2}})
		}
		key := aclKey(acl)
		back, err := decodeACLKey(key)
		if err != nil || !reflect.DeepEqual(back, acl) {
			t.Fatalf("decodeACLKey(aclKey(%v)) = %v, %v", acl, back, err)
		}
	})
}

// FuzzIPACL checks that the IP parser never panics and that a valid entry
// matches its own address.
func FuzzIPACL(f *testing.F) {
	for _, tc := range ipValidCases {
		f.Add(tc.id, "10.1.2.3")
	}
	for _, tc := range ipMatchCases {
		f.Add(tc.acl, tc.caller)
	}
	f.Fuzz(func(t *testing.T, acl, caller string) {
		ipMatches(caller, acl)
		CheckACL([]vocab.ACL{acl1(vocab.PermRead, "ip", acl)}, vocab.PermRead, []vocab.Id{{Scheme: "ip", ID: caller}})
		if !validIPACL(acl) {
			if ipMatches(caller, acl) {
				t.Fatalf("invalid %q matched %q", acl, caller)
			}
			return
		}
		host, _, _ := strings.Cut(acl, "/")
		if !ipMatches(host, acl) {
			t.Fatalf("valid %q does not match its own address %q", acl, host)
		}
	})
}
