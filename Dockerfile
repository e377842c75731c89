# kymo's container images, from one Dockerfile:
#   runtime (the default, last stage): `kymo` on Debian slim, running `kymo serve`.
#   worker: `kymo worker` on the Rust toolchain image, for benchmark machines whose suites
#           build Rust code.
# Build: docker build -t kymo .            docker build --target worker -t kymo-worker .
# Run:   docker run -p 8080:8080 -v kymo-data:/data kymo
# No fonts are installed: trend graphs are SVG whose text the browser draws (plotters is built
# with its SVG backend only, without a font rasterizer).

FROM rust:1.95-bookworm AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
ENV SQLX_OFFLINE=true CARGO_TERM_COLOR=never
# Unpinned on purpose: the Debian release pins them, and security updates should land.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm libssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
# htmx from the npm registry, as the lockfile pins it; server/build.rs embeds it.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
# Dependencies first, against empty crates: this layer is rebuilt only when a manifest or the
# lockfile changes, not on every source change.
COPY Cargo.toml Cargo.lock ./
COPY .cargo/config.toml .cargo/
COPY core/Cargo.toml core/
COPY worker/Cargo.toml worker/
COPY bench-kernels/Cargo.toml bench-kernels/
COPY server/Cargo.toml server/
# Cargo reads every member's manifest and wants a file for each bench named without a path.
RUN mkdir -p core/src worker/src bench-kernels/src server/src \
    && touch core/src/lib.rs worker/src/lib.rs bench-kernels/src/lib.rs server/src/lib.rs \
    && echo 'fn main() {}' > server/src/main.rs \
    && for crate in core worker bench-kernels server; do \
         mkdir -p "$crate/benches"; \
         sed -n '/^\[\[bench\]\]/,/^$/s/^name = "\(.*\)"$/\1/p' "$crate/Cargo.toml" \
           | while read -r bench; do touch "$crate/benches/$bench.rs"; done; \
       done \
    && cargo build --release --locked -p kymo-server --bin kymo \
    && rm -rf core/src worker/src bench-kernels/src server/src \
              core/benches worker/benches bench-kernels/benches server/benches
COPY . .
# The copied sources may be older than the empty crates' build: touch them so that cargo
# rebuilds kymo's own crates (and only those).
RUN find core worker bench-kernels server -name '*.rs' -exec touch {} + \
    && cargo build --release --locked -p kymo-server --bin kymo \
    && install -m 0755 target/release/kymo /usr/local/bin/kymo

FROM rust:1.95-bookworm AS worker
# Cargo's registry cache must be writable by the unprivileged user that builds the suites.
ENV CARGO_HOME=/work/cargo KYMO_CACHE=/work/cache
RUN useradd --create-home --uid 10001 --user-group kymo \
    && mkdir /work && chown 10001:10001 /work
COPY --from=build /usr/local/bin/kymo /usr/local/bin/kymo
USER 10001:10001
WORKDIR /work
VOLUME /work
# KYMO_SERVER and KYMO_TOKEN come from the environment (see docker-compose.yml).
ENTRYPOINT ["kymo", "worker"]

FROM debian:bookworm-slim AS runtime
# git for suites that call it, ca-certificates for https clones, libssl3 for libgit2.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git ca-certificates libssl3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 --user-group kymo \
    && mkdir /data && chown 10001:10001 /data
COPY --from=build /usr/local/bin/kymo /usr/local/bin/kymo
USER 10001:10001
WORKDIR /data
# The database, git mirrors and work trees live here.
VOLUME /data
ENV KYMO_DB=/data/kymo.db KYMO_LISTEN=0.0.0.0:8080
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["kymo", "health", "--server", "http://127.0.0.1:8080"]
ENTRYPOINT ["kymo"]
CMD ["serve"]
