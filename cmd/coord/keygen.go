package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strings"

	"coord/server"
	"coord/vocab"
)

// runKeygen is `coord keygen [-o FILE]`: it writes a new cluster key (the
// secret every member proves on the peer plane; give each server the same
// file with -cluster-key-file) to FILE, mode 0600, or to standard output.
// It never overwrites a file.
func runKeygen(args []string) int {
	fset := flag.NewFlagSet("coord keygen", flag.ContinueOnError)
	out := fset.String("o", "", "write the key to this file (mode 0600; refused if it exists) instead of standard output")
	if err := fset.Parse(args); err != nil {
		return 2
	}
	key, err := server.GenerateClusterKey()
	if err != nil {
		fmt.Fprintln(os.Stderr, "coord keygen:", err)
		return 1
	}
	if *out == "" {
		os.Stdout.Write(key)
		return 0
	}
	if err := writeKeyFile(*out, key); err != nil {
		fmt.Fprintln(os.Stderr, "coord keygen:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "coord keygen: wrote %s: give every server of the cluster -cluster-key-file %s\n", *out, *out)
	return 0
}

// writeKeyFile creates path with key, mode 0600, refusing an existing file.
func writeKeyFile(path string, key []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists; keeping it", path)
		}
		return err
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ensureKeyFile returns path, writing a new key there first if there is no
// file yet (coord local's one key for all its servers).
func ensureKeyFile(path string) error {
	if _, err := os.Stat(path); err == nil {
		_, err = server.ReadClusterKey(path)
		return err
	}
	key, err := server.GenerateClusterKey()
	if err != nil {
		return err
	}
	return writeKeyFile(path, key)
}

// runDigest is `coord digest USER:PASSWORD`: it prints the digest id
// ZooKeeper's DigestAuthenticationProvider makes of it (user:base64-sha1),
// the value -super-digest takes.
func runDigest(args []string) int {
	user, password, ok := "", "", len(args) == 1
	if ok {
		user, password, ok = strings.Cut(args[0], ":")
	}
	if !ok || user == "" {
		fmt.Fprintln(os.Stderr, "usage: coord digest USER:PASSWORD")
		return 2
	}
	fmt.Println(vocab.DigestID(user, password))
	return 0
}

// runVersion is `coord version`: the ZooKeeper version coord reports (srvr,
// stat, mntr) and the build's module version and VCS revision, if known.
func runVersion() int {
	fmt.Printf("coord speaking ZooKeeper %s\n", server.Version)
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", ""
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				rev = st.Value
			case "vcs.modified":
				if st.Value == "true" {
					dirty = " (modified)"
				}
			}
		}
		fmt.Printf("module %s %s, %s", bi.Main.Path, bi.Main.Version, bi.GoVersion)
		if rev != "" {
			fmt.Printf(", revision %s%s", rev, dirty)
		}
		fmt.Println()
	}
	return 0
}
