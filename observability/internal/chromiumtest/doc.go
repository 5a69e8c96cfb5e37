// Package chromiumtest finds Chromium, Debian's package, for the tests
// that load the live view (github.com/fanout-go/fanout/debug) in a real,
// headless browser.
//
// The browser is fetched with apt-get download and unpacked with dpkg -x,
// with the libraries it needs that the machine lacks, by binary.sh
// (embedded in the package; `make e2e-binaries` at the repository root
// runs the same file) into the user's cache directory,
// os.UserCacheDir()/fanout-e2e/chromium: nothing is installed on the
// system. [Binary] runs the script when the browser is missing, so tests
// never skip for want of it; on a machine without apt-get and dpkg it
// returns the script's message.
package chromiumtest
