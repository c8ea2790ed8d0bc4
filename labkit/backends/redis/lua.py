"""The Lua scripts that make each Redis step atomic, for ``redis_streams`` and ``redis_store``.

Redis runs a script without interleaving any other command, so a check and the writes
it guards happen as one step: a crash (of the client) or a second consumer cannot slip
between them. A ``MULTI`` block cannot do this when a write depends on a read (it only
queues commands); ``WATCH`` can, with retries. Each script names its ``KEYS`` and
``ARGV``; every key it touches is declared, except the per-job keys the enqueue script
derives, which is fine on a single Redis and would need hash tags on a cluster.
"""

# Record the key and append the entry in one step. KEYS: key record, stream.
# ARGV: record value, ttl (0: none), maxlen (0: none), then the entry's field/value pairs.
ADD = """
local set
if tonumber(ARGV[2]) > 0 then
  set = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2])
else
  set = redis.call('SET', KEYS[1], ARGV[1], 'NX')
end
if not set then return false end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
if tonumber(ARGV[3]) > 0 then
  return redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[3], '*', unpack(fields))
end
return redis.call('XADD', KEYS[2], '*', unpack(fields))
"""

# After the effect: write "done", then drop the claim only if this owner still holds it
# (an expired claim another consumer took is theirs). KEYS: done record, claim.
# ARGV: ttl in seconds, owner. Returns 1 if the claim was still this owner's.
FINISH_KEY = """
redis.call('SET', KEYS[1], 'done', 'EX', ARGV[1])
if redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
"""

# Move one dead letter back to the stream, only if it is still dead: the XDEL decides, so
# two operators redriving the same entries at once move each one once. KEYS: dead-letter
# stream, stream. ARGV: the dead letter's id, then the new entry's field/value pairs.
# Returns the new entry's id, or false when another redrive moved it first.
REDRIVE_ENTRY = """
if redis.call('XDEL', KEYS[1], ARGV[1]) == 0 then return false end
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
return redis.call('XADD', KEYS[2], '*', unpack(fields))
"""

# Accept a job unless its key exists: status hash, id and XADD together.
# KEYS: job hash, id counter, id->key hash, stream.
# ARGV: key kind queue payload fingerprint max_attempts now run_after
ENQUEUE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local id = redis.call('INCR', KEYS[2])
local entry = redis.call('XADD', KEYS[4], '*', 'key', ARGV[1], 'kind', ARGV[2], 'payload', ARGV[4])
redis.call('HSET', KEYS[1], 'id', id, 'key', ARGV[1], 'kind', ARGV[2], 'queue', ARGV[3],
  'payload', ARGV[4], 'fingerprint', ARGV[5], 'max_attempts', ARGV[6], 'created_at', ARGV[7],
  'updated_at', ARGV[7], 'run_after', ARGV[8], 'state', 'pending', 'attempt', 0,
  'redrives', 0, 'deliveries', 0, 'entry', entry)
redis.call('HSET', KEYS[3], id, ARGV[1])
return id
"""

# The claim, atomic: take the entry if its job may run now and hand it to this worker as
# its next attempt. Attempts are counted here, when a handler is about to start, as the SQL
# stores count them at claim; the PEL's delivery count is kept beside them as
# 'deliveries', for the operator only. A delivery that reached no handler (read before it
# was due, or by a consumer that died before starting it) is no attempt, so it cannot
# bury a job that never ran. A running job whose holder is gone (its lease ran out on
# the clock, or it sat idle past min_idle_ms on the server's) ends that attempt as
# 'lease_expired'; if it was the last one allowed, the job goes dead instead of running
# again (the crash-loop cap, as the SQL stores' bury_exhausted).
# KEYS: stream, job hash, attempts list, dead stream.
# ARGV: group entry consumer now lease_until min_idle_ms mode('fresh'|'take')
# Returns the attempt handed out, 0 when not taken, -1 when buried.
CLAIM = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 then return 0 end
local owner, idle, n = p[1][2], tonumber(p[1][3]), tonumber(p[1][4])
local h = redis.call('HMGET', KEYS[2], 'state', 'run_after', 'lease_until', 'max_attempts',
  'attempt', 'lease_owner')
local state, now, mine = h[1], tonumber(ARGV[4]), owner == ARGV[3]
local ok = false
local due = tonumber(h[2]) <= now
if ARGV[7] == 'fresh' then ok = mine and state == 'pending' and due
elseif state == 'retry_wait' then ok = due
elseif state == 'running' then
  ok = tonumber(h[3]) <= now or ((not mine) and idle >= tonumber(ARGV[6]))
elseif state == 'pending' then ok = due and (mine or idle >= tonumber(ARGV[6])) end
if not ok then return 0 end
local attempt, max = tonumber(h[5]), tonumber(h[4])
if state == 'running' then
  local last = redis.call('LINDEX', KEYS[3], -1)
  if last then
    local a = cjson.decode(last)
    if a.finished_at == nil then
      a.finished_at = now
      a.outcome = 'lease_expired'
      redis.call('LSET', KEYS[3], -1, cjson.encode(a))
    end
  end
  if attempt >= max then
    local reason = 'lease expired on the last attempt (' .. attempt .. ' of ' .. max ..
      '): the worker died or hung every time (delivered ' .. n .. ' times)'
    local j = redis.call('HMGET', KEYS[2], 'key', 'kind', 'payload')
    local dead = redis.call('XADD', KEYS[4], '*', 'key', j[1], 'kind', j[2], 'payload', j[3],
      'origin', ARGV[2], 'reason', reason, 'deliveries', n, 'attempts', attempt)
    redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
    redis.call('HSET', KEYS[2], 'state', 'dead', 'dead_reason', reason, 'error_class',
      'LeaseExpired', 'last_error', 'LeaseExpired: worker ' .. (h[6] or '?') ..
      ' never finished attempt ' .. attempt, 'deliveries', n, 'lease_owner', '',
      'lease_token', '', 'lease_until', '', 'updated_at', ARGV[4], 'dead_entry', dead)
    return -1
  end
end
-- This consumer's own read that never started is reused; any other take is a delivery.
if ARGV[7] ~= 'fresh' and not (state == 'pending' and mine) then
  if #redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2]) == 0 then return 0 end
  n = n + 1
end
attempt = attempt + 1
redis.call('RPUSH', KEYS[3],
  cjson.encode({attempt = attempt, worker = ARGV[3], started_at = now, deliveries = n}))
redis.call('HSET', KEYS[2], 'state', 'running', 'attempt', attempt, 'deliveries', n,
  'lease_owner', ARGV[3], 'lease_token', ARGV[2] .. '|' .. n, 'lease_until', ARGV[5],
  'updated_at', ARGV[4])
return attempt
"""

