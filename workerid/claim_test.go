package workerid

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func claim(t testing.TB, ctx context.Context, p *Pool, claimant string) Claim {
	t.Helper()
	c, err := p.Claim(ctx, claimant)
	if err != nil {
		t.Fatalf("Claim(%q): %v", claimant, err)
	}
	return c
}

// TestClaim: claims take numbers for good, from the top of the range; a
// claim made again gives the same number; no lease of any pool gets a
// claimed number, whatever its Reserved list.
func TestClaim(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		ctx := testenv.Deadline(t, time.Minute)
		p := b.pool(t, b.addr, Options{Layout: sixBits, Reserved: allBut(sixBits, 58, 59, 60, 61, 62, 63)})
		a := claim(t, ctx, p, "server-a")
		if a.Worker != 63 || !a.New || a.Claimant != "server-a" {
			t.Fatalf("first claim = %+v, want worker 63, new, of server-a", a)
		}
		again := claim(t, ctx, p, "server-a")
		if again.Worker != 63 || again.New || !again.After.IsZero() {
			t.Fatalf("the same claim again = %+v, want worker 63, not new, no After", again)
		}
		if c := claim(t, ctx, p, "server-b"); c.Worker != 62 || !c.New {
			t.Fatalf("second claimant = %+v, want worker 62, new", c)
		}

		// The leases get the four numbers left, and then none.
		var leased []int64
		for {
			l, err := p.Acquire(ctx)
			if errors.Is(err, ErrNoFreeWorker) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeLease(t, l) })
			leased = append(leased, l.Worker())
		}
		slices.Sort(leased)
		if !slices.Equal(leased, []int64{58, 59, 60, 61}) {
			t.Errorf("leases got %v, want 58..61: the claimed 62 and 63 must stay out of the pool", leased)
		}
		// A pool of another process, which reserves nothing of the two.
		other := b.pool(t, b.addr, Options{Layout: sixBits, Reserved: allBut(sixBits, 62, 63), Holder: "other"})
		if l, err := other.Acquire(ctx); !errors.Is(err, ErrNoFreeWorker) {
			if err == nil {
				closeLease(t, l)
			}
			t.Errorf("a pool that may lease only the claimed numbers: Acquire = worker %v, %v; want ErrNoFreeWorker", l, err)
		}
		if _, err := p.Claim(ctx, "server-c"); !errors.Is(err, ErrNoFreeWorker) {
			t.Errorf("a claim with every number held: %v, want ErrNoFreeWorker", err)
		}
		for _, bad := range []string{"", "a\nb", string(make([]byte, 201))} {
			if _, err := p.Claim(ctx, bad); !errors.Is(err, idtype.ErrInvalidOptions) {
				t.Errorf("Claim(%q) = %v, want ErrInvalidOptions", bad, err)
			}
		}
	})
}

// TestClaimAfterMark: a new claim on a number that a lease used starts
// after the number's high-water mark, as a new lease would.
func TestClaimAfterMark(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		ctx := testenv.Deadline(t, time.Minute)
		p := b.pool(t, b.addr, Options{Layout: sixBits, Reserved: allBut(sixBits, 40)})
		l := acquire(t, p)
		g := generator(t, l)
		last, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		closeLease(t, l)
		c := claim(t, ctx, p, "server")
		if c.Worker != 40 {
			t.Fatalf("claimed %d, want 40", c.Worker)
		}
		if lastTime := sixBits.Decode(last).Time; c.After.Before(lastTime) {
			t.Errorf("the claim may start at %v, before the lease's last ID of %v", c.After, lastTime)
		}
	})
}

// TestClaimStoreLost: a Redis that lost a claim's lease but kept its
// record gives the number back to its claimant, who has been issuing on
// it; once a lease has taken the number, the claim fails with ErrTaken.
func TestClaimStoreLost(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		ctx := testenv.Deadline(t, time.Minute)
		p := b.pool(t, b.addr, Options{Layout: sixBits, Reserved: allBut(sixBits, 50)})
		s := p.store.(*redisStore)
		c := claim(t, ctx, p, "server")
		w := strconv.FormatInt(c.Worker, 10)
		if err := s.c.HDel(ctx, s.leases, w).Err(); err != nil {
			t.Fatal(err)
		}
		again := claim(t, ctx, p, "server")
		if again.Worker != c.Worker || !again.New || !again.After.IsZero() {
			t.Errorf("claimed again after the lease was lost: %+v; want worker %d, new, no After "+
				"(the mark is the claim's own)", again, c.Worker)
		}

		// Now the store loses the lease and the mark, and a lease
		// takes the number.
		if err := s.c.HDel(ctx, s.leases, w).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.c.ZRem(ctx, s.hw, w).Err(); err != nil {
			t.Fatal(err)
		}
		l := acquire(t, p)
		if l.Worker() != c.Worker {
			t.Fatalf("leased %d, want %d", l.Worker(), c.Worker)
		}
		if _, err := p.Claim(ctx, "server"); !errors.Is(err, ErrTaken) {
			t.Errorf("claim of a number a lease holds: %v, want ErrTaken", err)
		}
	}, "redis")
}

// TestClaimsUnclaim: Claims lists the namespace's claims with their
// claimants; Unclaim gives a number back, which a lease then takes,
// starting after the moment of the Unclaim (the claim's mark lay 100 years
// ahead).
func TestClaimsUnclaim(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		ctx := testenv.Deadline(t, time.Minute)
		p := b.pool(t, b.addr, Options{Layout: sixBits, Reserved: allBut(sixBits, 62, 63)})
		a := claim(t, ctx, p, "server-a")
		c := claim(t, ctx, p, "server-b")
		got, err := p.Claims(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []Claim{{Worker: c.Worker, Claimant: "server-b"}, {Worker: a.Worker, Claimant: "server-a"}}
		if !slices.Equal(got, want) {
			t.Fatalf("Claims = %+v, want %+v", got, want)
		}

		before := time.Now()
		w, ok, err := p.Unclaim(ctx, "server-a")
		if err != nil || !ok || w != a.Worker {
			t.Fatalf("Unclaim(server-a) = %d, %v, %v; want %d, true", w, ok, err, a.Worker)
		}
		if _, ok, err := p.Unclaim(ctx, "server-a"); ok || err != nil {
			t.Errorf("Unclaim of a claimant without a claim = %v, %v; want false, nil", ok, err)
		}
		if got, err := p.Claims(ctx); err != nil || !slices.Equal(got, want[:1]) {
			t.Errorf("Claims after Unclaim = %+v, %v; want %+v", got, err, want[:1])
		}
		st := acquire(t, p).Status()
		if st.Worker != a.Worker {
			t.Fatalf("the lease got %d, want the number given back, %d", st.Worker, a.Worker)
		}
		if st.NotBefore.Before(before) {
			t.Errorf("the lease starts after %v, before the Unclaim at %v", st.NotBefore, before)
		}
		if _, _, err := p.Unclaim(ctx, ""); !errors.Is(err, idtype.ErrInvalidOptions) {
			t.Errorf("Unclaim(\"\") = %v, want ErrInvalidOptions", err)
		}
	})
}
