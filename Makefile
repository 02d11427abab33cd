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
