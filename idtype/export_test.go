package idtype

// The package's test seams: the only place where tests switch a
// Generator's defences off or hook into it.

// setDefences replaces g's defences (and clears its hooks), for control
// runs that must find the violation a defence prevents; each test that
// proves a defence turns that one off alone.
func (g *Generator) setDefences(d defences) { g.defences = d }

// setHooks makes g run h's code where a call reserves state values; nil
// removes the hooks.
func (g *Generator) setHooks(h *hooks) { g.defences.hooks = h }
