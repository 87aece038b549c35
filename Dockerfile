# The one image of every role: controller, webhook, api, and both containers of a sandbox pod (runner and
# sandbox-exec). `docker build .` builds it from this file; `make image` builds it without docker.
#
# Three stages:
# - build: the release binary and the example files, in /out;
# - root:  the runtime root, /rootfs: the files of a few Debian packages (glibc, CA certificates, and the
#          shell and tools the sandbox runs the model's commands with), copied by scripts/image-root;
#          no package manager, no setuid or setgid file;
# - the image, FROM scratch: that root, the binary and the files, the user, the entrypoint, the labels.
#
# `make image` (scripts/image-build) builds the last stage alone, with podman, from the text of this file
# from `FROM scratch` to its end, giving it as `build` and `root` two folders it makes the same way:
# the binary built on the host with the same examples, and scripts/image-root run on a Debian root that
# mmdebstrap made. So both builds follow the same instructions; `make image-test` checks that the first
# two stages here still make what `make image` gives in their place.
#
# Dependency caching: Cargo.toml and Cargo.lock are copied first and the dependencies are built against a
# placeholder crate, so that layer is reused until the manifest or the lock file changes, and a change to
# src/ rebuilds this crate only. Plain layers rather than BuildKit cache mounts: the same with docker's
# BuildKit and classic builders and with podman (buildah), and a registry cache (--cache-from) keeps them
# in CI. A change to Cargo.lock rebuilds every dependency.
#
# The build and root stages use the same Debian release, so the binary finds the glibc it was linked
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
# The web console's built files, which the binary embeds (make console builds them; they are checked in).
COPY console/dist console/dist
RUN cargo build --release --locked --bin yuxi-operator \
    && install -D -m 0755 target/release/yuxi-operator /out/bin/yuxi-operator

# Defaults for trying the examples (see below), readable by any user whatever the build context's modes.
COPY examples/skills /out/share/skills
COPY examples/scripts /out/share/scripts
RUN chmod -R u=rwX,go=rX /out/share


FROM docker.io/library/debian:${DEBIAN_RELEASE}-slim AS root

# The packages scripts/image-root names (most are in the base image already), then their files alone.
COPY scripts/image-root /usr/local/bin/image-root
RUN apt-get update \
    && apt-get install -y --no-install-recommends $(image-root --packages) \
    && image-root / /rootfs


FROM scratch

# glibc and the CA bundle (rustls trusts the system's roots), and /bin/sh, bash, coreutils, grep, sed,
# find, diff, tar, gzip and awk: the sandbox container runs the model's `execute` commands with /bin/sh -c.
# Bubblewrap is not there: it isolates commands in the local mode only; in a cluster the sandbox is its
# own container. A sandbox with more tools (Python, git...) is an image built FROM this one.
COPY --from=root /rootfs/ /
COPY --from=build /out/bin/yuxi-operator /usr/local/bin/yuxi-operator
# Defaults for trying the examples: examples/skills as /usr/share/yuxi/skills (a skills library to seed a
# library volume from, or to pass to `local --skills-library`), and examples/scripts as
# /usr/share/yuxi/scripts, the offline scripts `scripted/auto` plays (deep-research's), which every
# runner reads through YUXI_SCRIPTS_DIR. Only scripted models read it; it is no skills library default:
# a sandbox pod without a library volume gets no skills.
COPY --from=build /out/share /usr/share/yuxi
# PATH: an image FROM scratch has none, and the sandbox pod's containers name their command
# `yuxi-operator`.
ENV PATH=/usr/local/bin:/usr/bin:/bin \
    YUXI_SCRIPTS_DIR=/usr/share/yuxi/scripts

# The pods' ids (65532, "nonroot" in /etc/passwd, as in distroless images).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/yuxi-operator"]
CMD ["--help"]

# Last, so that a new revision rebuilds nothing above. `make image` passes VERSION, REVISION and SOURCE.
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=https://github.com/yuxi-dev/yuxi-operator
LABEL org.opencontainers.image.title="yuxi-operator" \
      org.opencontainers.image.description="A Kubernetes operator that runs LLM agents and subagents declared as custom resources" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
