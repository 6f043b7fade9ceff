// Package bench compares snowkey with other libraries in one process, so
// that the ratios `make bench` prints come from runs side by side on the
// same machine at the same time. It is a module of its own so that the
// libraries it compares against stay out of snowkey's go.mod.
package bench
