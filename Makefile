# The two commands a newcomer needs: `make run` and `make test`. Both install what they need.

CARGO ?= cargo
BIN := $${CARGO_TARGET_DIR:-target}/debug/yuxi-operator
RUN_DIR := .run
LISTEN ?= 127.0.0.1:8080
WEBHOOK_LISTEN ?= 127.0.0.1:8443

.PHONY: run webhook test faults bench fmt lint unit contract chart-check crds build tools image-tools clean
.PHONY: console console-check console-e2e kube-bin kube-test

## run: the system on this machine, over the manifests in examples/: the facade on $(LISTEN), its runs
## in its process, a private Redis keeping its data in $(RUN_DIR)/redis (or the one REDIS_URL names)
run: build
	$(BIN) validate examples
	@echo "Serving the facade on http://$(LISTEN) for the agents in examples/ (tokens in examples/local-users.yaml). Ctrl-C stops it."
	@echo "Open the web console at http://$(LISTEN)/console/ (user alice, password alice-password)."
	@echo "Try: curl -s -H 'Authorization: Bearer alice-token' 'http://$(LISTEN)/api/agent?include_subagents=true'"
	@echo "Or a research run (its report lands in $(RUN_DIR)/data/users/<uid>/threads/<thread_id>/outputs/report.md):"
	@echo "  curl -s -H 'Authorization: Bearer alice-token' -H 'content-type: application/json' http://$(LISTEN)/api/agent/runs -d '{\"query\": \"Which solid electrolytes conduct lithium best?\", \"agent_slug\": \"deep-research\"}'"
	YUXI_REDIS_DIR=$(RUN_DIR)/redis scripts/with-redis sh -c 'REDIS_URL=$${REDIS_URL:-$$YUXI_TEST_REDIS_URL} exec $(BIN) local --manifests examples --listen $(LISTEN) --users examples/local-users.yaml --data-dir $(RUN_DIR)/data'

## webhook: the admission webhook, offline, with a self-signed certificate, on $(WEBHOOK_LISTEN)
webhook: build $(RUN_DIR)/tls.crt
	$(BIN) webhook --offline --listen $(WEBHOOK_LISTEN) --tls-cert $(RUN_DIR)/tls.crt --tls-key $(RUN_DIR)/tls.key

## test: formatting, lints (warnings denied), the Helm chart's checks, every test, the real-cluster tests
## (make kube-test), the contract test, the console's build check and its browser tests, the image built
## and tested (make image-test) where podman can run a container, and the README's flow in real pods
## (make e2e-local) where this runs as root
test: tools fmt chart-check lint unit kube-test contract console-check console-e2e image-check e2e-local-check

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
	$(CARGO) clippy --test kube --test e2e_local --locked -- -D warnings

unit:
	@scripts/k8s-venv >/dev/null
	@scripts/mcp-venv >/dev/null
	@scripts/a2a-venv >/dev/null
	YUXI_MCP_PYTHON=$(CURDIR)/.venv-mcp/bin/python YUXI_A2A_PYTHON=$(CURDIR)/.venv-a2a/bin/python YUXI_KUBE_VALIDATE=$(CURDIR)/.venv/bin/kubernetes-validate scripts/with-redis $(CARGO) test --all-targets --locked

## contract: schemathesis (pinned in .venv-contract) against the local mode, checking that the OpenAPI
## document at /api/openapi.json tells the truth (docs/operations/testing.md#the-contract-test)
contract: build
	@py=$$(scripts/contract-venv) && "$$py" scripts/contract-test $${CARGO_TARGET_DIR:-target}/debug/yuxi-operator

## kube-bin: the pinned Kubernetes binaries (etcd, kube-apiserver, kube-controller-manager,
## kube-scheduler, kubelet, kubectl) and Helm, built from source through the Go module proxy into
## ~/.cache/yuxi-operator/kube/<versions>/bin, or reused from there (scripts/kube-bin, scripts/kube-versions)
kube-bin:
	@scripts/kube-bin

