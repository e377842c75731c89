# kymo: one image with the `kymo` binary; `kymo serve` by default, `kymo worker` by command.
# Build: docker build -t kymo .   Run: docker run -p 8080:8080 -v kymo-data:/data kymo

FROM rust:1.95-bookworm AS build
WORKDIR /src
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm libssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
ENV SQLX_OFFLINE=true
RUN cargo build --release --locked -p kymo-server --bin kymo

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates libssl3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 kymo \
    && mkdir /data && chown kymo /data
COPY --from=build /src/target/release/kymo /usr/local/bin/kymo
USER kymo
WORKDIR /data
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=3s CMD ["kymo", "health", "--server", "http://127.0.0.1:8080"]
ENTRYPOINT ["kymo"]
CMD ["serve", "--db", "/data/kymo.db", "--listen", "0.0.0.0:8080"]
