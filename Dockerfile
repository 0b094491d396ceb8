# hangar's image, built by `make image` as hangar:dev with the local engine and no pulls: FROM
# scratch, with what `make image` puts in its build context (.cache/image) beforehand:
#   hangar, hangar-envd      the static binaries of `make build` (CGO_ENABLED=0)
#   ca-certificates.crt      this machine's CA bundle, for TLS to PostgreSQL, E2B, an API server
#   data/                    an empty directory, the data dir's mount point
# For a registry, Dockerfile.distroless builds the same layout from source on a distroless base.
#
# Layout (the Kubernetes provider and the chart rely on it):
#   /usr/local/bin/hangar        the control plane (ENTRYPOINT; CMD serve)
#   /usr/local/bin/hangar-envd   the in-sandbox binary, copied into sandbox pods by an init
#                                container and found beside hangar by `hangar serve`
#   /data                        HANGAR_DATA_DIR: SQLite, the admin token file, the secret;
#                                mount a volume there (the root filesystem may be read-only)
# It runs as 65532:65532 (no passwd file is needed for a numeric user).
FROM scratch
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY hangar hangar-envd /usr/local/bin/
COPY --chown=65532:65532 data/ /data/
ENV HANGAR_LISTEN=0.0.0.0:8080 \
    HANGAR_DATA_DIR=/data
USER 65532:65532
EXPOSE 8080
# `hangar health` asks 127.0.0.1 at HANGAR_LISTEN's port for /readyz (there is no curl here).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/hangar", "health"]
ENTRYPOINT ["/usr/local/bin/hangar"]
CMD ["serve"]
