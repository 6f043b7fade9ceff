package readmecheck_test

// The packages a README block may use. go test caches a passing result
// keyed by the test binary, the files the test opened and the environment
// it read, and the blocks are compiled by child go commands, which it
// does not see: linking the packages in makes a change to any of them a
// change of the test binary, so that TestReadme runs again.
import (
	_ "github.com/snowkeyhq/snowkey/gormplugin"
	_ "github.com/snowkeyhq/snowkey/idtype"
	_ "github.com/snowkeyhq/snowkey/migrations"
	_ "github.com/snowkeyhq/snowkey/pgkit/adopt"
	_ "github.com/snowkeyhq/snowkey/pgkit/bulk"
	_ "github.com/snowkeyhq/snowkey/pgkit/partition"
	_ "github.com/snowkeyhq/snowkey/sqltype"
	_ "github.com/snowkeyhq/snowkey/tokens"
	_ "github.com/snowkeyhq/snowkey/workerid"
)
