package session

import (
	"context"
	"strings"

	bolt "go.etcd.io/bbolt"
)

var toolsBucket = []byte("tools")

func toolKeyBytes(k ToolKey) []byte {
	return []byte(k.Workspace + "\x00" + k.Agent + "\x00" + k.Server + "\x00" + k.Tool)
}

// noteTool queues a tool record's new state, under the table's lock.
func (f *File) noteTool(k ToolKey, r ToolRecord) {
	f.enqueue(fileOp{bucket: toolsBucket, key: toolKeyBytes(k), value: []byte(r.encode())})
}

// loadTools reads the kept tool records into memory; one that cannot be
// read is dropped (the tool is trusted again on its next listing, as a
// tool never seen).
func (f *File) loadTools() error {
	return f.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(toolsBucket)
		if err != nil {
			return err
		}
		var bad [][]byte
		err = b.ForEach(func(key, v []byte) error {
			parts := strings.Split(string(key), "\x00")
			r, err := decodeToolRecord(string(v))
			if len(parts) != 4 || err != nil {
				bad = append(bad, append([]byte(nil), key...))
				return nil
			}
			f.tools.put(ToolKey{parts[0], parts[1], parts[2], parts[3]}, r)
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range bad {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

func (f *File) SeeTool(ctx context.Context, k ToolKey, digest string, def []byte) (ToolRecord, error) {
	r, err := f.Memory.SeeTool(ctx, k, digest, def)
	if err != nil {
		return r, err
	}
	return r, f.sync()
}

func (f *File) KeepTool(ctx context.Context, k ToolKey, digest string, def []byte) error {
	_ = f.Memory.KeepTool(ctx, k, digest, def)
	return f.sync()
}

func (f *File) AskTool(ctx context.Context, k ToolKey, seenDigest, askID string) error {
	_ = f.Memory.AskTool(ctx, k, seenDigest, askID)
	return f.sync()
}
