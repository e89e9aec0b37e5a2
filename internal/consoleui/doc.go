// Package consoleui holds the browser tests of coord's console (the UI under
// /ui/ on the HTTP port, server/console): Debian's Chromium, headless,
// driven with chromedp against a real three-server cluster started with
// `coord local`, as a person would use it. They sign in as different users
// and check that each sees only what its ACLs allow (and that the console's
// raw endpoints refuse the rest), create, edit and delete through the page
// and read the result back with a ZooKeeper client, see a conflicting edit
// refused and a node changed by another client update on the page, and watch
// the cluster view name a new leader after the leader is killed. They save
// screenshots of the main views (COORD_CONSOLE_SHOTS names the directory;
// docs/console.md shows them). docs/console.md tells how to run them.
//
// The package has only tests. They run with COORD_CONSOLE_BROWSER=1 (they
// skip without a Chromium) or =required (as .ci/run runs them, on their own:
// no Chromium is then a failure); without it they skip, so that `go test
// ./...` does not load the machine with browsers beside the other packages'
// timing tests.
package consoleui
