// Command image builds the outboxd container image without a Docker engine:
// a static binary (CGO_ENABLED=0), CA certificates and a non-root user in
// one layer on an empty base, written as an OCI image layout archive.
//
//	cd deploy && go run ./image -o ../bin/outboxd-image.tar -version v1.2.3
//
// Load it with `podman load -i`, `docker load -i` (Docker 25 and later) or
// push it with `skopeo copy oci-archive:bin/outboxd-image.tar docker://REGISTRY/outboxd:TAG`.
// The Dockerfile at the repository root builds the same image with Docker.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
)

func main() {
	var o Options
	flag.StringVar(&o.Output, "o", "outboxd-image.tar", "the OCI image layout archive to write")
	flag.StringVar(&o.Source, "src", "..", "the outboxd repository to build from")
	flag.StringVar(&o.Version, "version", "dev", "the version outboxd --version prints")
	flag.StringVar(&o.Tag, "tag", "outboxd:latest", "the image's reference name in the archive")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "the target architecture")
	flag.StringVar(&o.CACertificates, "ca", DefaultCACertificates, "the CA bundle to install")
	flag.Parse()
	if err := Build(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", o.Output)
}
