package fsm

import (
	"coord/vocab"
	"encoding/binary"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ACLs, as ZooKeeper 3.9 evaluates them with its built-in authentication
// providers ("ip" and "digest"; "world" and "auth" are handled by the server
// itself and "super" is the identity the digest provider grants to the
// configured super user).
//
// Everything here is a pure function of its arguments. Caller identities
// ([]Id) are the session's authenticated ids in the order the session gained
// them (its "ip" id first, then each id as authentication gave it). ZooKeeper
// keeps them in a hash set; FixupACL expands "auth" in that set's iteration
// order, computed from this order (see zkAuthOrder).

const (
	schemeWorld  = "world"
	schemeAuth   = "auth"
	schemeDigest = "digest"
	schemeIP     = "ip"
	schemeSASL   = "sasl"
	schemeX509   = "x509"
	schemeSuper  = "super"
	idAnyone     = "anyone"
)

// IsOpenACL reports whether acl is exactly OpenACLUnsafe: one entry granting
// PermAll to world:anyone.
func IsOpenACL(acl []vocab.ACL) bool {
	return len(acl) == 1 && acl[0].Perms == vocab.PermAll &&
		acl[0].ID.Scheme == schemeWorld && acl[0].ID.ID == idAnyone
}

// CheckACL reports whether a caller holding ids may perform an operation
// needing perm on a node with acl (ZooKeeperServer.checkACL):
//
//   - an empty acl allows everything;
//   - a caller holding any id with scheme "super" is allowed everything;
//   - otherwise some entry must share a bit with perm (perm is usually one
//     bit; with several bits any one suffices, as ZooKeeper's getACL asks for
//     READ|ADMIN) and match the caller: world:anyone matches everyone, an "ip"
//     entry matches a caller "ip" id whose address lies in the entry's
//     address/prefix, and "digest" and any other scheme match a caller id
//     with the same scheme and the same id string. "world" entries other than
//     anyone and "auth" entries never match (ZooKeeper has no provider for
//     them).
//
// A perm of 0 is never granted by a non-empty acl except to super. The
// common case (world:anyone) neither allocates nor looks at ids.
func CheckACL(acl []vocab.ACL, perm vocab.Perm, ids []vocab.Id) bool {
	if len(acl) == 0 {
		return true
	}
	for i := range acl {
		a := &acl[i]
		if a.Perms&perm != 0 && a.ID.Scheme == schemeWorld && a.ID.ID == idAnyone {
			return true
		}
	}
	for i := range ids {
		if ids[i].Scheme == schemeSuper {
			return true
		}
	}
	for i := range acl {
		a := &acl[i]
		if a.Perms&perm == 0 {
			continue
		}
		switch a.ID.Scheme {
		case schemeWorld, schemeAuth:
			continue
		}
		for j := range ids {
			if ids[j].Scheme == a.ID.Scheme && idMatches(a.ID.Scheme, ids[j].ID, a.ID.ID) {
				return true
			}
		}
	}
	return false
}

// idMatches applies the provider of scheme to a caller id and an ACL id.
func idMatches(scheme, callerID, aclID string) bool {
	if scheme == schemeIP {
		return ipMatches(callerID, aclID)
	}
	return callerID == aclID
}

// ParseAuthDigest turns the payload of a "digest" auth packet (the bytes
// "user:password") into the caller's identity Id{"digest", "user:hash"}.
// ZooKeeper accepts any payload: without a ':' the whole payload is the user
// name and the hash covers it alone. The one refusal is a payload that is
// not valid UTF-8, which fails with an *Error of Code AuthFailed: ZooKeeper
// would hash a lossy, JVM-dependent decoding of it, which coord cannot
// reproduce. Whether the caller is also the super user (its id equals the
// configured super digest) is for the caller to decide; ZooKeeper then adds
// Id{"super", ""} as well.
func ParseAuthDigest(auth string) (vocab.Id, error) {
	if !utf8.ValidString(auth) {
		return vocab.Id{}, errf(vocab.AuthFailed, "", "")
	}
	return vocab.Id{Scheme: schemeDigest, ID: vocab.Digest(auth)}, nil
}

// FixupACL validates the ACL of a create or setACL request and expands it
// into the list stored on the node (PrepRequestProcessor.fixupACL):
//
//   - duplicate entries (same perms, scheme and id) are dropped, the first
//     occurrence kept in place;
//   - an empty list is invalid;
//   - "world" is valid only with id "anyone";
//   - "auth" is replaced, in place and with its perms, by every
//     authenticated caller id, in the order ZooKeeper iterates the
//     connection's id set (zkAuthOrder of ids; not the order of ids). Only
//     "digest" ids count as authenticated ("ip" ids are not, and ZooKeeper
//     has no provider for "super", so it skips those); with none, the entry
//     is invalid. The expansion is not deduplicated again, as in ZooKeeper,
//     so "auth" next to an equal explicit "digest" entry stores it twice;
//   - otherwise the list keeps the client's order: it is never sorted;
//   - "digest" ids must split on ':' into exactly two parts the way Java's
//     String.split does (trailing empty parts dropped), so "u:h", ":h" and
//     "u:h:" are valid while "u", "u:" and "u:h:x" are not;
//   - "ip" ids must be an IPv4 or IPv6 address with an optional "/prefix"
//     (see IPAuthenticationProvider.isValid);
//   - any other scheme is invalid.
//
// Perms are not checked: ZooKeeper stores any 32-bit value, including 0 and
// bits outside PermAll, and so does coord.
//
// An invalid list gives an *Error with Code InvalidACL and neither Op nor
// Path; the caller fills them in. When acl needs no change the result is acl
// itself, not a copy.
func FixupACL(acl []vocab.ACL, ids []vocab.Id) ([]vocab.ACL, error) {
	if IsOpenACL(acl) {
		return acl, nil
	}
	if len(acl) == 0 {
		return nil, errf(vocab.InvalidACL, "", "")
	}
	dup := duplicates(acl)
	changed := dup != nil
	for i := range acl {
		if dup != nil && dup[i] {
			continue
		}
		a := &acl[i]
		switch a.ID.Scheme {
		case schemeWorld:
			if a.ID.ID != idAnyone {
				return nil, errf(vocab.InvalidACL, "", "")
			}
		case schemeAuth:
			if !hasAuthenticated(ids) {
				return nil, errf(vocab.InvalidACL, "", "")
			}
			changed = true
		case schemeDigest:
			if !validDigestID(a.ID.ID) {
				return nil, errf(vocab.InvalidACL, "", "")
			}
		case schemeIP:
			if !validIPACL(a.ID.ID) {
				return nil, errf(vocab.InvalidACL, "", "")
			}
		case schemeSASL, schemeX509:
			// The identity of a SASL login or of a TLS client
			// certificate's subject (ZooKeeper with its SASL or x509
			// provider; coord always has both, so the answer never depends
			// on a server's settings).
			if a.ID.ID == "" {
				return nil, errf(vocab.InvalidACL, "", "")
			}
		default:
			return nil, errf(vocab.InvalidACL, "", "")
		}
	}
	if !changed {
		return acl, nil
	}
	out := make([]vocab.ACL, 0, len(acl))
	var authIDs []vocab.Id
	for i := range acl {
		if dup != nil && dup[i] {
			continue
		}
		if acl[i].ID.Scheme != schemeAuth {
			out = append(out, acl[i])
			continue
		}
		if authIDs == nil {
			authIDs = zkAuthOrder(ids)
		}
		for _, id := range authIDs {
			if authenticatedScheme(id.Scheme) {
				out = append(out, vocab.ACL{Perms: acl[i].Perms, ID: id})
			}
		}
	}
	return out, nil
}

// duplicates marks every entry equal to an earlier one; nil when there are
// none. Short lists are compared pairwise, long ones through a set, so a
// request with a huge ACL cannot make apply quadratic.
func duplicates(acl []vocab.ACL) []bool {
	var dup []bool
	mark := func(i int) {
		if dup == nil {
			dup = make([]bool, len(acl))
		}
		dup[i] = true
	}
	if len(acl) <= 16 {
		for i := 1; i < len(acl); i++ {
			for j := 0; j < i; j++ {
				if acl[i] == acl[j] {
					mark(i)
					break
				}
			}
		}
		return dup
	}
	seen := make(map[vocab.ACL]struct{}, len(acl))
	for i, a := range acl {
		if _, ok := seen[a]; ok {
			mark(i)
			continue
		}
		seen[a] = struct{}{}
	}
	return dup
}

// authenticatedScheme reports whether an id of scheme proves who the caller
// is (AuthenticationProvider.isAuthenticated of the registered providers).
func authenticatedScheme(scheme string) bool { return scheme == schemeDigest }

func hasAuthenticated(ids []vocab.Id) bool {
	for i := range ids {
		if authenticatedScheme(ids[i].Scheme) {
			return true
		}
	}
	return false
}

// validDigestID is DigestAuthenticationProvider.isValid: id.split(":") has
// exactly two elements. Java drops trailing empty strings from the split and
// yields [""] for "", so trailing ':'s do not count and the part before the
// single remaining ':' may be empty.
func validDigestID(id string) bool {
	trimmed := strings.TrimRight(id, ":")
	return strings.Count(trimmed, ":") == 1
}

// RedactACL returns acl as ZooKeeper's getACL shows it to a caller without
// ADMIN permission on the node: in every "digest" entry everything after the
// first ':' becomes "x" ("user:hash" -> "user:x"). Other entries are kept.
// When there is no digest entry the result is acl itself, not a copy.
func RedactACL(acl []vocab.ACL) []vocab.ACL {
	i := 0
	for i < len(acl) && acl[i].ID.Scheme != schemeDigest {
		i++
	}
	if i == len(acl) {
		return acl
	}
	out := make([]vocab.ACL, len(acl))
	copy(out, acl)
	for ; i < len(out); i++ {
		if out[i].ID.Scheme == schemeDigest {
			out[i].ID.ID = redactDigestID(out[i].ID.ID)
		}
	}
	return out
}

// redactDigestID is Java's id.replaceAll(":.*", ":x"). Java's '.' stops at a
// line terminator, so an id with a line break has each line redacted
// separately ("a:b\nc:d" -> "a:x\nc:x"); real digest ids have none.
func redactDigestID(id string) string {
	i := strings.IndexByte(id, ':')
	if i < 0 {
		return id
	}
	var b strings.Builder
	b.Grow(i + 2)
	for i >= 0 {
		b.WriteString(id[:i])
		b.WriteString(":x")
		id = id[i+1:]
		j := indexLineTerminator(id)
		if j < 0 {
			return b.String()
		}
		id = id[j:]
		i = strings.IndexByte(id, ':')
	}
	b.WriteString(id)
	return b.String()
}

// indexLineTerminator finds the first character that java.util.regex's '.'
// does not match: \n, \r, U+0085, U+2028 or U+2029.
func indexLineTerminator(s string) int {
	for i, r := range s {
		switch r {
		case '\n', '\r', 0x85, 0x2028, 0x2029:
			return i
		}
	}
	return -1
}

// aclKey encodes an ACL list as a compact byte string that is deterministic
// and injective (two lists get the same key exactly when they are equal,
// entry by entry and in order), for interning ACL lists. nil and the empty
// list both encode as "". Each entry is uvarint(uint32(perms)), a scheme tag
// byte (1 world, 2 digest, 3 ip, 4 auth, 5 super; 0 is followed by
// uvarint(len)+bytes of any other scheme), then uvarint(len)+bytes of the id.
// OpenACLUnsafe encodes as openACLKey without allocating.
func aclKey(acl []vocab.ACL) string {
	if IsOpenACL(acl) {
		return openACLKey
	}
	if len(acl) == 0 {
		return ""
	}
	n := 0
	for i := range acl {
		n += binary.MaxVarintLen32 + 1 + binary.MaxVarintLen32 + len(acl[i].ID.ID)
		if schemeTag(acl[i].ID.Scheme) == 0 {
			n += binary.MaxVarintLen32 + len(acl[i].ID.Scheme)
		}
	}
	var b strings.Builder
	b.Grow(n)
	var tmp [binary.MaxVarintLen64]byte
	for i := range acl {
		a := &acl[i]
		b.Write(tmp[:binary.PutUvarint(tmp[:], uint64(uint32(a.Perms)))])
		tag := schemeTag(a.ID.Scheme)
		b.WriteByte(tag)
		if tag == 0 {
			b.Write(tmp[:binary.PutUvarint(tmp[:], uint64(len(a.ID.Scheme)))])
			b.WriteString(a.ID.Scheme)
		}
		b.Write(tmp[:binary.PutUvarint(tmp[:], uint64(len(a.ID.ID)))])
		b.WriteString(a.ID.ID)
	}
	return b.String()
}

// openACLKey is aclKey(OpenACLUnsafe): perms 0x1f, tag 1, "anyone".
const openACLKey = "\x1f\x01\x06anyone"

func schemeTag(scheme string) byte {
	switch scheme {
	case schemeWorld:
		return 1
	case schemeDigest:
		return 2
	case schemeIP:
		return 3
	case schemeAuth:
		return 4
	case schemeSuper:
		return 5
	}
	return 0
}

// IP addresses, parsed as IPAuthenticationProvider (ZooKeeper 3.9.5+, which
// added IPv6) parses them. Its rules are looser than the usual ones, and
// coord keeps them so the same ACLs are valid and match the same callers:
//
//   - a string containing ':' is IPv6, otherwise one containing '.' is IPv4,
//     anything else is no address;
//   - IPv4 is exactly four '.'-separated numbers in [0, 255], each parsed by
//     Java's Integer.parseInt: an optional '+' or '-' sign, leading zeros
//     ("010" is ten, not octal), and any Unicode decimal digit of the BMP;
//   - IPv6 has at most one "::", which must stand for at least one group,
//     and otherwise exactly eight groups; a group is 1-4 characters parsed
//     by Integer.parseInt(g, 16) and keeps its low 16 bits, so "-1" is
//     ffff. Embedded IPv4 ("::ffff:1.2.3.4") and zones ("%eth0") are not
//     accepted;
//   - a prefix "/n" is a decimal (parseInt again) in [0, 32] or [0, 128].
//
// An IPv4 caller never matches an IPv6 entry or the reverse, so a server
// should give the caller's address in its natural form (IPv4-mapped IPv6
// addresses unmapped, no zone), as Java's getHostAddress does.

// ipAddr is a parsed address: n is 4 or 16.
type ipAddr struct {
	b [16]byte
	n int
}

// validIPACL is IPAuthenticationProvider.isValid.
func validIPACL(id string) bool {
	_, _, ok := parseIPACL(id)
	return ok
}

// parseIPACL parses "address" or "address/prefix".
func parseIPACL(id string) (addr ipAddr, bits int, ok bool) {
	host, prefix, hasPrefix := strings.Cut(id, "/")
	addr, ok = parseIP(host)
	if !ok {
		return addr, 0, false
	}
	bits = addr.n * 8
	if hasPrefix {
		v, ok := javaParseInt(prefix, 10)
		if !ok || v < 0 || v > addr.n*8 {
			return addr, 0, false
		}
		bits = v
	}
	return addr, bits, true
}

// ipMatches is IPAuthenticationProvider.matches: the caller's address and the
// ACL's address agree on the ACL's prefix (the whole address without one).
func ipMatches(callerID, aclID string) bool {
	acl, bits, ok := parseIPACL(aclID)
	if !ok {
		return false
	}
	caller, ok := parseIP(callerID)
	if !ok || caller.n != acl.n {
		return false
	}
	full := bits / 8
	if string(acl.b[:full]) != string(caller.b[:full]) {
		return false
	}
	if rem := bits % 8; rem != 0 {
		mask := byte(0xff) << (8 - rem)
		return acl.b[full]&mask == caller.b[full]&mask
	}
	return true
}

func parseIP(s string) (ipAddr, bool) {
	if strings.IndexByte(s, ':') >= 0 {
		return parseIPv6(s)
	}
	if strings.IndexByte(s, '.') >= 0 {
		return parseIPv4(s)
	}
	return ipAddr{}, false
}

func parseIPv4(s string) (ipAddr, bool) {
	a := ipAddr{n: 4}
	for k := range 4 {
		part := s
		if k < 3 {
			i := strings.IndexByte(s, '.')
			if i < 0 {
				return a, false
			}
			part, s = s[:i], s[i+1:]
		} else if strings.IndexByte(s, '.') >= 0 {
			return a, false
		}
		v, ok := javaParseInt(part, 10)
		if !ok || v < 0 || v > 255 {
			return a, false
		}
		a.b[k] = byte(v)
	}
	return a, true
}

func parseIPv6(s string) (ipAddr, bool) {
	a := ipAddr{n: 16}
	i := strings.Index(s, "::")
	if i < 0 {
		if strings.Count(s, ":") != 7 {
			return a, false
		}
		return a, parseIPv6Groups(&a.b, 0, s)
	}
	head, tail := s[:i], s[i+2:]
	if strings.Contains(tail, "::") {
		return a, false
	}
	n1, n2 := ipv6GroupCount(head), ipv6GroupCount(tail)
	if n1+n2 >= 8 {
		return a, false
	}
	if n1 > 0 && !parseIPv6Groups(&a.b, 0, head) {
		return a, false
	}
	if n2 > 0 && !parseIPv6Groups(&a.b, 16-2*n2, tail) {
		return a, false
	}
	return a, true
}

// ipv6GroupCount counts the ':'-separated groups of one side of "::"; an
// empty side has none.
func ipv6GroupCount(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(s, ":") + 1
}

// parseIPv6Groups stores the ':'-separated groups of s from b[off].
func parseIPv6Groups(b *[16]byte, off int, s string) bool {
	for {
		g, rest, more := strings.Cut(s, ":")
		// Java limits the group to 4 UTF-16 units; any rune needing two
		// fails parseInt anyway, so counting runes is the same test.
		if utf8.RuneCountInString(g) > 4 {
			return false
		}
		v, ok := javaParseInt(g, 16)
		if !ok {
			return false
		}
		b[off], b[off+1] = byte(v>>8), byte(v)
		off += 2
		if !more {
			return true
		}
		s = rest
	}
}

// javaParseInt is java.lang.Integer.parseInt(s, radix) for radix 10 or 16:
// an optional sign, then at least one digit as Character.digit sees them
// (BMP Unicode decimal digits, ASCII and fullwidth Latin letters for 16);
// values outside int32 fail.
func javaParseInt(s string, radix int) (int, bool) {
	if s == "" {
		return 0, false
	}
	neg := false
	switch s[0] {
	case '-':
		neg = true
		s = s[1:]
	case '+':
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	var v int64
	for _, r := range s {
		d := javaDigit(r, radix)
		if d < 0 {
			return 0, false
		}
		v = v*int64(radix) + int64(d)
		if v > -math.MinInt32 {
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	if v > math.MaxInt32 {
		return 0, false
	}
	return int(v), true
}

// javaDigit is Character.digit(char, radix): the value of r as a digit in
// radix, or -1.
func javaDigit(r rune, radix int) int {
	d := -1
	switch {
	case '0' <= r && r <= '9':
		d = int(r - '0')
	case 'a' <= r && r <= 'z':
		d = int(r-'a') + 10
	case 'A' <= r && r <= 'Z':
		d = int(r-'A') + 10
	case 0xff21 <= r && r <= 0xff3a: // fullwidth A-Z
		d = int(r-0xff21) + 10
	case 0xff41 <= r && r <= 0xff5a: // fullwidth a-z
		d = int(r-0xff41) + 10
	case r < utf8.RuneSelf || r > 0xffff:
		// Other ASCII is no digit; Java reads UTF-16 units, and neither
		// half of a surrogate pair is a digit.
	case unicode.Is(unicode.Nd, r):
		// Unicode assigns decimal digits in runs of ten, 0 to 9.
		z := r
		for unicode.Is(unicode.Nd, z-1) {
			z--
		}
		d = int(r-z) % 10
	}
	if d >= radix {
		return -1
	}
	return d
}
