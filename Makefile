# outboxd developer entry points. `make demo` and `make test` are the two
# quick-start commands of the README; .ci/run runs `make test`.

GO        ?= go
BIN       ?= bin/outboxd
# The whole suite (about two minutes on two cores), then the relay's
# package again under the race detector: -race on everything would triple
# the time for packages whose concurrency lives in core anyway.
TEST_FLAGS ?= -count=1 -timeout 15m
RACE_PKGS  ?= . ./core/...
FUZZTIME   ?= 30s
# gci for `make lint`: imports in three groups, in this order (standard
# library, others, outboxd's own), which neither gofmt nor goimports checks.
GCI_VERSION ?= v0.14.0
GCI_SECTIONS = -s standard -s default -s 'prefix(github.com/outboxd/outboxd)'
# Every fuzz target, as package:function. `go test -fuzz` takes one target
# of one package at a time.
FUZZ_TARGETS = \
	config:FuzzParseConfig \
	server/api:FuzzDecodeMessageRequest \
	sinks/webhook:FuzzWebhookDeliver \
	sinks/email:FuzzPayload \
	sinks/slack:FuzzParsePayload \
	internal/safetext:FuzzText \
	internal/safetext:FuzzReceipt \
	destinations:FuzzPattern \
	destinations:FuzzFilter
# How long CI fuzzes each target, after the tests: a few seconds each
# finds what a change broke in the parsers' obvious corners.
FUZZTIME_CI ?= 3s

.PHONY: all build image test demo jaeger bench fuzz fuzz-ci lint clean screenshots torture

all: build

# -buildvcs=auto stamps the git revision into the binary (`outboxd version`)
# even where GOFLAGS turns stamping off, and builds without it outside a
# checkout. (Go does not stamp from a `git worktree`, whose .git is a file.)
build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/outboxd

## image: the container image as an OCI archive, without a Docker engine (the Dockerfile builds the same with Docker)
IMAGE     ?= bin/outboxd-image.tar
VERSION   ?= dev
image:
	cd deploy && $(GO) run ./image -o $(abspath $(IMAGE)) -version $(VERSION)

## test: the whole test suite against the PostgreSQL at 127.0.0.1:5432 (or $$TEST_DATABASE_URL)
test:
	$(GO) test $(TEST_FLAGS) ./...
	$(GO) test -race $(TEST_FLAGS) $(RACE_PKGS)
	cd bench && $(GO) test $(TEST_FLAGS) ./...
	cd deploy && $(GO) test $(TEST_FLAGS) ./...
	cd test/browser && $(GO) test $(TEST_FLAGS) ./...

## screenshots: regenerate docs/console-*.png (shown in the README) and docs/portal-*.png from the browser tests (needs Debian's chromium)
screenshots:
	cd test/browser && OUTBOXD_SCREENSHOTS=$(CURDIR)/docs $(GO) test -count=1 -run 'TestConsoleInARealBrowser|TestTenantPortalInARealBrowser|TestPortalHealthFiguresCatalogAndTestEvent' ./...

## torture: the randomized combination test (test/torture) for SEEDS seeds from FIRST (unset: a random first seed, printed); `go test ./test/torture -seed N` replays one
SEEDS ?= 20
# A seed takes under a minute when its promises hold and about two when
# its rows do not drain; -timeout allows three per seed.
torture:
	$(GO) test -count=1 -timeout $$(( $(SEEDS) * 3 ))m -run 'TestTorture$$' ./test/torture -seeds $(SEEDS) $(if $(FIRST),-first $(FIRST))

## demo: migrate, serve, enqueue and show delivered messages, even with PostgreSQL down
demo:
	bash scripts/demo.sh

## jaeger: run Jaeger in the foreground on 127.0.0.1 (OTLP 4318/4317, query API 16686: a source build has no web UI), built from tools/ on first use
## Point outboxd at it with OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318; see docs/tracing.md.
jaeger:
	scripts/tools.sh run jaeger

## bench: outboxd and River side by side (bench/ is a module of its own); see docs/performance.md
bench:
	cd bench && $(GO) run .

## fuzz: run each fuzz target (FUZZ_TARGETS) for $(FUZZTIME)
fuzz:
	@set -e; for target in $(FUZZ_TARGETS); do \
		pkg=$${target%%:*}; fn=$${target##*:}; \
		echo "fuzz: $$fn in ./$$pkg for $(FUZZTIME)"; \
		$(GO) test ./$$pkg/ -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME); \
	done

## fuzz-ci: every fuzz target for $(FUZZTIME_CI), as .ci/run does after the tests
fuzz-ci:
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME_CI)

lint:
	gofmt -l . | (! grep .)
	$(GO) run github.com/daixiang0/gci@$(GCI_VERSION) list --skip-generated $(GCI_SECTIONS) . | (! grep .)
	$(GO) vet ./...
	staticcheck ./...
	cd deploy && $(GO) vet ./... && staticcheck ./...
	cd test/browser && $(GO) vet ./... && staticcheck ./...

clean:
	rm -rf bin
