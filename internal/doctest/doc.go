// Package doctest holds only tests: it runs the command blocks of README.md,
// docs/running.md, docs/coordctl.md, docs/deploy.md and docs/console.md as
// scripts, with the output the pages show, so a changed flag or output fails
// a test instead of a newcomer.
//
// Each page becomes one testscript (github.com/rogpeppe/go-internal, the
// runner of the go command's own CLI tests) that runs in a fresh directory,
// in a network namespace of its own where the machine allows it (root), so
// the pages' fixed ports (2181, 2182, 8080, ...) never meet another test's.
// The coord and coordctl binaries are built once from this checkout.
//
// What runs, from a page:
//   - a fenced block whose lines start with "$ " is a transcript: each
//     command runs with bash, and its standard output and error together
//     must match the lines that follow it, up to the next "$ " line; a last
//     line "[exit N]" is the exit code it must end with (else 0);
//   - a fenced block marked sh (or bash) without "$ " lines is a list of
//     commands, each of which must exit 0; a line that only sets shell
//     variables (P='...') sets them for every later command of the page;
//   - a command that starts a server (coord with no command word, or coord
//     local) runs in the background, and the next command waits until every
//     server started so far answers coord health (one ended with "&", such
//     as a server that is healthy only once it is added, is not waited for);
//   - an HTML comment "<!-- doc: skip REASON -->" just before a block skips
//     it (the reason is logged); "<!-- doc: stop -->" stops the servers
//     started so far (the reader's Ctrl-C before the page's next way to run
//     them); "<!-- doc:" ... "-->" over several lines is a
//     block the reader does not see, run like a visible one (set-up such as
//     the servers a page's outputs came from).
//
// The few rewrites, each what the reader's command does here: "go run
// ./cmd/NAME" runs the binary NAME built from this checkout, "go build -o
// NAME ./cmd/NAME" copies it, and "go test" lines are not run (they are this
// test).
//
// The lines of an output are compared after the same normalization of both
// sides: runs of blanks become one (tables), and values that differ from run
// to run become placeholders: dates and times, zxids and session ids (hex of
// six digits or more, decimals of ten or more), SHA-256 digests (a state's
// digest holds its times), durations, sizes in kB or more and counts of bytes. In a page, "..." inside a line matches any text, and a line that is
// only "..." matches any number of lines.
package doctest
