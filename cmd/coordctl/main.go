// Command coordctl is the operator's command line for coord: the znode
// commands of zkCli.sh and the cluster commands of etcdctl in one binary.
// It talks to coord over gRPC (any server; membership changes go to the
// leader) and to the ZooKeeper port only for four-letter words.
//
// Every command takes --servers (or COORD_SERVERS, or "servers" in the
// config file), --output text|json|table and --help. Errors are one line on
// standard error with a non-zero exit code that says what kind of failure
// it was (see exitCode and docs/coordctl.md).
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
