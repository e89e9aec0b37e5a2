// A synthetic module with planted layering violations, read by
// TestLayeringCatchesPlanted in deps_test.go. It is never built.
module coord

go 1.26.0
