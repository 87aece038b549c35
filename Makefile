# The two commands a newcomer needs: `make run` and `make test`. Both install what they need.

CARGO ?= cargo
BIN := target/debug/yuxi-operator
RUN_DIR := .run
WEBHOOK_LISTEN ?= 127.0.0.1:8443

.PHONY: run test fmt lint unit crds build tools clean

## run: check the manifests in examples/ and serve the admission webhook for them on $(WEBHOOK_LISTEN)
run: build $(RUN_DIR)/tls.crt
	$(BIN) validate examples
	@echo "Serving the admission webhook on https://$(WEBHOOK_LISTEN) (offline: single-object checks). Ctrl-C stops it."
	$(BIN) webhook --offline --listen $(WEBHOOK_LISTEN) --tls-cert $(RUN_DIR)/tls.crt --tls-key $(RUN_DIR)/tls.key

## test: formatting, lints (warnings denied) and every test
test: tools fmt lint unit

fmt:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --all-targets --locked -- -D warnings

unit:
	scripts/with-redis $(CARGO) test --all-targets --locked

## crds: regenerate crds/ from the resource types
crds: build
	$(BIN) crd --out-dir crds

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
