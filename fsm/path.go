package fsm

import (
	"coord/vocab"
	"strings"
	"unicode/utf8"
)

// Znode paths.
//
// A path is valid exactly when ZooKeeper's PathUtils.validatePath accepts it:
// it starts with '/', is "/" or does not end with '/', has no empty, "." or
// ".." segment, and contains none of U+0000-U+001F, U+007F-U+009F,
// U+D800-U+F8FF or U+FFF0-U+FFFF.
//
// ZooKeeper checks UTF-16 code units, so every character outside the Basic
// Multilingual Plane (a surrogate pair) is rejected as well, and so is the
// private use area. coord's paths are UTF-8 bytes; a byte sequence that is
// not valid UTF-8 is rejected. That is also what ZooKeeper does with such
// bytes in practice: its wire decoder turns them into U+FFFD, which lies in
// the rejected range U+FFF0-U+FFFF.

// ValidatePath reports whether path is a valid znode path, returning an
// *Error with Code BadArguments and the offending path (and no Op) if not.
func ValidatePath(path string) error {
	if !validPath(path, false) {
		return errf(vocab.BadArguments, "", path)
	}
	return nil
}

// ValidateCreatePath validates the path of a create request. When sequential
// is set the server appends a numeric suffix, so path is checked as if it
// ended in one more digit (PathUtils.validatePath(path, isSequential)): "/a/"
// is a valid sequential prefix that names children "/a/0000000001", ...
// The error carries path as given, without the digit.
func ValidateCreatePath(path string, sequential bool) error {
	if !validPath(path, sequential) {
		return errf(vocab.BadArguments, "", path)
	}
	return nil
}

// validPath implements both checks without allocating. With sequential set it
// validates path+"1": the extra digit makes the last segment non-empty and
// neither "." nor "..", so only the segments before the last '/' are
// checked for shape, while every character is checked as usual.
func validPath(path string, sequential bool) bool {
	if len(path) == 0 || path[0] != '/' {
		return false
	}
	if len(path) == 1 {
		return true // "/" and, when sequential, "/1"
	}
	start := 1 // first byte of the current segment
	for i := 1; i < len(path); {
		c := path[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '/':
				if !validSegment(path[start:i]) {
					return false
				}
				start = i + 1
			case c < 0x20 || c == 0x7f:
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(path[i:])
		if !validPathRune(r) {
			return false
		}
		i += n
	}
	return sequential || validSegment(path[start:])
}

// validSegment reports whether a single path segment is acceptable in shape.
func validSegment(s string) bool {
	return s != "" && s != "." && s != ".."
}

// validPathRune reports whether a non-ASCII rune may appear in a path.
// utf8.RuneError (invalid UTF-8) falls in the rejected U+FFF0-U+FFFF range.
func validPathRune(r rune) bool {
	switch {
	case r >= 0x7f && r <= 0x9f:
		return false
	case r >= 0xd800 && r <= 0xf8ff:
		return false
	case r >= 0xfff0: // includes U+FFFD and everything beyond the BMP
		return false
	}
	return true
}

// ParentAndName splits a valid path into its parent and its last segment:
// "/a" gives ("/", "a"), "/a/b" gives ("/a", "b"). The root has no parent:
// "/" gives ("", ""). The result for an invalid path is unspecified (but
// ParentAndName never panics).
func ParentAndName(path string) (parent, name string) {
	i := strings.LastIndexByte(path, '/')
	switch {
	case i < 0 || path == "/":
		return "", ""
	case i == 0:
		return "/", path[1:]
	}
	return path[:i], path[i+1:]
}
