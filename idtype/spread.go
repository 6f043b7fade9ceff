package idtype

// Even shards at low traffic (GeneratorOptions.RandomSequenceStart).
//
// An app that shards rows by id % n, as sharding middleware does by
// default, gets skew when traffic is low: each millisecond then issues one
// ID, with sequence 0, so the low bits of every ID are the worker's and
// id % 2, id % 1024 or id % 10 land on a handful of shards. Meituan Leaf
// answers with a random sequence start of 0 to 99 per millisecond, which
// spreads id % 100 but not id % 1024.
//
// With RandomSequenceStart the first ID of a millisecond takes a sequence
// drawn at random (see firstOf) below 2^(SequenceBits-2), 0 to 1,023 on
// the default layout. That makes id % n uniform for every power of two n
// up to 1,024 (the low bits are the sequence's), and close to uniform for
// other n below it, where the time bits mix in too. A quarter of the sequence space is the least that
// spreads id % 1,024, and leaves three quarters (3,072 IDs on the default
// layout) for the rest of the millisecond, so only a millisecond busier
// than that waits for the next one sooner.
//
// What the skipped sequence numbers cost is kept small: a millisecond that
// follows one whose sequence was spent starts at 0, since under saturation
// the sequence is spread anyway and every ID of the millisecond is needed.
// So a saturated generator loses at most the start of the first
// millisecond of a burst. Every promise of the Generator stands: the start
// is only taken when the clock has moved past the last ID's millisecond,
// so IDs still increase, the worker bits are untouched, and NextN still
// reserves its batch with one compare-and-swap.

// spreadMask returns the mask of the random sequence start for l, 0 when
// the sequence is too narrow to spread (fewer than 3 bits).
func spreadMask(l Layout) int64 {
	if l.SequenceBits < 3 {
		return 0
	}
	return 1<<(l.SequenceBits-2) - 1
}

// firstOf returns, with RandomSequenceStart, the state of the first ID of
// millisecond now (since the epoch), read from the clock as nowNs, which
// is later than the millisecond of old, the last state issued: a random
// start, or sequence 0 when old spent the millisecond just before. The
// callers test g.spread first, so that without the option the path stays
// as it was.
//
// The start is a hash of the clock reading, to the nanosecond, and the
// worker number (murmur3's 64-bit finalizer, whose every output bit
// depends on every input bit): it needs no state shared between
// goroutines and no lock, and costs a few nanoseconds. Two readings never
// share a start unless they share a nanosecond, and a caller that comes
// back every 5 ms on the dot still reads distinct times.
func (g *Generator) firstOf(now, old, nowNs int64) int64 {
	next := g.stateAt(now)
	if old&g.seqMask == g.seqMask && g.msOf(old) == now-1 && !g.defences.spreadAfterSpent {
		return next
	}
	x := uint64(nowNs) ^ uint64(g.workerPart)*0x9e3779b97f4a7c15
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return next | int64(x)&g.spread
}
