package zkfront

import (
	"slices"
	"testing"
)

// fourLetterWordsAll are ZooKeeper 3.8's four-letter words (zk.IsFourLetterWord).
var fourLetterWordsAll = []string{"conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "ruok",
	"stmk", "srst", "srvr", "stat", "wchc", "wchp", "wchs", "mntr", "isro", "hash"}

// The whitelist as ZooKeeper 3.8's FourLetterCommands.isEnabled reads it:
// the words listed (trimmed; "*" for all), srvr always, isro in read-only
// mode.
func TestFourLetterAllowed(t *testing.T) {
	for _, tc := range []struct {
		words    []string
		readOnly bool
		allowed  []string
	}{
		{nil, false, []string{"srvr"}},
		{DefaultFourLetterWords(), false, []string{"srvr", "ruok"}},
		{DefaultFourLetterWords(), true, []string{"srvr", "ruok", "isro"}},
		{[]string{"mntr"}, false, []string{"srvr", "mntr"}},
		{[]string{" stat", "cons "}, false, []string{"srvr", "stat", "cons"}},
		{[]string{"*"}, false, fourLetterWordsAll},
		{[]string{"ruok", "*"}, false, fourLetterWordsAll},
	} {
		for _, w := range fourLetterWordsAll {
			if got, want := fourLetterAllowed(tc.words, tc.readOnly, w), slices.Contains(tc.allowed, w); got != want {
				t.Errorf("whitelist %q, read-only %v: %s allowed %v, want %v", tc.words, tc.readOnly, w, got, want)
			}
		}
	}
}
