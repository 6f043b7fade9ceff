package partition

import "github.com/snowkeyhq/snowkey/idtype"

// The seam of the control runs, which show that a defence is needed by
// switching it off; users cannot reach it.

// newWithout is New with the defences in off switched off.
func newWithout(table string, layout idtype.Layout, o Options, off defences) (*Table, error) {
	p, err := New(table, layout, o)
	if err != nil {
		return nil, err
	}
	p.defences = off
	return p, nil
}

// readClock makes p's Maintain read the database's time from the SQL
// expression expr, such as a one-row table a test sets, instead of
// statement_timestamp(): the tests' way to move the database's clock. It
// switches no defence off.
func (p *Table) readClock(expr string) { p.nowSQL = expr }
