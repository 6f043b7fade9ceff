# Entry points of the repository. `make test` is what CI runs (.ci/run).

.PHONY: test bench fuzz chaos loadproof run fmt vet lint generate-check api release

# gofmt check, go vet, staticcheck, and go test -race of every module
# against real PostgreSQL and Redis servers.
test:
	bash scripts/test.sh

# Every benchmark against real servers, then the ratio tables of *.ratios.
bench:
	bash scripts/bench.sh

# Every fuzz target alone for FUZZTIME (default 15s).
fuzz:
	bash scripts/fuzz.sh

# The fault-injection suite's long randomized schedule: every TestChaos
# test for CHAOS_TIME (default 10m) per package, then the table: per fault
# kind, store and defence, each side's runs, met and missed, and violations.
chaos:
	bash scripts/chaos.sh

# What CI runs, on fresh clones of this commit: three times in a row
# beside stress-ng --cpu 8 (LOADPROOF_RUNS), then once unloaded; the wall
# times, as ratios to the 10-minute goal. LOADPROOF_COLD=1: each run with
# empty Go and staticcheck caches, as on a new machine.
loadproof:
	bash scripts/loadproof.sh

# The example backend (examples/, a module of its own) on embedded
# defaults, or on PostgreSQL and Redis with DATABASE_URL and REDIS_URL set.
run:
	GOWORK=off go -C examples run ./server

fmt:
	bash scripts/lib.sh fmt_all

vet:
	bash scripts/lib.sh vet_all

# staticcheck, pinned in scripts/lib.sh, on every module.
lint:
	bash scripts/lib.sh staticcheck_all

# The generators whose output is committed (gqlgen, oapi-codegen, ogen),
# run on copies: fails if any would write other files.
generate-check:
	bash scripts/lib.sh generated_check

# Writes api/*.txt, the exported API of every released module (see
# internal/checks/apifile); make test fails while they differ from the code.
api:
	GOWORK=off go run ./internal/cmd/apifile -w

# The release commit and tags of every released module, in this working
# tree, nothing pushed: a dry run unless APPLY=1 (or DRY_RUN=0). See
# scripts/release.sh.
release:
	bash scripts/release.sh "$(VERSION)"
