// Command mkimage writes a one-layer image as a Docker archive (what `docker save` writes and
// `ctr images import` reads) from files on this machine, so the test cluster's images are
// built without a registry, a base image or a Docker engine.
//
//	mkimage -o OUT.tar -tag NAME [-entrypoint /path,arg...] [-user UID] ENTRY...
//
// where each ENTRY is file:SRC:DEST (a file, mode kept), link:DEST:TARGET (a symlink) or
// dir:DEST (an empty directory, mode 1777 for /tmp, else 0755).
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	out := fs.String("o", "", "the archive to write")
	tag := fs.String("tag", "", "the image's name, e.g. hangar.test/pause:1")
	entrypoint := fs.String("entrypoint", "", "the entrypoint, comma-separated")
	user := fs.String("user", "", "the user to run as")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *tag == "" || fs.NArg() == 0 {
		return fmt.Errorf("want -o, -tag and at least one entry")
	}
	layer, err := layerTar(fs.Args())
	if err != nil {
		return err
	}
	layerSum := sha256.Sum256(layer)
	layerDigest := "sha256:" + hex.EncodeToString(layerSum[:])
	cfg := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC(),
		"config":       imageConfig(*entrypoint, *user),
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgSum := sha256.Sum256(cfgJSON)
	cfgName := hex.EncodeToString(cfgSum[:]) + ".json"
	layerName := hex.EncodeToString(layerSum[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{*tag}, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	for _, f := range []struct {
		name string
		data []byte
	}{{cfgName, cfgJSON}, {layerName, layer}, {"manifest.json", manifest}} {
		if err := addFile(tw, f.name, f.data, 0o644); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(*out, archive.Bytes(), 0o644)
}

func imageConfig(entrypoint, user string) map[string]any {
	c := map[string]any{"Env": []string{"PATH=/usr/local/bin:/usr/bin:/bin"}}
	if entrypoint != "" {
		c["Entrypoint"] = strings.Split(entrypoint, ",")
	}
	if user != "" {
		c["User"] = user
	}
	return c
}

// layerTar is the image's one layer: entries' parent directories first, then the entries.
func layerTar(entries []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	made := map[string]bool{}
	mkdirs := func(dir string) error {
		var parents []string
		for d := dir; d != "/" && d != "." && !made[d]; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			made[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range entries {
		kind, rest, _ := strings.Cut(e, ":")
		a, b, _ := strings.Cut(rest, ":")
		var err error
		switch kind {
		case "file":
			if err = mkdirs(path.Dir(b)); err == nil {
				err = addHostFile(tw, a, b)
			}
		case "link":
			if err = mkdirs(path.Dir(a)); err == nil {
				err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(a, "/"), Linkname: b, Mode: 0o777})
			}
		case "dir":
			mode := int64(0o755)
			if a == "/tmp" {
				mode = 0o1777
			}
			if err = mkdirs(path.Dir(a)); err == nil {
				made[a] = true
				err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(a, "/") + "/", Mode: mode})
			}
		default:
			err = fmt.Errorf("entry %q: want file:SRC:DEST, link:DEST:TARGET or dir:DEST", e)
		}
		if err != nil {
			return nil, fmt.Errorf("add %s: %w", e, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func addHostFile(tw *tar.Writer, src, dest string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(dest, "/"), Mode: int64(fi.Mode().Perm()), Size: fi.Size()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

func addFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
