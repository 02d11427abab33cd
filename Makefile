# Tollgate's everyday commands. `make run` starts the gateway on the embedded default;
# `make test` is what CI runs.
GO       ?= go
PKGS     := ./...
BIN      := bin

.PHONY: run build test vet bench loadtest fuzz clis clean

run:
	$(GO) run ./cmd/tollgate $(ARGS)

build:
	$(GO) build -o $(BIN)/ ./cmd/...

vet:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

test: vet
	$(GO) test -race -count=1 -timeout 12m $(PKGS)

clean:
	rm -rf $(BIN)

# Issue 2: end-to-end relay overhead of Tollgate against calling the backend directly and a
# bare httputil.ReverseProxy (see docs/benchmarks.md). ARGS='--quick' for a smoke run.
.PHONY: bench-relay
bench-relay:
	$(GO) build -o $(BIN)/ ./cmd/tollgate ./cmd/fakellm ./cmd/tollgate-bench
	$(BIN)/tollgate-bench $(ARGS)

# Load harness (issue 3): the CI scenarios against an in-process gateway on loopback with fake
# backends; exits non-zero on any broken invariant. Bounded: well under 2 minutes on 2 cores.
.PHONY: bench-admission
loadtest:
	$(GO) run ./cmd/tollgate-load --scenario burst-20,burst-50,mixed-priority,cancel-storm

# Admission benchmarks (issue 3, docs/benchmarks.md): actor cycles/s, 429s/s under 10x
# overload, heap per queued request. Targets are reported met/missed, not enforced.
bench-admission:
	$(GO) test -run '^$$' -bench BenchmarkAdmission -benchtime 3s ./actors/
	$(GO) run ./cmd/tollgate-load --scenario overload,queue-memory
