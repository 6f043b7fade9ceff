package partition

// Switches for the control runs of the package's own tests, which show
// that a defence is needed by turning it off. Users cannot reach them.

// WithoutLock makes p's Maintain take no advisory lock.
func WithoutLock(p *Table) { p.d.noLock = true }

// WithoutMove makes p's Maintain create partitions without first moving
// their rows out of the default partition.
func WithoutMove(p *Table) { p.d.noMove = true }
