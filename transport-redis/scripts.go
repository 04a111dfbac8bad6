package redisq

import "github.com/redis/go-redis/v9"

// Every settlement is one Lua script, so that what it checks and what it changes happen at once
// on the server: no other client runs between the fencing check and the XACK, and a copy (a
// retry, a delayed entry, a dead letter) is written in the same step that removes the original.
//
// The fencing check (owned) is the lease's token: the pending-entries list names the consumer
// that holds an entry and how many times it was delivered. A delivery holds its entry while
// both are what its claim left; XAUTOCLAIM by anyone (this process included) raises the count
// and may change the consumer, and from then on the first delivery's settlement is refused.
//
// KEYS[1] is the stream; ARGV[1] the group, ARGV[2] the consumer, ARGV[3] the entry id and
// ARGV[4] the delivery count of the claim, in every settling script.
const ownedLua = `
local function owned(stream, group, consumer, id, count)
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  return #p == 1 and p[1][2] == consumer and tonumber(p[1][4]) == tonumber(count)
end
`

// setField sets name to value in the flat field list f of a stream entry.
const setFieldLua = `
local function setfield(f, name, value)
  for i = 1, #f, 2 do
    if f[i] == name then f[i + 1] = value; return end
  end
  f[#f + 1] = name
  f[#f + 1] = value
end
`

// Replies of the settling scripts.
const (
	replyLost = 0 // the entry is no longer this delivery's (ErrLeaseLost)
	replyDone = 1
	replyGone = 2 // the entry was deleted from the stream while pending (ErrEntryGone); acknowledged
)

// requeueScript adds a copy of the entry at the stream's end with settle-retry-count set to
// ARGV[5] (the attempts spent), settle-id to ARGV[6] (the message id) and settle-enqueued-at to
// ARGV[7], then removes the original: retry.
var requeueScript = redis.NewScript(ownedLua + setFieldLua + `
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]) then return 0 end
local e = redis.call('XRANGE', KEYS[1], ARGV[3], ARGV[3])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
if #e == 0 then return 2 end
local f = e[1][2]
setfield(f, 'settle-retry-count', ARGV[5])
setfield(f, 'settle-id', ARGV[6])
setfield(f, 'settle-enqueued-at', ARGV[7])
redis.call('XADD', KEYS[1], '*', unpack(f))
redis.call('XDEL', KEYS[1], ARGV[3])
return 1
`)

// delayScript moves the entry into the delay set KEYS[2], due at ARGV[6] (unix milliseconds),
// with settle-retry-count set to ARGV[5], settle-id to ARGV[7] and settle-enqueued-at to ARGV[8]:
// retry after a delay. The member is the MessagePack of
// the original id (which keeps members unique) followed by the fields.
var delayScript = redis.NewScript(ownedLua + setFieldLua + `
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]) then return 0 end
local e = redis.call('XRANGE', KEYS[1], ARGV[3], ARGV[3])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
if #e == 0 then return 2 end
local f = e[1][2]
setfield(f, 'settle-retry-count', ARGV[5])
setfield(f, 'settle-id', ARGV[7])
setfield(f, 'settle-enqueued-at', ARGV[8])
table.insert(f, 1, ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[6], cmsgpack.pack(f))
redis.call('XDEL', KEYS[1], ARGV[3])
return 1
`)

// deadLetterScript adds a copy of the entry to the dead-letter stream KEYS[2] with the fields
// ARGV[7], ARGV[8], ... (name, value pairs: the dead-letter headers) set, removes the original,
// and releases its dedup key ARGV[5] (held by message id ARGV[6]) in KEYS[3].
var deadLetterScript = redis.NewScript(ownedLua + setFieldLua + releaseDedupLua + `
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]) then return 0 end
local e = redis.call('XRANGE', KEYS[1], ARGV[3], ARGV[3])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
if #e == 0 then return 2 end
local f = e[1][2]
for i = 7, #ARGV, 2 do setfield(f, ARGV[i], ARGV[i + 1]) end
redis.call('XADD', KEYS[2], '*', unpack(f))
redis.call('XDEL', KEYS[1], ARGV[3])
release(KEYS[3], ARGV[5], ARGV[6])
return 1
`)

// releaseScript gives the entry back at once: it stays pending, with its idle time set to
// ARGV[5] milliseconds (the lease), so the next XAUTOCLAIM of any consumer takes it. JUSTID
// leaves the delivery count alone; the claim that takes it raises it.
var releaseScript = redis.NewScript(ownedLua + `
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]) then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'IDLE', ARGV[5], 'JUSTID')
return 1
`)

// extendScript resets the idle time of the entries still held (ARGV[3], ARGV[4], ... as id,
// count pairs) to zero, and returns the ids no longer held.
var extendScript = redis.NewScript(ownedLua + `
local lost = {}
for i = 3, #ARGV, 2 do
  if owned(KEYS[1], ARGV[1], ARGV[2], ARGV[i], ARGV[i + 1]) then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
`)

// claimScript claims up to ARGV[5] entries idle for at least ARGV[3] milliseconds, scanning the
// pending list from cursor ARGV[4], and returns {next cursor, entries, delivery counts}.
// XAUTOCLAIM raises each entry's delivery count; the count is read back for the fencing token.
var claimScript = redis.NewScript(`
local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], 'COUNT', ARGV[5])
local counts = {}
for i, e in ipairs(r[2]) do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], e[1], e[1], 1)
  counts[i] = p[1][4]
end
return {r[1], r[2], counts}
`)

// moveScript moves up to ARGV[2] delayed entries due at ARGV[1] (unix milliseconds) or earlier
// from the delay set KEYS[2] to the end of the stream KEYS[1]; it returns how many it moved and
// the due time of the next one (false when none waits).
var moveScript = redis.NewScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, m in ipairs(due) do
  local f = cmsgpack.unpack(m)
  table.remove(f, 1)
  redis.call('XADD', KEYS[1], '*', unpack(f))
  redis.call('ZREM', KEYS[2], m)
end
local nxt = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
return {#due, nxt[2] or false}
`)

// publishScript publishes one message that needs more than an XADD: ARGV[1] is its dedup key
// (” for none), ARGV[2] its message id (” to take the entry's; never ” when delayed),
// ARGV[3] its due time in unix milliseconds (” for now), ARGV[4], ... its fields. A dedup key
// still held in KEYS[3] answers {0, the holding message's id} and stores nothing; otherwise the
// message goes to the stream KEYS[1], or to the delay set KEYS[2] when due later, the key is
// held for it, and the answer is {1, its id}.
var publishScript = redis.NewScript(`
if ARGV[1] ~= '' then
  local old = redis.call('HGET', KEYS[3], ARGV[1])
  if old then return {0, old} end
end
local f = {}
for i = 4, #ARGV do f[#f + 1] = ARGV[i] end
local mid = ARGV[2]
if ARGV[3] ~= '' then
  table.insert(f, 1, mid)
  redis.call('ZADD', KEYS[2], ARGV[3], cmsgpack.pack(f))
else
  local id = redis.call('XADD', KEYS[1], '*', unpack(f))
  if mid == '' then mid = id end
end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[3], ARGV[1], mid) end
return {1, mid}
`)

// releaseDedupLua releases dedup key k of KEYS[dedup] when message id held it.
const releaseDedupLua = `
local function release(hash, k, id)
  if k ~= '' and redis.call('HGET', hash, k) == id then redis.call('HDEL', hash, k) end
end
`

// dropConsumerScript deletes the consumer ARGV[2] from the group when it holds no entry.
var dropConsumerScript = redis.NewScript(`
local p = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if #p > 0 then return 0 end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
return 1
`)
