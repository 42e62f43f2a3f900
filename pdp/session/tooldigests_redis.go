package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/redis/go-redis/v9"
)

// A server's tools are one hash per workspace, agent and server: a field
// per tool, its record as ToolRecord.encode writes it. The scripts change
// a record atomically, so replicas listing the same server at once agree
// on what was seen first.
func (r *Redis) toolsKey(k ToolKey) string {
	sum := sha256.Sum256([]byte(k.Workspace + "\x00" + k.Agent + "\x00" + k.Server))
	return r.prefix + "tools:" + hex.EncodeToString(sum[:])
}

// seeToolScript: KEYS[1] the server's hash; ARGV tool, digest, definition,
// the bound. Returns the record, or false past the bound.
var seeToolScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return false end
  cur = ARGV[2] .. '\n' .. ARGV[3] .. '\n\n'
  redis.call('HSET', KEYS[1], ARGV[1], cur)
  return cur
end
local a = string.find(cur, '\n', 1, true)
local b = string.find(cur, '\n', a + 1, true)
local c = string.find(cur, '\n', b + 1, true)
local kept, def, seen = string.sub(cur, 1, a - 1), string.sub(cur, a + 1, b - 1), string.sub(cur, b + 1, c - 1)
local rec
if kept == ARGV[2] then
  rec = kept .. '\n' .. def .. '\n\n'
elseif seen == ARGV[2] then
  return cur
else
  rec = kept .. '\n' .. def .. '\n' .. ARGV[2] .. '\n' .. ARGV[3]
end
if rec ~= cur then redis.call('HSET', KEYS[1], ARGV[1], rec) end
return rec
`)

// keepToolScript: KEYS[1] the server's hash; ARGV tool, digest, definition.
var keepToolScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local rest = '\n'
if cur then
  local a = string.find(cur, '\n', 1, true)
  local b = string.find(cur, '\n', a + 1, true)
  local c = string.find(cur, '\n', b + 1, true)
  local seen = string.sub(cur, b + 1, c - 1)
  if seen ~= ARGV[2] then rest = string.sub(cur, b + 1) end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. '\n' .. ARGV[3] .. '\n' .. rest)
return 1
`)

func (r *Redis) SeeTool(ctx context.Context, k ToolKey, digest string, def []byte) (ToolRecord, error) {
	v, err := seeToolScript.Run(ctx, r.client, []string{r.toolsKey(k)}, k.Tool, digest, string(def), MaxToolsPerServer).Text()
	if errors.Is(err, redis.Nil) {
		return ToolRecord{}, ErrTooManyTools
	}
	if err != nil {
		return ToolRecord{}, r.fail(err)
	}
	return decodeToolRecord(v)
}

func (r *Redis) ToolRecord(ctx context.Context, k ToolKey) (ToolRecord, bool, error) {
	v, err := r.client.HGet(ctx, r.toolsKey(k), k.Tool).Result()
	if errors.Is(err, redis.Nil) {
		return ToolRecord{}, false, nil
	}
	if err != nil {
		return ToolRecord{}, false, r.fail(err)
	}
	rec, err := decodeToolRecord(v)
	return rec, err == nil, err
}

func (r *Redis) KeepTool(ctx context.Context, k ToolKey, digest string, def []byte) error {
	return r.fail(keepToolScript.Run(ctx, r.client, []string{r.toolsKey(k)}, k.Tool, digest, string(def)).Err())
}
