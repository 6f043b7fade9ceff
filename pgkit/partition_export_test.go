package pgkit

// Switches for the control runs of the package's own tests, which show
// that a defence is needed by turning it off. Users cannot reach them.

// PartitionWithoutLock makes p's Maintain take no advisory lock.
func PartitionWithoutLock(p *Partitioner) { p.noLock = true }

// PartitionWithoutMove makes p's Maintain create partitions without first
// moving their rows out of the default partition.
func PartitionWithoutMove(p *Partitioner) { p.noMove = true }
