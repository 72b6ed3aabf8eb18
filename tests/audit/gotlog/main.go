// Command gotlog checks this project's Merkle tree against the Go checksum database's
// implementation (golang.org/x/mod/sumdb/tlog), which nobody here wrote.
//
// It reads one JSON document on stdin: the records (hex of each leaf's data), the tree
// sizes whose roots to compute, and proofs to check; it writes one JSON document on
// stdout: tlog's roots, and for each proof whether tlog's CheckRecord or CheckTree
// accepts it, with tlog's own proof for the same question. Built offline from Debian's
// golang-golang-x-mod-dev (tests/audit/test_merkle_go.py).
package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type check struct {
	Kind  string   `json:"kind"` // "inclusion" or "consistency"
	Index int64    `json:"index"`
	First int64    `json:"first"`
	Size  int64    `json:"size"`
	Proof []string `json:"proof"`
	Leaf  string   `json:"leaf"`       // inclusion: the leaf hash
	Old   string   `json:"first_root"` // consistency: the root at First
	Root  string   `json:"root"`
}

// noteCheck: a signed note, the log keys (vkeys, note.NewVerifier) and the witness keys
// (cosignature/v1 vkeys, type 0x04) to open it with.
type noteCheck struct {
	Text      string   `json:"text"`
	Verifiers []string `json:"verifiers"`
	Cosigners []string `json:"cosigners"`
}

type noteResult struct {
	Verified []string `json:"verified"` // "name" of each signature note.Open verified, in order
	Error    string   `json:"error"`
}

type input struct {
	Records []string    `json:"records"`
	Sizes   []int64     `json:"sizes"`
	Checks  []check     `json:"checks"`
	Notes   []noteCheck `json:"notes"`
}

// cosigner verifies C2SP tlog-cosignature Ed25519 (cosignature/v1) signatures, which
// x/mod's note does not know: crypto/ed25519 over "cosignature/v1\ntime <t>\n" || body.
type cosigner struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

func (c cosigner) Name() string    { return c.name }
func (c cosigner) KeyHash() uint32 { return c.hash }
func (c cosigner) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	signed := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", t)), msg...)
	return ed25519.Verify(c.key, signed, sig[8:])
}

func newCosigner(vkey string) note.Verifier {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		fail(fmt.Errorf("not a vkey: %q", vkey))
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 33 || raw[0] != 0x04 {
		fail(fmt.Errorf("not a cosignature/v1 vkey: %q", vkey))
	}
	h := sha256.Sum256(append([]byte(parts[0]+"\n"), raw...))
	c := cosigner{name: parts[0], hash: binary.BigEndian.Uint32(h[:4]), key: ed25519.PublicKey(raw[1:])}
	if fmt.Sprintf("%08x", c.hash) != parts[1] {
		fail(fmt.Errorf("cosigner key hash mismatch: %q", vkey))
	}
	return c
}

func openNote(c noteCheck) noteResult {
	var verifiers []note.Verifier
	for _, vkey := range c.Verifiers {
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return noteResult{Error: "verifier: " + err.Error()}
		}
		verifiers = append(verifiers, v)
	}
	for _, vkey := range c.Cosigners {
		verifiers = append(verifiers, newCosigner(vkey))
	}
	n, err := note.Open([]byte(c.Text), note.VerifierList(verifiers...))
	if err != nil {
		return noteResult{Error: err.Error()}
	}
	r := noteResult{Verified: []string{}}
	for _, sig := range n.Sigs {
		r.Verified = append(r.Verified, sig.Name)
	}
	return r
}

type result struct {
	OK      bool     `json:"ok"`
	Error   string   `json:"error"`
	GoProof []string `json:"go_proof"`
}

type output struct {
	Leaves  []string          `json:"leaves"`
	Roots   map[string]string `json:"roots"`
	Results []result          `json:"results"`
	Notes   []noteResult      `json:"notes"`
}

func hash(text string) tlog.Hash {
	var h tlog.Hash
	raw, err := hex.DecodeString(text)
	if err != nil || len(raw) != len(h) {
		fail(fmt.Errorf("not a hash: %q", text))
	}
	copy(h[:], raw)
	return h
}

func hashes(texts []string) []tlog.Hash {
	out := make([]tlog.Hash, len(texts))
	for i, text := range texts {
		out[i] = hash(text)
	}
	return out
}

func texts(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = hex.EncodeToString(h[:])
	}
	return out
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gotlog:", err)
	os.Exit(2)
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fail(err)
	}
	var stored []tlog.Hash
	reader := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, index := range indexes {
			out[i] = stored[index]
		}
		return out, nil
	})
	out := output{Roots: map[string]string{}}
	for n, record := range in.Records {
		data, err := hex.DecodeString(record)
		if err != nil {
			fail(err)
		}
		leaf := tlog.RecordHash(data)
		out.Leaves = append(out.Leaves, hex.EncodeToString(leaf[:]))
		more, err := tlog.StoredHashes(int64(n), data, reader)
		if err != nil {
			fail(err)
		}
		stored = append(stored, more...)
	}
	for _, size := range in.Sizes {
		root, err := tlog.TreeHash(size, reader)
		if err != nil {
			fail(err)
		}
		out.Roots[fmt.Sprint(size)] = hex.EncodeToString(root[:])
	}
	for _, c := range in.Checks {
		var r result
		var err error
		switch c.Kind {
		case "inclusion":
			err = tlog.CheckRecord(tlog.RecordProof(hashes(c.Proof)), c.Size, hash(c.Root), c.Index, hash(c.Leaf))
			if c.Index >= 0 && c.Index < c.Size && c.Size <= int64(len(in.Records)) {
				proof, perr := tlog.ProveRecord(c.Size, c.Index, reader)
				if perr != nil {
					fail(perr)
				}
				r.GoProof = texts(proof)
			}
		case "consistency":
			err = tlog.CheckTree(tlog.TreeProof(hashes(c.Proof)), c.Size, hash(c.Root), c.First, hash(c.Old))
			if c.First >= 1 && c.First <= c.Size && c.Size <= int64(len(in.Records)) {
				proof, perr := tlog.ProveTree(c.Size, c.First, reader)
				if perr != nil {
					fail(perr)
				}
				r.GoProof = texts(proof)
			}
		default:
			fail(fmt.Errorf("unknown check %q", c.Kind))
		}
		r.OK = err == nil
		if err != nil {
			r.Error = err.Error()
		}
		out.Results = append(out.Results, r)
	}
	for _, c := range in.Notes {
		out.Notes = append(out.Notes, openNote(c))
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}
