package main

import "context"

// openWithout is Open with the defences in d switched off, for the control
// runs that must find the violation each defence prevents: the only way
// the tests turn a defence off.
func openWithout(ctx context.Context, cfg Config, d defences) (*App, error) {
	return open(ctx, cfg, d)
}