# The fence: act only if the entry is still pending with this consumer and this many
# deliveries, and the job record still holds this lease token; close the open attempt
# with the state reached.
# KEYS: stream, job hash, dead stream, attempts list.
# ARGV: group entry consumer deliveries op n_hash_args hash_args... dead_fields...
FENCED = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tostring(p[1][4]) ~= ARGV[4] then return 0 end
local held = redis.call('HMGET', KEYS[2], 'state', 'lease_token')
if held[1] ~= 'running' or held[2] ~= ARGV[2] .. '|' .. ARGV[4] then return 0 end
local op = ARGV[5]
local n = tonumber(ARGV[6])
local fields = {}
for i = 7, 6 + n do fields[#fields + 1] = ARGV[i] end
if op == 'ack' or op == 'dead' then redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) end
if op == 'dead' then
  local dead = {}
  for i = 7 + n, #ARGV do dead[#dead + 1] = ARGV[i] end
  local id = redis.call('XADD', KEYS[3], '*', unpack(dead))
  fields[#fields + 1] = 'dead_entry'
  fields[#fields + 1] = id
end
if op == 'touch' then redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'JUSTID') end
redis.call('HSET', KEYS[2], unpack(fields))
if op ~= 'touch' then
  local last = redis.call('LINDEX', KEYS[4], -1)
  if last then
    local a = cjson.decode(last)
    local s = redis.call('HMGET', KEYS[2], 'state', 'updated_at', 'last_error', 'error_class')
    a.outcome, a.finished_at = s[1], tonumber(s[2])
    if s[1] ~= 'succeeded' then a.error, a.error_class = s[3], s[4] end
    redis.call('LSET', KEYS[4], -1, cjson.encode(a))
  end
end
return 1
"""

# Redrive, atomic: a dead job back on the stream with the same key, its dead letter
# deleted and its record pending with no attempt spent, all or nothing. Sent as separate
# commands, a crash after the XADD left an entry whose record still said dead, which no
# claim takes; and two operators could both redrive one job. The check is in the script.
# KEYS: job hash, stream, dead stream. ARGV: note now.
# Returns {'ok', new entry id}, or {'refused', the state the job is in}.
REDRIVE = """
local h = redis.call('HMGET', KEYS[1], 'state', 'key', 'kind', 'payload', 'dead_entry')
if h[1] ~= 'dead' then return {'refused', h[1] or 'missing'} end
local from = h[5] or ''
local entry = redis.call('XADD', KEYS[2], '*', 'key', h[2], 'kind', h[3], 'payload', h[4],
  'redriven_from', from, 'note', ARGV[1])
if from ~= '' then redis.call('XDEL', KEYS[3], from) end
redis.call('HINCRBY', KEYS[1], 'redrives', 1)
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempt', 0, 'deliveries', 0, 'entry', entry,
  'run_after', ARGV[2], 'dead_reason', '', 'dead_entry', '', 'updated_at', ARGV[2],
  'last_delay', 0.0, 'window_start', ARGV[2])
return {'ok', entry}
"""
