// Planted: a non-test file that declares something in a test-only package.
package compat

func Helper() {}
