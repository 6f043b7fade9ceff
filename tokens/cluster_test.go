package tokens

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestRevokeAllMidMigration moves the slot of three users' keys (one slot
// tag, so one index) to another node of a private cluster, one key per
// MIGRATE, and calls RevokeAll in the middle: for user A while the index
// is still on the source and some of A's sessions have moved, for user C
// once the index has moved and some of C's sessions have not. Each
// RevokeAll must succeed (its one declared key, the index, is whole on one
// node) and end every session, although its clean-up cannot reach the
// keys on two nodes; user B, never revoked, must never be refused as
// invalid (only, at worst, reported unavailable while its keys are
// split). A repeated RevokeAll returns 0. The control, without the index
// check, leaves the sessions the clean-up missed valid: the authoritative
// index is the defence the migration needs.
func TestRevokeAllMidMigration(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	for _, control := range []bool{false, true} {
		t.Run(fmt.Sprintf("control=%v", control), func(t *testing.T) {
			t.Parallel()
			cl := private.StartRedisCluster(t, 3)
			ctx := t.Context()
			gen := newGen(t)
			m := openManagerWithout(t, cl.Client(), gen, Options{MaxSessions: 1000}, defences{noIndexCheck: control})

			type user struct {
				id   idtype.ID
				toks []string
				sess []Session
			}
			tag := slotTag(userID(t, gen))
			var a, b, c user
			for _, u := range []*user{&a, &b, &c} {
				u.id = sameTagUser(t, gen, tag)
				for range 8 {
					tok, s := issue(t, m, u.id, Metadata{})
					u.toks, u.sess = append(u.toks, tok), append(u.sess, s)
				}
			}
			slot, err := cl.KeySlot(ctx, m.keys.index(tag))
			if err != nil {
				t.Fatal(err)
			}
			from, err := cl.SlotOwner(ctx, slot)
			if err != nil {
				t.Fatal(err)
			}
			source := cl.Nodes()[from].Client()
			moved := func(key string) bool {
				err := source.Exists(ctx, key).Err()
				if err != nil && !strings.HasPrefix(err.Error(), "ASK ") {
					t.Fatalf("EXISTS %s on the source: %v", key, err)
				}
				return err != nil
			}
			split := func(u user) (indexMoved bool, movedSessions int) {
				for _, s := range u.sess {
					if moved(m.keys.session(tag, s.ID)) {
						movedSessions++
					}
				}
				return moved(m.keys.index(tag)), movedSessions
			}
			// survivors counts validations that succeeded after their
			// session's RevokeAll returned.
			survivors := 0
			revokeAll := func(name string, u user) {
				t.Helper()
				n, err := m.RevokeAll(ctx, u.id)
				if err != nil {
					t.Errorf("%s: RevokeAll mid-migration: %v", name, err)
					return
				}
				t.Logf("%s: RevokeAll mid-migration ended %d sessions", name, n)
				for _, tok := range u.toks {
					if _, err := m.Validate(ctx, tok); err == nil {
						survivors++
					}
				}
			}
			var revokedA, revokedC bool
			bInvalid, bUnavailable, bChecks, issued := 0, 0, 0, 0
			// Half of A's sessions first, then the index, then the rest:
			// so each split the test needs happens, whatever order the
			// server lists the slot's keys in.
			first := []string{m.keys.index(tag)}
			for _, s := range a.sess[:len(a.sess)/2] {
				first = append([]string{m.keys.session(tag, s.ID)}, first...)
			}
			order := func(keys []string) {
				slices.SortStableFunc(keys, func(x, y string) int {
					return cmp.Compare(orderOf(first, x), orderOf(first, y))
				})
			}
			_, err = cl.MigrateSlot(ctx, slot, (from+1)%3, private.MigrateOptions{Batch: 1, Order: order, Step: func(moved int) error {
				if !revokedA {
					if idx, n := split(a); !idx && n > 0 && n < len(a.sess) {
						revokeAll("A (index on the source, sessions split)", a)
						revokedA = true
					}
				}
				if !revokedC {
					if idx, n := split(c); idx && n < len(c.sess) {
						revokeAll("C (index moved, sessions not all)", c)
						revokedC = true
					}
				}
				// Issue creates a key, so Redis does not run it in a slot
				// that is migrating. (Each waits out go-redis's TRYAGAIN
				// retries: a few steps are enough.)
				if moved%8 == 1 {
					if _, _, err := m.Issue(ctx, b.id, Metadata{}); err == nil {
						issued++
					} else if !errors.Is(err, ErrUnavailable) {
						t.Errorf("B: Issue mid-migration: %v", err)
					}
				}
				for _, tok := range b.toks {
					bChecks++
					_, err := m.Validate(ctx, tok)
					switch {
					case errors.Is(err, ErrInvalidToken):
						bInvalid++
					case errors.Is(err, ErrUnavailable):
						bUnavailable++
					case err != nil:
						t.Errorf("B: Validate mid-migration: %v", err)
					}
				}
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			if !revokedA || !revokedC {
				t.Fatalf("the migration never split A (%v) or C (%v) as the test needs", revokedA, revokedC)
			}
			t.Logf("B mid-migration: %d validations, %d unavailable, %d invalid; %d Issues succeeded", bChecks, bUnavailable, bInvalid, issued)
			if issued > 0 {
				t.Errorf("%d Issues succeeded while the slot migrated, want ErrUnavailable", issued)
			}
			if bInvalid > 0 {
				t.Errorf("B, never revoked, was refused as invalid %d times mid-migration", bInvalid)
			}
			for i, tok := range b.toks {
				if _, err := m.Validate(ctx, tok); err != nil {
					t.Errorf("B: session %d after the migration: %v", i, err)
				}
			}
			for _, u := range []user{a, c} {
				for _, tok := range u.toks {
					if _, err := m.Validate(ctx, tok); err == nil {
						survivors++
					}
				}
				if n, err := m.RevokeAll(ctx, u.id); err != nil || n != 0 {
					t.Errorf("RevokeAll again after the migration = %d, %v; want 0, nil", n, err)
				}
			}
			switch {
			case !control && survivors > 0:
				t.Errorf("%d validations of sessions revoked mid-migration succeeded after RevokeAll returned", survivors)
			case control && survivors == 0:
				t.Error("control: without the index check no session outlived its RevokeAll: the test does not reach the fault")
			case control:
				t.Logf("control: %d validations succeeded after RevokeAll returned", survivors)
			}
		})
	}
}

// orderOf is the place of key in first, or len(first) for a key not in it.
func orderOf(first []string, key string) int {
	if i := slices.Index(first, key); i >= 0 {
		return i
	}
	return len(first)
}
