package main

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite "+benchDataFile+" from its generator")

func TestRealisticBundleIsGenerated(t *testing.T) {
	want, err := realisticAgents()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(benchDataFromDir, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(benchDataFromDir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what realisticAgents generates (%d bytes, want %d): change the generator and run go test ./bench -run RealisticBundle -update", benchDataFile, len(got), len(want))
	}
}
