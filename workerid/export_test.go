package workerid

import (
	"fmt"
	"testing"
)

// defenceSwitches turn one of a pool's defences off each, by the name the
// tests and the chaos helper's CHAOS_CONTROL give it.
var defenceSwitches = map[string]func(d *defences){
	"start-floor":   func(d *defences) { d.noStartFloor = true },
	"release-clamp": func(d *defences) { d.noReleaseClamp = true },
	"own-token":     func(d *defences) { d.noOwnToken = true },
	"serial-retry":  func(d *defences) { d.noSerialRetry = true },
	"declared-keys": func(d *defences) { d.noDeclaredKeys = true },
	"floor":         func(d *defences) { d.noFloor = true },
	"loss-wait":     func(d *defences) { d.noLossWait = true },
	"until":         func(d *defences) { d.noUntil = true },
	"uptime-sign":   func(d *defences) { d.noUptimeSign = true },
	"promoted-sign": func(d *defences) { d.noPromotedSign = true },
	"flush-sign":    func(d *defences) { d.noFlushSign = true },
	"cluster-sign":  func(d *defences) { d.noClusterSign = true },
	"send-time":     func(d *defences) { d.noSendTime = true },
	"jitter":        func(d *defences) { d.noJitter = true },
	"server-time":   func(d *defences) { d.noServerTime = true },
	"backoff":       func(d *defences) { d.noBackoff = true },
}

// switchOff turns the named defences of p off, for a control run. Call it
// before the pool's first Acquire.
func switchOff(p *Pool, names ...string) error {
	for _, name := range names {
		off, ok := defenceSwitches[name]
		if !ok {
			return fmt.Errorf("no defence %q", name)
		}
		off(&p.defences)
	}
	return nil
}

// turnOff is switchOff in a test, which fails on an unknown name.
func turnOff(t testing.TB, p *Pool, names ...string) {
	t.Helper()
	if err := switchOff(p, names...); err != nil {
		t.Fatal(err)
	}
}
