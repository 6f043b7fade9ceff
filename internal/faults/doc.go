// Package faults is snowkey's fault-injection machinery for chaos tests:
// it breaks the path between real processes and real servers in the ways
// real networks and deployments do, and checks snowkey's two promises
// from what the processes recorded, not from hand-picked asserts:
//
//   - an ID is never issued twice;
//   - a revoked session never validates again (on the Manager that revoked
//     it at once, on any other once its CacheTTL has passed).
//
// The parts:
//
//   - Proxy, a TCP proxy in front of one Redis or PostgreSQL server that
//     can Cut connections, Freeze them (a partition without resets),
//     delay them, Retarget new ones to another server (a failover), and
//     drop the reply to a request after the server executed it
//     (DropReplies, SetDropRate), with matchers for Redis scripts and
//     commands and PostgreSQL statements.
//   - Process, this test binary run again as a helper process (StartHelper,
//     HelperMain) that the test can SIGKILL, SIGSTOP and SIGCONT.
//   - The ID checker: processes append their IDs to files (AppendID) and
//     CheckUniqueFiles reports every ID issued twice and by whom.
//   - History and CheckTokens: every Issue, Validate, Revoke, RevokeSession,
//     RevokeAll and Rotate recorded with when it began and ended, checked
//     against the revocation rule.
//   - Seeds and budgets: Seed, Rand and Repeat make a run deterministic
//     where the machinery decides (which replies drop, the schedule), and
//     every failure prints the CHAOS_SEED that replays it; Budget is the
//     time a package's chaos tests may take (short in `make test`,
//     CHAOS_TIME in `make chaos`); Report writes one row of the chaos
//     table and fails the test if the row breaks the promise.
//
// Servers come from package internal/testenv, the one owner of server
// launchers (standalone Redis, replicas, a private Cluster, PostgreSQL).
//
// # Writing a chaos scenario
//
// A scenario is a test named TestChaos… (`make chaos` runs every test so
// named, with CHAOS_TIME and CHAOS_REPORT set) that runs one fault kind
// with the defence on, and again with the defence switched off by an
// unexported switch (the control), and reports both in one Row. Every
// fault kind must have a control that finds violations: it proves the
// scenario reached the fault. A sketch for lost replies in front of
// Redis:
//
//	func TestChaosLostTakeBack(t *testing.T) {
//		budget := faults.Budget(t) / 2 // this package has two scenarios
//		row := faults.Row{Package: "idtype/workerid", Fault: "lost reply to take-back", Seed: faults.Seed(t)}
//		start := time.Now()
//		scenario := func(control bool) func(t *testing.T, rng *rand.Rand) {
//			return func(t *testing.T, rng *rand.Rand) {
//				proxy := faults.StartProxy(t, testenv.Redis(t))
//				proxy.SetDropRate(0.3, rng, faults.MatchRedisScript(takeScript))
//				// … run leases through proxy.Addr() (with the defence off
//				// when control), writing IDs with faults.AppendID to files …
//				total, dups, err := faults.CheckUniqueFiles(files...)
//				if err != nil {
//					t.Fatal(err)
//				}
//				row.IDs += int64(total)
//				if control {
//					row.ControlViolations += len(dups)
//				} else {
//					row.Violations += len(dups)
//					for _, d := range dups[:min(len(dups), 10)] {
//						t.Error(d)
//					}
//				}
//			}
//		}
//		row.Runs = faults.Repeat(t, "on", budget/2, 1, scenario(false))
//		row.ControlRuns = faults.Repeat(t, "off", budget/2, 1, scenario(true))
//		row.Seconds = time.Since(start).Seconds()
//		faults.Report(t, row)
//	}
//
// A tokens scenario records its calls in a History instead:
//
//	h := faults.NewHistory(classify)
//	c := h.Begin(faults.Op{Kind: faults.Validate, Manager: 1, Session: sid})
//	s, err := m1.Validate(ctx, tok)
//	c.SetUser(int64(s.UserID))
//	c.End(err)
//	…
//	for _, v := range faults.CheckTokens(h, func(int) time.Duration { return cacheTTL }) {
//		t.Error(v)
//	}
//
// Rules for scenarios: every wait is bounded, so a hang fails the test
// with a message rather than at go test's timeout; everything random
// comes from the run's rng; and the machine is small and busy, so what a
// scenario asserts about time has generous margins.
package faults
