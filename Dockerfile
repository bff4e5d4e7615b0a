# The hangar image: one statically linked binary, three small files and the
# state directories on an empty base, so nothing is pulled. Build it with
# script/docker-build, which first builds the binary on the host:
#
#   RUSTFLAGS='-C target-feature=+crt-static' cargo build --profile dist \
#       --target x86_64-unknown-linux-gnu --target-dir target/static -p hangar
#   docker build -t hangar:dev .
#
# What the image holds, paths, ports, user and variables: doc/packaging.md.
FROM scratch

ARG VERSION=dev
LABEL org.opencontainers.image.title="hangar" \
      org.opencontainers.image.description="Hangar, an S3-compatible object store cluster" \
      org.opencontainers.image.licenses="AGPL-3.0-only" \
      org.opencontainers.image.version="${VERSION}"

COPY docker/rootfs/etc/ /etc/
COPY --chown=10001:10001 docker/rootfs/var/lib/hangar/ /var/lib/hangar/
COPY target/static/x86_64-unknown-linux-gnu/dist/hangar /usr/local/bin/hangar

ENV PATH=/usr/local/bin \
    HANGAR_CONFIG_FILE=/etc/hangar.toml \
    NO_COLOR=1

USER 10001:10001
WORKDIR /var/lib/hangar
# S3, RPC (QUIC), admin (/health, /metrics).
EXPOSE 3900/tcp 3901/udp 3903/tcp

# `hangar health` GETs /health on [admin] api_bind_addr of the config.
HEALTHCHECK --interval=5s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/hangar", "health"]

ENTRYPOINT ["/usr/local/bin/hangar"]
CMD ["server"]
