# Tollgate's everyday commands. `make run` starts the gateway on the embedded default;
# `make test` is the whole suite, as CI runs it.
GO       ?= go
BIN      := bin
FUZZTIME ?= 20s
# What `tollgate --version` says; a plain `go build` or `go install` falls back to the module
# version and the VCS revision the build recorded (cmd/tollgate/version.go).
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X main.buildVersion=$(VERSION) -X main.buildCommit=$(COMMIT)

.PHONY: run build image vet test loadtest bench bench-relay bench-admission bench-inflight bench-calls bench-burst bench-instructions fuzz clis screenshots clean

run:
	$(GO) run ./cmd/tollgate $(ARGS)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

# The container image (Containerfile, docs/deploy.md): a static binary built here, the host's CA
# certificates, on scratch; podman builds it from bin/image alone. PODMAN='podman --root DIR
# --storage-driver vfs' builds into another store (the image test does).
PODMAN    ?= podman
IMAGE     ?= tollgate:$(subst +,-,$(VERSION))
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt

image:
	@test -s $(CA_BUNDLE) || { echo "no CA bundle at $(CA_BUNDLE) (Debian: apt-get install ca-certificates)"; exit 1; }
	mkdir -p $(BIN)/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS) -s -w' -o $(BIN)/image/tollgate ./cmd/tollgate
	cp $(CA_BUNDLE) $(BIN)/image/ca-certificates.crt
	$(PODMAN) build --layers=false --file Containerfile --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --tag $(IMAGE) $(BIN)/image

vet:
	$(GO) vet ./...
	$(GO) vet -tags tollgate_faults ./...
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

# The fault-tagged build adds the panic-injection seam (actors/faults_inject.go) and the tests
# and load scenario that use it; production builds have no such seam.
FAULT_TESTS := 'TestCrash|TestRepeated|TestSupervision|TestSupervisorBudget|TestActorFaults'

# The image test builds a binary and an image of its own (minutes on a cold cache), so it has its
# own step and timeout, not a share of the package's.
test: vet
	$(GO) test -race -count=1 -timeout 14m ./...
	$(GO) test -race -count=1 -timeout 10m -tags tollgate_faults -run $(FAULT_TESTS) ./actors/ ./cmd/internal/app/ ./cmd/tollgate/ ./cmd/tollgate-load/
	TOLLGATE_IMAGE_TEST=1 $(GO) test -count=1 -timeout 20m -run '^TestImage$$' ./cmd/tollgate/

# Load harness: the CI scenarios against an in-process gateway on loopback with fake backends;
# exits non-zero on any broken invariant (docs/testing.md).
loadtest:
	$(GO) run -tags tollgate_faults ./cmd/tollgate-load --scenario burst-20,burst-50,mixed-priority,cancel-storm,slow-readers,actor-faults,retry-storm,learn-lanes,reload,forbidden-model,cluster,noisy-neighbour

# Benchmarks (docs/benchmarks.md): relay overhead against a direct call and a bare reverse
# proxy, the admission figures, then thousands of calls in flight. Not part of `make test`:
# figures, not pass/fail.
bench: bench-relay bench-admission bench-inflight bench-calls

# Relay overhead: Tollgate against calling the backend directly and a bare httputil.ReverseProxy.
# ARGS='--quick' for a smoke run.
bench-relay:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/tollgate ./cmd/fakellm ./cmd/tollgate-bench
	$(BIN)/tollgate-bench $(ARGS)

# Calls in flight: open-loop arrivals at 1,000, 2,000 and 3,000 calls/s against a backend holding
# each call 1 s (and 1,000/s held 5 s), bare proxy and Tollgate interleaved, streaming and not.
# The longest target (docs/testing.md); ARGS='--quick' for a smoke run, ARGS='--rates 3000
# --long-rates ""' for one rate.
bench-inflight:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/tollgate ./cmd/fakellm ./cmd/tollgate-bench
	$(BIN)/tollgate-bench inflight $(ARGS)

# Memory of a burst of large requests (40 × 7.7 MB through chat, Messages and Responses): peak
# RSS and what the idle gateway holds after it. ARGS='--idle 5m' watches longer.
bench-burst:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/tollgate ./cmd/fakellm ./cmd/tollgate-bench
	$(BIN)/tollgate-bench burst $(ARGS)

# Admission: actor admission cycles/s, 429s/s under 10x overload, memory per queued request.
# The Go benchmark cannot start the binaries' heap floor (app.TuneGC: GOGC 100 above 64 MiB);
# GOGC=400 keeps its figures comparable with the recorded ones; tollgate-load applies TuneGC.
bench-admission:
	GOGC=400 $(GO) test -run '^$$' -bench BenchmarkAdmission -benchtime 3s -count 3 ./actors/
	$(GO) run ./cmd/tollgate-load --scenario overload,queue-memory

# Per-call costs, counted rather than timed: allocations and CPU per relayed
# request, memory and goroutines per held call, each beside a bare reverse proxy.
bench-calls:
	$(GO) test -run '^$$' -bench 'BenchmarkRelay' -benchtime 3000x -count 2 ./cmd/internal/app/
	$(GO) test -run '^$$' -bench 'BenchmarkHeldCalls' -benchtime 1x -count 2 ./cmd/internal/app/

# The instructions one relayed call costs, Tollgate's and a bare proxy's, counted by
# valgrind's callgrind (not timed, so the machine's load does not move them); needs valgrind.
# ARGS='200 1200 30' also lists the 30 functions a stream costs most beyond the proxy's.
bench-instructions:
	GO=$(GO) bash .ci/instructions $(ARGS)

# Every fuzz target for FUZZTIME each (a duration, or a count such as 100000x), or only those
# of PKGS="providers/sse httpapi". A target fails when an input fails it; .ci/fuzz explains
# the one Go 1.26 verdict it does not count.
fuzz:
	GO=$(GO) bash .ci/fuzz $(FUZZTIME) $(PKGS)

# The console's pictures in docs/ (README.md shows them), taken by headless Chromium in the
# middle of a parallel chat against fake backends.
screenshots:
	TOLLGATE_SCREENSHOTS=$(CURDIR)/docs $(GO) test -count=1 -run '^TestConsoleScreenshots$$' -v ./cmd/tollgate/

# The pinned coding-agent CLIs the integration tests drive and the client libraries the
# conformance suite runs (testdata/conformance/package.json), into .tools/.
clis:
	bash .ci/install-clis

clean:
	rm -rf $(BIN)