## kube-test: the operator against a real API server (tests/kube): etcd, kube-apiserver and
## kube-controller-manager on this machine in namespaces of their own (scripts/kube-netns, as root), the
## chart installed by Helm, the roles run from its Deployments (docs/operations/testing.md)
kube-test: tools
	@{ command -v curl && command -v redis-server; } >/dev/null 2>&1 || scripts/apt-install curl redis-server
	@# Built before the network namespace, which reaches no module proxy: the suite's OpenID provider.
	@scripts/oidc-provider >/dev/null
	@bin=$$(scripts/kube-bin | tail -n 1) && $(CARGO) test --locked --test kube --no-run && \
		YUXI_KUBE_BIN=$$bin CARGO_NET_OFFLINE=true scripts/kube-netns scripts/with-redis \
		$(CARGO) test --locked --test kube

## console: the web console's front end (console/src, Preact and TypeScript) built by the pinned Vite into
## console/dist, which the binary embeds and serves at /console; commit console/dist with the sources
console:
	@scripts/console-npm
	cd console && nice -n 10 node_modules/.bin/tsc --noEmit && nice -n 10 node_modules/.bin/vite build

## console-check: console/dist is what console/src builds (type-checked, built into a temporary folder and
## compared file by file), so that `cargo build` alone embeds the current console (scripts/console-check)
console-check:
	@scripts/console-npm
	scripts/console-check

## console-e2e: the console in Debian's Chromium (headless, driven by playwright-core) against the local
## mode it starts: login, agents and the form, a deep-research run and its subagents, knowledge bases,
## approvals, both languages, a phone's width; screenshots of each page in $(RUN_DIR)/console/
console-e2e: build
	@scripts/console-npm
	@command -v chromium >/dev/null 2>&1 || scripts/apt-install chromium
	@# A font with Chinese characters, so that the Chinese pages' screenshots show text, not boxes.
	@fc-list :lang=zh 2>/dev/null | grep -q . || scripts/apt-install fonts-wqy-microhei
	cd console && YUXI_BIN=$(CURDIR)/$${CARGO_TARGET_DIR:-target}/debug/yuxi-operator node --test --test-concurrency=1 e2e/

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

## tools: the Rust components the checks use, bubblewrap (the local sandbox the tests exercise), and what
## the image is built and tested with (image-tools)
tools: image-tools
	@$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy
	@command -v bwrap >/dev/null 2>&1 || scripts/apt-install bubblewrap

## image-tools: podman with the runc runtime, mmdebstrap, catatonit (the image test's probe) and openssl
## (its certificate)
image-tools:
	@{ command -v podman && command -v runc && command -v mmdebstrap && command -v catatonit; } >/dev/null 2>&1 \
		|| scripts/apt-install podman runc mmdebstrap catatonit
	@command -v openssl >/dev/null 2>&1 || scripts/apt-install openssl

# A self-signed certificate for trying the webhook locally.
$(RUN_DIR)/tls.crt:
	@command -v openssl >/dev/null || scripts/apt-install openssl
	mkdir -p $(RUN_DIR)
	openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=localhost \
		-addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
		-keyout $(RUN_DIR)/tls.key -out $(RUN_DIR)/tls.crt 2>/dev/null

clean:
	$(CARGO) clean
	rm -rf console/node_modules
	@# podman's run state of the image's storages, kept in /tmp (scripts/podman)
	@for storage in storage test-storage; do \
		YUXI_PODMAN_ROOT=$(CURDIR)/$(RUN_DIR)/image/$$storage scripts/podman --paths | tail -n 1 | xargs rm -rf; done
	rm -rf $(RUN_DIR)

# The container images and the cluster check.
# The control-plane image's name. Without a registry it is Docker Hub's spelling, as kubelets resolve the
# chart's default `yuxi-operator`: yuxi-operator:0.1.0 is named docker.io/library/yuxi-operator:0.1.0.
IMAGE ?= yuxi-operator:$(IMAGE_VERSION)
# The sandbox image's: IMAGE's with `-sandbox` after its repository (registry.example.com/yuxi-operator:0.1.0
# gives registry.example.com/yuxi-operator-sandbox:0.1.0), as the chart's sandboxImage defaults to.
SANDBOX_IMAGE ?= $(shell printf '%s' '$(IMAGE)' | sed -E 's|^(.*/)?([^/:]+)(:[^/:]*)?$$|\1\2-sandbox\3|')
# The Debian release of the runtime root: its glibc must be at least the one the binary is built against.
IMAGE_SUITE ?= bookworm
IMAGE_VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
IMAGE_REVISION = $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE_SOURCE = $(shell sed -n 's/^home: //p' charts/yuxi-operator/Chart.yaml)
RELEASE_BIN = $${CARGO_TARGET_DIR:-target}/release/yuxi-operator
IMAGE_ARGS = --image $(IMAGE) --sandbox-image $(SANDBOX_IMAGE) --version $(IMAGE_VERSION) --revision $(IMAGE_REVISION) --source $(IMAGE_SOURCE) \
	--binary $(RELEASE_BIN)

