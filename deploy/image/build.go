package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's layout. The user matches distroless' "nonroot", which the
// Dockerfile uses, so both images behave the same.
const (
	// DefaultCACertificates is the host's CA bundle (Debian's ca-certificates).
	DefaultCACertificates = "/etc/ssl/certs/ca-certificates.crt"
	caPath                = "etc/ssl/certs/ca-certificates.crt"
	binaryPath            = "usr/local/bin/outboxd"
	homeDir               = "home/nonroot"
	nonRootID             = 65532
	// User is the image's user, uid:gid, not root.
	User = "65532:65532"
	// HTTPPort is where `outboxd serve` listens in the Kubernetes manifests.
	HTTPPort = "8080/tcp"
)

// Entrypoint is the image's entrypoint; its default command is serve.
var Entrypoint = []string{"/" + binaryPath}

// Options say what to build and where to write it.
type Options struct {
	Output, Source, Version, Tag, Arch, CACertificates string
}

// Build compiles outboxd and writes the image as an OCI layout archive.
func Build(o Options) error {
	work, err := os.MkdirTemp("", "outboxd-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "outboxd")
	build := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/outboxd/outboxd/cmd.Version="+o.Version,
		"-o", bin, "./cmd/outboxd")
	build.Dir = o.Source
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	img, err := Image(bin, o)
	if err != nil {
		return err
	}
	return writeArchive(img, o.Tag, o.Output, filepath.Join(work, "layout"))
}

// Image assembles the image around the binary at bin.
func Image(bin string, o Options) (v1.Image, error) {
	files, err := rootFS(bin, o.CACertificates)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", o.Arch
	cfg.Config = v1.Config{
		User:         User,
		Entrypoint:   Entrypoint,
		Cmd:          []string{"serve"},
		WorkingDir:   "/" + homeDir,
		Env:          []string{"SSL_CERT_FILE=/" + caPath, "HOME=/" + homeDir},
		ExposedPorts: map[string]struct{}{HTTPPort: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "outboxd",
			"org.opencontainers.image.version": o.Version,
		},
	}
	return mutate.ConfigFile(img, cfg)
}

// rootFS is the layer's tar: the binary, the CA bundle, passwd and group
// entries for the non-root user and its home. Times are fixed so the same
// inputs give the same layer digest.
func rootFS(bin, caBundle string) ([]byte, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return nil, fmt.Errorf("CA certificates (install Debian's ca-certificates or pass -ca): %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, mode fs.FileMode, uid int, body []byte) error {
		h := &tar.Header{Name: name, Mode: int64(mode.Perm()), Uid: uid, Gid: uid, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Size: int64(len(body))}
		if mode.IsDir() {
			h.Typeflag, h.Size, h.Name = tar.TypeDir, 0, name+"/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	entries := []struct {
		name string
		mode fs.FileMode
		uid  int
		body string
	}{
		{"etc", fs.ModeDir | 0o755, 0, ""},
		{"etc/passwd", 0o644, 0, fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/%s:/sbin/nologin\n", nonRootID, nonRootID, homeDir)},
		{"etc/group", 0o644, 0, fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRootID)},
		{"etc/ssl", fs.ModeDir | 0o755, 0, ""},
		{"etc/ssl/certs", fs.ModeDir | 0o755, 0, ""},
		{caPath, 0o644, 0, string(ca)},
		{"home", fs.ModeDir | 0o755, 0, ""},
		{homeDir, fs.ModeDir | 0o700, nonRootID, ""},
		{"tmp", fs.ModeDir | fs.ModeSticky | 0o777, 0, ""},
		{"usr", fs.ModeDir | 0o755, 0, ""},
		{"usr/local", fs.ModeDir | 0o755, 0, ""},
		{"usr/local/bin", fs.ModeDir | 0o755, 0, ""},
		{binaryPath, 0o755, 0, string(binary)},
	}
	for _, e := range entries {
		if err := add(e.name, e.mode, e.uid, []byte(e.body)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeArchive writes img as an OCI image layout in dir, tagged tag, and
// tars the layout into out.
func writeArchive(img v1.Image, tag, out, dir string) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return fmt.Errorf("OCI layout: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = tw.Write(body)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
