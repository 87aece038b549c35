# The two commands a newcomer needs: `make run` and `make test`. Both install what they need.

CARGO ?= cargo
BIN := target/debug/yuxi-operator
RUN_DIR := .run
LISTEN ?= 127.0.0.1:8080
WEBHOOK_LISTEN ?= 127.0.0.1:8443

.PHONY: run webhook test faults bench fmt lint unit contract chart-check crds build tools clean

## run: the system on this machine, over the manifests in examples/: the facade on $(LISTEN), runs as
## runner subprocesses, a private Redis (or the one REDIS_URL names)
run: build
	$(BIN) validate examples
	@echo "Serving the facade on http://$(LISTEN) for the agents in examples/ (tokens in examples/local-users.yaml). Ctrl-C stops it."
	@echo "Try: curl -s -H 'Authorization: Bearer alice-token' 'http://$(LISTEN)/api/agent?include_subagents=true'"
	@echo "Or a research run (its report lands in $(RUN_DIR)/data/users/<uid>/threads/<thread_id>/outputs/report.md):"
	@echo "  curl -s -H 'Authorization: Bearer alice-token' -H 'content-type: application/json' http://$(LISTEN)/api/agent/runs -d '{\"query\": \"Which solid electrolytes conduct lithium best?\", \"agent_slug\": \"deep-research\"}'"
	scripts/with-redis sh -c 'REDIS_URL=$${REDIS_URL:-$$YUXI_TEST_REDIS_URL} exec $(BIN) local --manifests examples --listen $(LISTEN) --users examples/local-users.yaml --data-dir $(RUN_DIR)/data'

## webhook: the admission webhook, offline, with a self-signed certificate, on $(WEBHOOK_LISTEN)
webhook: build $(RUN_DIR)/tls.crt
	$(BIN) webhook --offline --listen $(WEBHOOK_LISTEN) --tls-cert $(RUN_DIR)/tls.crt --tls-key $(RUN_DIR)/tls.key

## test: formatting, lints (warnings denied), the Helm chart's checks, every test, and the contract test
test: tools fmt chart-check lint unit contract

## faults: the full fault suite (tests/faults: restarts, Redis killed, runners killed, bursts of 300),
## printing each scenario's numbers; `make test` runs its short form
faults: tools
	@mkdir -p $(RUN_DIR)
	@YUXI_FAULTS=full scripts/with-redis $(CARGO) test --locked --test faults -- --nocapture --test-threads 1 \
		>$(RUN_DIR)/faults.log 2>&1; status=$$?; \
		grep -E 'fault-suite|^test |test result|panicked' $(RUN_DIR)/faults.log; \
		echo "(the whole log: $(RUN_DIR)/faults.log)"; exit $$status

## bench: release build, then the local mode (in-process and Redis) side by side with LangGraph's
## in-memory API server, driven by one client; prints the table (also in .run/bench.md); then the
## controller against an API-server stand-in (.run/bench-controller.md)
bench:
	@command -v wrk >/dev/null 2>&1 || scripts/apt-install wrk
	$(CARGO) build --release --locked
	@py=$$(scripts/bench-venv) && scripts/with-redis sh -c 'REDIS_URL=$$YUXI_TEST_REDIS_URL exec "$$0" scripts/bench.py target/release/yuxi-operator $(BENCH_ARGS)' "$$py"
	$(CARGO) bench --locked --bench controller > $(RUN_DIR)/bench-controller.md
	@cat $(RUN_DIR)/bench-controller.md
	$(CARGO) bench --locked --bench knowledge -- --out $(RUN_DIR) > /dev/null
	@py=$$(scripts/bench-venv) && "$$py" scripts/bench_knowledge.py $(RUN_DIR)/knowledge-yuxi.json $(RUN_DIR)/knowledge-passages.json

fmt:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --all-targets --locked -- -D warnings

unit:
	@scripts/k8s-venv >/dev/null
	@scripts/mcp-venv >/dev/null
	YUXI_MCP_PYTHON=$(CURDIR)/.venv-mcp/bin/python YUXI_KUBE_VALIDATE=$(CURDIR)/.venv/bin/kubernetes-validate scripts/with-redis $(CARGO) test --all-targets --locked

## contract: schemathesis (pinned in .venv-contract) against the local mode, checking that the OpenAPI
## document at /api/openapi.json tells the truth (docs/operations/testing.md#the-contract-test)
contract: build
	@py=$$(scripts/contract-venv) && "$$py" scripts/contract-test $${CARGO_TARGET_DIR:-target}/debug/yuxi-operator

## chart-check: the checks of the Helm chart charts/yuxi-operator (scripts/chart-check), after the checker's
## own tests; fails when the chart is missing
chart-check:
	@scripts/k8s-venv >/dev/null
	.venv/bin/python -m unittest discover -q -s scripts/chart_checks -p 'test_*.py'
	.venv/bin/python scripts/chart-check

## crds: regenerate crds/ (and the chart's copy) from the resource types
crds: build
	$(BIN) crd --out-dir crds
	cp crds/*.yaml charts/yuxi-operator/crds/

build:
	$(CARGO) build --locked

## tools: the Rust components the checks use, and bubblewrap (the local sandbox the tests exercise)
tools:
	@$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy
	@command -v bwrap >/dev/null 2>&1 || scripts/apt-install bubblewrap

# A self-signed certificate for trying the webhook locally.
$(RUN_DIR)/tls.crt:
	@command -v openssl >/dev/null || scripts/apt-install openssl
	mkdir -p $(RUN_DIR)
	openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=localhost \
		-addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
		-keyout $(RUN_DIR)/tls.key -out $(RUN_DIR)/tls.crt 2>/dev/null

clean:
	$(CARGO) clean
	rm -rf $(RUN_DIR)

# The container image and the cluster check. Neither has been run where they were written: that machine has
# no container engine (no docker daemon, no podman) and no cluster.
IMAGE ?= yuxi-operator:dev
# docker, else podman; set it to choose.
CONTAINER_ENGINE ?= $(shell if command -v docker >/dev/null 2>&1; then echo docker; elif command -v podman >/dev/null 2>&1; then echo podman; fi)
IMAGE_VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
IMAGE_REVISION = $(shell git rev-parse HEAD 2>/dev/null || echo unknown)

.PHONY: image e2e

## image: the one image of every role, tagged $(IMAGE), built from the Dockerfile with docker or podman
image:
	@test -n "$(CONTAINER_ENGINE)" || { echo "make image: neither docker nor podman is installed; install one, or set CONTAINER_ENGINE" >&2; exit 1; }
	@$(CONTAINER_ENGINE) info >/dev/null 2>&1 || { echo "make image: '$(CONTAINER_ENGINE) info' fails: is its daemon (or machine) running?" >&2; exit 1; }
	$(CONTAINER_ENGINE) build --build-arg VERSION=$(IMAGE_VERSION) --build-arg REVISION=$(IMAGE_REVISION) -t $(IMAGE) .

## e2e: the image, installed with the chart on the current kind or k3d cluster, driven through the facade,
## then uninstalled (scripts/e2e says what it needs and checks)
e2e:
	scripts/e2e
