# The outboxd image, for users with Docker:
#
#   docker build --build-arg VERSION=v1.2.3 -t outboxd .
#   docker run --rm outboxd --version
#
# Without a Docker engine, `make image` builds the same image (same user,
# paths, entrypoint) with go-containerregistry; see deploy/image.

ARG GO_VERSION=1.26
FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# Static: the final image has no C library.
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/outboxd/outboxd/cmd.Version=${VERSION}" \
      -o /out/outboxd ./cmd/outboxd

# distroless/static: CA certificates, time zones, a "nonroot" user (65532)
# and no shell or package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/outboxd /usr/local/bin/outboxd
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/outboxd"]
CMD ["serve"]
