// Package chaos runs snowkey's fault-injection scenarios: it breaks the
// path between real processes and real servers in the ways real networks
// and deployments do, and checks snowkey's two promises from what the
// processes recorded, not from hand-picked asserts:
//
//   - an ID is never issued twice;
//   - a revoked session never validates again (on the Manager that revoked
//     it at once, on any other once its CacheTTL has passed).
//
// This package holds the scenario and its verdict:
//
//   - Scenario and Run: a fault kind on one store, against one defence,
//     run with the defence switched off (the control side) and on (the
//     defended side); every run records whether it met its fault, and
//     Scenario.Run judges both sides and writes the Row of the chaos table
//     (`make chaos` prints it with command chaosreport).
//   - Seeds and budgets: every run's rng is seeded, so the machinery's
//     choices (which replies drop, the schedule) replay, and every failure
//     prints the CHAOS_SEED that replays it (CHAOS_SEED with CI=true
//     fails: a replay is done by hand); Budget is the time a package's
//     chaos tests may take (short in `make test`, CHAOS_TIME in `make
//     chaos`).
//
// Its tools stand beside it, one concern each: package faultproxy (a TCP
// proxy that cuts, freezes, delays, retargets and drops replies), package
// helper (this test binary run again as a process to kill and stop),
// package history (recorded token operations and ID files, and the
// checkers of both promises). Servers come from package testenv.
//
// # Writing a chaos scenario
//
// A scenario is a test named TestChaos… (`make chaos` runs every test so
// named, with CHAOS_TIME and CHAOS_REPORT set) that gives one fault kind,
// one store and one defence to Scenario.Run, with a function for one run.
// The run injects the fault, switches the defence off when r.Control,
// and records three things:
//
//   - r.Met, once it has observed its fault happen: a reply the proxy
//     dropped (Proxy.Stats), a key the server evicted, a replica promoted
//     behind its primary, a slot that moved while a revocation ran. Not
//     "the fault was injected": the observation that it took effect
//     where the defence matters. A run that did not meet its fault is not
//     evidence either way.
//   - r.Violation, for every breach the checks found (an ID issued twice,
//     a revoked session that validated). On the defended side each one
//     fails the run.
//   - r.CountIDs, r.CountTokens and r.CountRows, what the checks covered.
//
// Scenario.Run then keeps each side going until it has its evidence: the
// control side a violation, the defended side at least as many runs that
// met the fault as the control needed, each bounded by the budget and
// Scenario.retries. A scenario must make its fault likely enough that
// both sides get there within those bounds on a busy machine: where the
// traffic only sometimes makes the fault, observe it at the end of the
// run and drive the operations it breaks (revoke and validate the
// sessions that lost their index, say), so that a run that met the
// fault also exercises the defence. One Scenario is one store and one
// defence: a kind defended twice, or run on two stores, is two Scenarios
// and two rows, so that one control's violations never stand in for
// another's. A sketch for lost replies in front of Redis:
//
//	func TestChaosLostTakeBack(t *testing.T) {
//		chaos.Scenario{Package: "workerid", Fault: "lost reply to take-back", Store: "redis",
//			Defence: "take-back", Budget: chaos.Budget(t) / 2, // two scenarios share the package's budget
//		}.Run(t, func(t *testing.T, r *chaos.Run) {
//			proxy := faultproxy.Start(t, testenv.Redis(t))
//			proxy.SetDropRate(0.3, r.Rand, faultproxy.MatchRedisScript(takeScript))
//			// … run leases through proxy.Addr(), with the defence off when
//			// r.Control, writing IDs with history.AppendID to files …
//			if n := proxy.Stats().RepliesDropped; n > 0 {
//				r.Met("%d replies to the take dropped", n)
//			}
//			total, dups, err := history.CheckUniqueFiles(files...)
//			if err != nil {
//				t.Fatal(err)
//			}
//			r.CountIDs(total)
//			for _, d := range dups {
//				r.Violation("%v", d)
//			}
//		})
//	}
//
// A tokens scenario records its calls in a History instead:
//
//	h := history.New(classify)
//	c := h.Begin(history.Op{Kind: history.Validate, Manager: 1, Session: sid})
//	s, err := m1.Validate(ctx, tok)
//	c.SetUser(int64(s.UserID))
//	c.End(err)
//	…
//	for _, v := range history.CheckTokens(h, func(int) time.Duration { return cacheTTL }) {
//		r.Violation("%v", v)
//	}
//
// Rules for scenarios: every wait is bounded, so a hang fails the test
// with a message rather than at go test's timeout; everything random
// comes from the run's rng; and the machine is small and busy, so what a
// scenario asserts about time has generous margins.
package chaos
