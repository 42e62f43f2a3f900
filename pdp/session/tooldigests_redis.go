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

// toolParts splits a record into its five parts (a record of four, from
// before the asks were kept, has no fifth).
const toolParts = `
local function parts(s)
  local out, i = {}, 1
  for _ = 1, 4 do
    local j = string.find(s, '\n', i, true)
    if not j then break end
    table.insert(out, string.sub(s, i, j - 1))
    i = j + 1
  end
  table.insert(out, string.sub(s, i))
  return out
end
`

// seeToolScript: KEYS[1] the server's hash; ARGV tool, digest, definition,
// the bound. Returns the record, or false past the bound.
var seeToolScript = redis.NewScript(toolParts + `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return false end
  cur = ARGV[2] .. '\n' .. ARGV[3] .. '\n\n\n'
  redis.call('HSET', KEYS[1], ARGV[1], cur)
  return cur
end
local p = parts(cur)
local rec
if p[1] == ARGV[2] then
  rec = p[1] .. '\n' .. p[2] .. '\n\n\n'
elseif p[3] == ARGV[2] then
  return cur
else
  rec = p[1] .. '\n' .. p[2] .. '\n' .. ARGV[2] .. '\n' .. ARGV[3] .. '\n'
end
if rec ~= cur then redis.call('HSET', KEYS[1], ARGV[1], rec) end
return rec
`)

// keepToolScript: KEYS[1] the server's hash; ARGV tool, digest, definition.
var keepToolScript = redis.NewScript(toolParts + `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local rest = '\n\n'
if cur then
  local p = parts(cur)
  if p[3] ~= ARGV[2] then rest = p[3] .. '\n' .. (p[4] or '') .. '\n' .. (p[5] or '') end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. '\n' .. ARGV[3] .. '\n' .. rest)
return 1
`)

// askToolScript: KEYS[1] the server's hash; ARGV tool, seen digest, the
// ask's id, the bound on asks kept.
var askToolScript = redis.NewScript(toolParts + `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
local p = parts(cur)
if p[3] ~= ARGV[2] then return 0 end
local asks = {}
for id in string.gmatch(p[5] or '', '[^,]+') do table.insert(asks, id) end
table.insert(asks, ARGV[3])
while #asks > tonumber(ARGV[4]) do table.remove(asks, 1) end
redis.call('HSET', KEYS[1], ARGV[1], p[1] .. '\n' .. p[2] .. '\n' .. p[3] .. '\n' .. p[4] .. '\n' .. table.concat(asks, ','))
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

func (r *Redis) AskTool(ctx context.Context, k ToolKey, seenDigest, askID string) error {
	return r.fail(askToolScript.Run(ctx, r.client, []string{r.toolsKey(k)}, k.Tool, seenDigest, askID, MaxToolAsks).Err())
}
