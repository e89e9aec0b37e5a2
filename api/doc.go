// Package api holds coord's protobuf messages and gRPC services, generated
// from coord.proto, and (vocab.go) the one mapping of its Stat and ACL
// records to and from the shared vocabulary's types, which the server's
// front ends and the client both use, and (admin.go) the metadata key an
// Admin call carries the superuser's credential under. It has no other
// logic. The generated files are checked in so that a build needs neither
// protoc nor its plugins.
//
// To regenerate (Debian's protobuf-compiler, and the plugins from
// `go install google.golang.org/protobuf/cmd/protoc-gen-go@latest` and
// `go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@latest`):
//
//	go generate ./api
package api

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative coord.proto
