// Not planted: a test-only package may have a doc.go with only its comment.
package compat
