# The one image of every role: controller, webhook, api, and both containers of a sandbox pod (runner and
# sandbox-exec). `make image` builds it with docker or podman.
#
# Dependency caching: Cargo.toml and Cargo.lock are copied first and the dependencies are built against a
# placeholder crate, so that layer is reused until the manifest or the lock file changes, and a change to
# src/ rebuilds this crate only. Plain layers rather than BuildKit cache mounts: the same with docker's
# BuildKit and classic builders and with podman (buildah), and a registry cache (--cache-from) keeps them
# in CI. A change to Cargo.lock rebuilds every dependency.
#
# The build and runtime stages use the same Debian release, so the binary finds the glibc it was linked
# against (it links libc, libm and libgcc_s only; TLS is rustls, no OpenSSL).

# The toolchain the crate is developed with (Cargo.toml: edition 2024, rust-version 1.89).
ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM docker.io/library/rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS build
WORKDIR /build

# The dependencies, against a placeholder lib.rs and main.rs; then this crate's own artifacts are removed,
# so the real sources below are always compiled, whatever their timestamps.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo build --release --locked --bin yuxi-operator \
    && rm -rf src target/release/yuxi-operator target/release/yuxi-operator.d \
        target/release/.fingerprint/yuxi-operator-* \
        target/release/deps/yuxi_operator-* target/release/deps/libyuxi_operator-*

COPY src src
RUN cargo build --release --locked --bin yuxi-operator \
    && install -D -m 0755 target/release/yuxi-operator /out/bin/yuxi-operator

# Defaults for trying the examples (see below), readable by any user whatever the build context's modes.
COPY examples/skills /out/share/skills
COPY examples/scripts /out/share/scripts
RUN chmod -R u=rwX,go=rX /out/share


FROM docker.io/library/debian:${DEBIAN_RELEASE}-slim

# ca-certificates: the model endpoint, MCP servers and the API server are reached over rustls, which trusts
# the system's roots. /bin/sh, bash and coreutils are part of the base image: the sandbox container runs the
# model's `execute` commands with /bin/sh -c. Bubblewrap is not installed: it isolates commands in the
# local mode only; in a cluster the sandbox is its own container.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*

COPY --from=build /out/bin/yuxi-operator /usr/local/bin/yuxi-operator
# Defaults for trying the examples: examples/skills as /usr/share/yuxi/skills (a skills library to seed a
# library volume from, or to pass to `local --skills-library`), and examples/scripts as
# /usr/share/yuxi/scripts, the offline scripts `scripted/auto` plays (deep-research's), which every
# runner reads through YUXI_SCRIPTS_DIR. Only scripted models read it; it is no skills library default:
# a sandbox pod without a library volume gets no skills.
COPY --from=build /out/share /usr/share/yuxi
ENV YUXI_SCRIPTS_DIR=/usr/share/yuxi/scripts

# The sandbox pod's ids (65532, "nonroot" in distroless images); no passwd entry is needed.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/yuxi-operator"]
CMD ["--help"]

# Last, so that a new revision rebuilds nothing above. `make image` passes VERSION and REVISION.
ARG DEBIAN_RELEASE
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="yuxi-operator" \
      org.opencontainers.image.description="A Kubernetes operator that runs LLM agents and subagents declared as custom resources" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="docker.io/library/debian:${DEBIAN_RELEASE}-slim"
