package history

import (
	"math"
	"slices"
	"sort"
)

// work counts the steps a checker takes: every operation or ID it looks
// at, every comparison its sorts make, every probe of a binary search and
// every node of a tree it visits. The checkers' tests bound how the count
// grows with the history, which, unlike the time a check takes, the
// machine's speed does not change.
type work struct{ steps int64 }

// sortFunc sorts s by cmp, counting each comparison.
func sortFunc[E any](w *work, s []E, cmp func(a, b E) int) {
	slices.SortFunc(s, func(a, b E) int {
		w.steps++
		return cmp(a, b)
	})
}

// search is sort.Search, counting each probe.
func search(w *work, n int, f func(int) bool) int {
	return sort.Search(n, func(i int) bool {
		w.steps++
		return f(i)
	})
}

// none is the index of no operation.
const none = math.MaxInt

// firsts holds, of a set of operations, the one of the lowest index (i,
// run by Manager m) and the one of the lowest index among those run by
// another Manager than m (i2, by m2): enough to find the first operation
// of the set run by any Manager but a given one. A missing one has index
// none.
type firsts struct{ i, m, i2, m2 int }

var noFirsts = firsts{i: none, i2: none}

// merge returns the firsts of the union of the sets a and b describe.
func (a firsts) merge(b firsts) firsts {
	c := [4][2]int{{a.i, a.m}, {a.i2, a.m2}, {b.i, b.m}, {b.i2, b.m2}}
	out := noFirsts
	for _, x := range c {
		if x[0] < out.i {
			out.i, out.m = x[0], x[1]
		}
	}
	for _, x := range c {
		if x[0] < out.i2 && x[0] != none && x[1] != out.m {
			out.i2, out.m2 = x[0], x[1]
		}
	}
	return out
}

// firstsTree is a segment tree over positions 0..n-1, each holding one
// operation or none, that gives the firsts of any prefix of positions in
// O(log n) steps, and takes an operation in or out in O(log n).
type firstsTree struct {
	n    int
	node []firsts // node[n+p] is position p; node[k] merges 2k and 2k+1
	w    *work
}

func newFirstsTree(w *work, n int) *firstsTree {
	t := &firstsTree{n: n, node: make([]firsts, 2*n), w: w}
	for i := range t.node {
		t.node[i] = noFirsts
	}
	return t
}

// set puts the operation of index i, run by Manager m, at position p, or
// takes it out (i == none).
func (t *firstsTree) set(p, i, m int) {
	k := p + t.n
	t.node[k] = firsts{i: i, m: m, i2: none}
	for k > 1 {
		t.w.steps++
		k >>= 1
		t.node[k] = t.node[2*k].merge(t.node[2*k+1])
	}
}

// prefix returns the firsts of positions 0..k-1.
func (t *firstsTree) prefix(k int) firsts {
	out := noFirsts
	for l, r := t.n, k+t.n; l < r; l, r = l>>1, r>>1 {
		t.w.steps++
		if l&1 == 1 {
			out = out.merge(t.node[l])
			l++
		}
		if r&1 == 1 {
			r--
			out = out.merge(t.node[r])
		}
	}
	return out
}
