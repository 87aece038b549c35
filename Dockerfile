# Two images, from one binary: `yuxi-operator`, the control plane (controller, webhook, api, and the sandbox
# pods' `runner` container), and `yuxi-operator-sandbox`, the sandbox pods' `sandbox` container
# (sandbox-exec, which runs the model's `execute` commands). `docker build .` builds the first;
# `docker build --target sandbox .` the second. `make image` builds both without docker.
#
# Five stages:
# - build:         the release binary and the example files, in /out;
# - root:          the runtime roots, copied out of a few Debian packages by scripts/image-root: /rootfs (glibc
#                  and the CA certificates) and /sandbox-rootfs (the shell and the tools the sandbox runs the
#                  model's commands with); no package manager, no setuid or setgid file;
# - control-plane: the control-plane image, FROM scratch: /rootfs, the binary and the files, the user, the
#                  entrypoint, the labels. No shell, and no program but the binary;
# - sandbox:       the sandbox image: the control-plane image and /sandbox-rootfs on top, so that a node
#                  that pulls both fetches the control-plane layer once;
# - the last, unnamed: the control-plane image again, so that a build without --target gets no shell.
#
# `make image` (scripts/image-build) builds the control-plane and sandbox stages alone, with podman, from
# the text of this file from `FROM scratch` to its end, giving it as `build` and `root` two folders it
# makes the same way: the binary built on the host with the same examples, and scripts/image-root run on a
# Debian root that mmdebstrap made; the sandbox stage is built on the control-plane image just built. So
# both builds follow the same instructions; `make image-test` checks that the first two stages here still
# make what `make image` gives in their place.
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

# The packages scripts/image-root names (most are in the base image already), then their files alone: the
# control plane's in /rootfs, the sandbox's in /sandbox-rootfs.
COPY scripts/image-root /usr/local/bin/image-root
RUN apt-get update \
    && apt-get install -y --no-install-recommends $(image-root --packages) \
    && image-root / /rootfs \
    && image-root --sandbox / /sandbox-rootfs


FROM scratch AS control-plane

# glibc and the CA bundle (rustls trusts the system's roots), and the accounts: no shell, and no program but
# the binary. The roles start no program but their own binary (the API reads documents in a subprocess of
# it; the local mode starts its runners so).
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


FROM control-plane AS sandbox

# /bin/sh, bash, coreutils, grep, sed, find, diff, tar, gzip and awk: the sandbox container runs the
# model's `execute` commands with /bin/sh -c. Bubblewrap is not there: it isolates commands in the local
# mode only; in a cluster the sandbox is its own container. A sandbox with more tools (Python, git...) is
# an image built FROM this one, named by the chart's sandboxImage. The user, entrypoint, environment and
# the version, revision and source labels are the control-plane image's.
COPY --from=root /sandbox-rootfs/ /
LABEL org.opencontainers.image.title="yuxi-operator-sandbox" \
      org.opencontainers.image.description="The sandbox container of yuxi-operator's sandbox pods: the model's commands, with a shell and the tools they use"


# What a build without --target gives: the control-plane image, with no shell.
FROM control-plane
