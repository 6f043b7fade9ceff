package idtype

// Source hands out IDs. It is the one generator contract of snowkey:
// gormplugin, tokens and every later package take a Source, so a
// *Generator, a generator on a leased worker number, a wrapper that counts
// or traces, and a fake in a test all fit wherever an ID is made.
//
// Next and NextN follow the *Generator's rules: every ID is greater than
// every ID the Source returned before, and on error nothing a caller can
// use was issued (NextN may have written into dst; a caller must not use
// what it wrote). Layout is the layout of the IDs the Source issues; a
// caller uses it to decode them or to compute time bounds (Layout.FirstID).
//
// A fake for tests takes three lines:
//
//	type counter struct{ n ID }
//	func (c *counter) Next() (ID, error)       { c.n++; return c.n, nil }
//	func (c *counter) NextN(dst []ID) error     { for i := range dst { dst[i], _ = c.Next() }; return nil }
//	func (c *counter) Layout() Layout           { return DefaultLayout }
type Source interface {
	Next() (ID, error)
	NextN(dst []ID) error
	Layout() Layout
}

var _ Source = (*Generator)(nil)
