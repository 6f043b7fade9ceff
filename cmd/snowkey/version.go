package main

import (
	"runtime/debug"
)

// version is what `snowkey version` and `snowkey --version` print: the
// module version the binary was built from, as the go command recorded it
// in the binary's build information. `go install
// github.com/snowkeyhq/snowkey/cmd/snowkey@v0.1.0` records v0.1.0; a
// build in a clone records a pseudo-version made from its commit, or
// "(devel)" when it has no version control information.
func version(info *debug.BuildInfo, ok bool) string {
	v := "(devel)"
	if ok && info.Main.Version != "" {
		v = info.Main.Version
	}
	goVersion := ""
	if ok {
		goVersion = " " + info.GoVersion
	}
	return "snowkey " + v + goVersion + "\n"
}
