# coord in an image FROM scratch: no base image, no registry. The binaries are
# built static on the host (CGO_ENABLED=0) by deploy/build-image.sh, which then
# runs `docker build`; `make image` and `make up` call it. See docs/deploy.md.
FROM scratch
# BIN is where deploy/build-image.sh put coord, coordctl and the CA bundle.
ARG BIN=build/docker
# VERSION only labels the image (a rolling upgrade replaces one by another).
ARG VERSION=dev
LABEL org.opencontainers.image.title="coord" \
      org.opencontainers.image.source="https://example.invalid/coord" \
      org.opencontainers.image.version="${VERSION}"
# /etc/passwd and /etc/group name the non-root user coord (65532); /data (the
# volume's mount point, so a new named volume is owned by coord) and /tmp.
COPY --chown=65532:65532 deploy/docker/rootfs/ /
COPY ${BIN}/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY ${BIN}/coord ${BIN}/coordctl /usr/local/bin/
USER 65532:65532
WORKDIR /data
ENV PATH=/usr/local/bin
# raft, gRPC, gossip (TCP and UDP), ZooKeeper, HTTP
EXPOSE 2888 2182 7946 7946/udp 2181 8080
VOLUME ["/data"]
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=3 CMD ["coord", "health"]
ENTRYPOINT ["coord"]