.PHONY: image image-test image-check e2e e2e-local

## image: the two images, without a container daemon or a pulled image: the release binary built here, two
## runtime roots of Debian packages (mmdebstrap), the Dockerfile's control-plane and sandbox stages built by
## podman; exported as .run/image/yuxi-operator.oci.tar, named $(IMAGE) (the control plane: no shell), and
## .run/image/yuxi-operator-sandbox.oci.tar, named $(SANDBOX_IMAGE) (the sandbox container's, with the
## shell and tools `execute` needs) (scripts/image-build)
image: image-tools
	$(CARGO) build --release --locked
	scripts/image-build $(IMAGE_ARGS) --suite $(IMAGE_SUITE)

## image-test: each role run from the images' archives as the chart runs its pods (user 65532, read-only
## root, no capabilities, no network where none is needed), the images' contents (no shell in the control
## plane's) and the Dockerfile against them (scripts/image-test, docs/operations/testing.md#the-image-test)
image-test: image
	scripts/with-redis scripts/image-test $(IMAGE_ARGS)

# In `make test`: make image-test where podman can run a container; elsewhere why not, and a skip.
image-check: image-tools
	@scripts/image-test --probe; status=$$?; \
	if [ $$status -eq 0 ]; then $(MAKE) --no-print-directory image-test; \
	elif [ $$status -eq 2 ]; then echo "make test: SKIPPED make image-test: podman cannot run containers here (above)" >&2; \
	else exit $$status; fi

## e2e-local: the README's deep-research flow in real pods on this machine (tests/e2e_local.rs): a control
## plane and a node (containerd, kubelet, kube-proxy, CoreDNS) built from pinned sources, the images of
## `make image` imported, the chart installed by Helm (as root; docs/operations/testing.md#runs-in-real-pods)
e2e-local: image-tools
	@{ command -v containerd && command -v ctr && command -v runc && command -v iptables && command -v catatonit \
		&& command -v redis-server && command -v curl && [ -x /usr/lib/cni/bridge ]; } >/dev/null 2>&1 \
		|| scripts/apt-install containerd runc containernetworking-plugins iptables catatonit redis-server curl
	$(MAKE) --no-print-directory image
	@# Built before the network namespace, which reaches no module proxy: the suite's OpenID provider.
	@scripts/oidc-provider >/dev/null
	@bin=$$(scripts/kube-bin | tail -n 1) && $(CARGO) test --locked --test e2e_local --no-run && \
		YUXI_KUBE_BIN=$$bin YUXI_IMAGE_ARCHIVE=$(CURDIR)/.run/image/yuxi-operator.oci.tar \
		YUXI_SANDBOX_IMAGE_ARCHIVE=$(CURDIR)/.run/image/yuxi-operator-sandbox.oci.tar CARGO_NET_OFFLINE=true \
		scripts/kube-netns $(CARGO) test --locked --test e2e_local -- --nocapture

# In `make test`: make e2e-local as root (a kubelet needs it); elsewhere why not, and a skip.
.PHONY: e2e-local-check
e2e-local-check:
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory e2e-local; \
	else echo "make test: SKIPPED make e2e-local: a kubelet needs root, and this runs as $$(id -un)" >&2; fi

## e2e: the image, loaded into the current kind or k3d cluster and installed with the chart, driven through
## the facade, then uninstalled (scripts/e2e says what it needs and checks). Not run where it was written:
## that machine has no cluster
e2e:
	scripts/e2e
