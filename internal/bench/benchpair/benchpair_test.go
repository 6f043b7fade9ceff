package benchpair

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestTimes(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	var nx, ny int
	res := testing.Benchmark(func(b *testing.B) {
		tx, ty := Times(b, func() { nx++; time.Sleep(2 * time.Millisecond) }, func() { ny++ })
		b.ReportMetric(float64(tx)/float64(ty), "ratio")
		if tx < time.Duration(b.N)*2*time.Millisecond {
			b.Errorf("x took %v in %d ops; it sleeps 2ms each", tx, b.N)
		}
	})
	if nx != ny || nx == 0 {
		t.Errorf("x ran %d times and y %d; want the same, above zero", nx, ny)
	}
	if r := res.Extra["ratio"]; r <= 1 {
		t.Errorf("ratio of a 2ms sleep to nothing = %v; want above 1", r)
	}
}

// TestParallel: every goroutine runs body, and all of them are running at
// once (each waits until all have started), before the function returns.
func TestParallel(t *testing.T) {
	testenv.Deadline(t, 30*time.Second)
	const goroutines = 8
	var started, done atomic.Int64
	all := make(chan struct{})
	Parallel(goroutines, func() {
		if started.Add(1) == goroutines {
			close(all)
		}
		<-all
		done.Add(1)
	})()
	if n := done.Load(); n != goroutines {
		t.Errorf("%d goroutines finished before Parallel returned; want %d", n, goroutines)
	}
}
