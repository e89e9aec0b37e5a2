package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

// The -config file is a JSON object whose keys are the server's flag names
// without the dash ("data-dir"; "data_dir", as earlier versions spelt the
// keys, also works), so that every flag can be set there and the two
// cannot drift apart: the FlagSet is the one table of both. A value is a
// JSON string, number or boolean, read as the flag would read it ("" turns
// off what -flag "" turns off, as "gossip-addr": ""); the flags that take a
// list also take an array. Flags given on the command line win. A key that
// names no flag is an error that names the nearest flag.

// listSeparators are the separators of the flags that take a list, which
// the file may also give as a JSON array.
var listSeparators = map[string]string{"peers": ";", "join": ",", "4lw-whitelist": ",", "admin-x509": ";"}

// applyConfigFile sets, from the file -config names (if any), every flag
// the command line did not set.
func applyConfigFile(fs *flag.FlagSet) error {
	path := fs.Lookup("config").Value.String()
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var settings map[string]json.RawMessage
	if err := json.Unmarshal(b, &settings); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	keyOf := map[string]string{} // flag name → the key that set it
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first error is the same on every run
	for _, key := range keys {
		name := strings.ReplaceAll(key, "_", "-")
		f := fs.Lookup(name)
		switch {
		case f == nil:
			if near := nearestFlag(fs, name); near != "" {
				return fmt.Errorf("config file %s: unknown key %q (did you mean %q?)", path, key, near)
			}
			return fmt.Errorf("config file %s: unknown key %q", path, key)
		case name == "config":
			return fmt.Errorf("config file %s: key %q: a config file cannot name another", path, key)
		case keyOf[name] != "":
			return fmt.Errorf("config file %s: keys %q and %q both set -%s", path, keyOf[name], key, name)
		}
		keyOf[name] = key
		if given[name] {
			continue
		}
		v, err := flagText(name, settings[key])
		if err == nil {
			if err = fs.Set(name, v); err != nil {
				err = fmt.Errorf("invalid value %q for -%s: %w", v, name, err)
			}
		}
		if err != nil {
			return fmt.Errorf("config file %s: key %q: %w", path, key, err)
		}
	}
	return nil
}

// flagText is a JSON value as the flag's command-line text.
func flagText(name string, raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return fmt.Sprint(v), nil
	case json.Number:
		return v.String(), nil
	case []any:
		sep, ok := listSeparators[name]
		if !ok {
			return "", fmt.Errorf("-%s takes one value, not a list", name)
		}
		items := make([]string, len(v))
		for i, item := range v {
			s, ok := item.(string)
			if !ok {
				return "", fmt.Errorf("want a list of strings, got %s", raw)
			}
			items[i] = s
		}
		return strings.Join(items, sep), nil
	}
	return "", fmt.Errorf("want a string, number, boolean or list, got %s", raw)
}

// nearestFlag is the flag name closest to name by edit distance, if one
// is close enough to be a misspelling of it ("" if none is).
func nearestFlag(fs *flag.FlagSet, name string) string {
	best, bestDist := "", max(2, len(name)/3)+1
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
