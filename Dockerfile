# syntax=docker/dockerfile:1
# toolpdp sidecar image: a static binary on distroless, non-root, no shell.
#   docker build -t toolpdp .
#   docker run --rm toolpdp serve --help
# With no flags the image serves the embedded default policy on 127.0.0.1:8787.

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The same command CI runs (scripts/build), so the image's binary is the tested one.
RUN scripts/build /out/toolpdp && echo '{"toolName": "Read"}' | /out/toolpdp decide | grep -q DECISION_ALLOW

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="toolpdp" \
      org.opencontainers.image.description="Policy decision point for AI-agent tool calls: an OPA-based gRPC sidecar" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/toolpdp/toolpdp"
COPY --from=build /out/toolpdp /toolpdp
USER 65532:65532
EXPOSE 8787 8788 8789
ENTRYPOINT ["/toolpdp"]
CMD ["serve"]
